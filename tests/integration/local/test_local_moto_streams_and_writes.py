"""What the runtime changes in how moto runs must not change what moto answers:

- the stream mappings read the stream in process (outbox_local.moto_streams): the records Lambda's event gets
  are the ones `dynamodbstreams` answers over HTTP, Binary, sets, nested values and every event name included;
- DynamoDB writes are isolated from each other (outbox_local.moto_transactions): of writers racing one
  conditional write on one item, exactly one wins, as on DynamoDB.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from outbox_local.moto_streams import InProcessStreams
from outbox_local.moto_transactions import atomic_transactions
from outbox_local.stream_records import lambda_record
from tests.support.aws import REGION, endpoint_client


def streamed_table(endpoint: str) -> str:
    dynamodb = endpoint_client(endpoint, "dynamodb")
    dynamodb.create_table(
        TableName="streamed",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )
    return str(dynamodb.describe_table(TableName="streamed")["Table"]["LatestStreamArn"])


def read_all(streams: Any, stream_arn: str, iterator_type: str = "TRIM_HORIZON") -> tuple[Any, ...]:
    """The records as the stream mapping shapes them, what a second read finds, and the shard's id."""
    [shard] = streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]
    iterator = streams.get_shard_iterator(
        StreamArn=stream_arn, ShardId=shard["ShardId"], ShardIteratorType=iterator_type
    )["ShardIterator"]
    first = streams.get_records(ShardIterator=iterator, Limit=1000)
    then = streams.get_records(ShardIterator=first["NextShardIterator"], Limit=1000)
    shaped = [lambda_record(record, stream_arn, REGION) for record in first["Records"]]
    return (
        [(r.payload, r.sequence_number) for r in shaped],
        [r.created_at for r in shaped],
        then["Records"],
        shard,
    )


def test_the_stream_read_in_process_is_what_dynamodbstreams_answers(endpoint: str) -> None:
    # Given a table's stream with an INSERT of every kind of value, a MODIFY and a REMOVE
    stream_arn = streamed_table(endpoint)
    dynamodb = endpoint_client(endpoint, "dynamodb")
    nested = {"M": {"n": {"N": "1.50"}, "l": {"L": [{"B": b"\x01"}, {"NULL": True}, {"BOOL": False}]}}}
    values = {"b": {"B": b"\x00\xff"}, "bs": {"BS": [b"x"]}, "ss": {"SS": ["p", "q"]}, "m": nested}
    dynamodb.put_item(TableName="streamed", Item={"pk": {"S": "a"}, **values})
    dynamodb.put_item(TableName="streamed", Item={"pk": {"S": "a"}, "v": {"N": "2"}})
    dynamodb.delete_item(TableName="streamed", Key={"pk": {"S": "a"}})

    # When the records are read over HTTP and in process
    over_http = read_all(endpoint_client(endpoint, "dynamodbstreams"), stream_arn)
    in_process = read_all(InProcessStreams(REGION), stream_arn)

    # Then the events Lambda would send are the same, and both readers then find nothing new
    records, created, then, shard = in_process
    assert [payload["eventName"] for payload, _ in records] == ["INSERT", "MODIFY", "REMOVE"]
    assert (records, then, shard) == (over_http[0], over_http[2], over_http[3])
    # (over HTTP the creation time comes to the millisecond; in process it is exact)
    assert all(abs(exact - sent) < 0.001 for exact, sent in zip(created, over_http[1], strict=True))
    # and a LATEST iterator starts after what is there, as over HTTP
    assert read_all(InProcessStreams(REGION), stream_arn, "LATEST")[0] == []


def test_of_writers_racing_one_conditional_write_on_an_item_exactly_one_wins(endpoint: str) -> None:
    # Given a table, and sixteen writers that each put the same new item only if it does not exist
    dynamodb = endpoint_client(endpoint, "dynamodb")
    dynamodb.create_table(
        TableName="raced",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    start = threading.Barrier(16)

    def claim(writer: int) -> bool:
        start.wait()  # all at once
        try:
            dynamodb.put_item(
                TableName="raced",
                Item={"pk": {"S": "lease"}, "owner": {"N": str(writer)}},
                ConditionExpression="attribute_not_exists(pk)",
            )
        except dynamodb.exceptions.ConditionalCheckFailedException:
            return False
        return True

    # When they race, with the runtime's correction in place
    with atomic_transactions(), ThreadPoolExecutor(16) as writers:
        won = list(writers.map(claim, range(16)))

    # Then exactly one won, and the item is that writer's
    assert won.count(True) == 1
    item = dynamodb.get_item(TableName="raced", Key={"pk": {"S": "lease"}})["Item"]
    assert item["owner"] == {"N": str(won.index(True))}
