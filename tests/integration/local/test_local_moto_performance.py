"""What the runtime changes in how moto runs, for load, must not change what moto answers:

- the stream mappings read the stream in process (outbox_local.moto_streams): the records Lambda's event gets
  are the ones `dynamodbstreams` answers over HTTP, Binary, sets, nested values and every event name included;
- moto's hot paths made cheap (outbox_local.moto_performance) answer as before: queue counts, receives, an
  EventBridge rule's delivery to SQS;
- DynamoDB writes are isolated from each other (outbox_local.moto_transactions): of writers racing one
  conditional write on one item, exactly one wins, as on DynamoDB.
"""

from __future__ import annotations

import json
import string
import threading
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import moto.core.utils
import moto.sqs.models
import moto.sqs.utils
import pytest
from moto.dynamodb.exceptions import ItemSizeTooLarge
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.table import Table

from outbox_local import moto_performance
from outbox_local.aws_server import LocalAwsServer
from outbox_local.endpoint import LOCAL_CREDENTIALS
from outbox_local.faults import FaultInjector
from outbox_local.moto_performance import ITEM_SIZE_LIMIT, RECEIPT_HANDLE_LENGTH, lighter_moto
from outbox_local.moto_streams import InProcessStreams
from outbox_local.moto_transactions import atomic_transactions
from outbox_local.stream_records import lambda_record

REGION = "us-east-1"


@pytest.fixture
def endpoint() -> Iterator[str]:
    """The runtime's moto server on a free port, emptied first (moto's state is process-wide)."""
    server = LocalAwsServer(FaultInjector())
    server.start()
    try:
        reset = urllib.request.Request(f"{server.endpoint_url}/moto-api/reset", method="POST")  # noqa: S310
        with urllib.request.urlopen(reset, timeout=10):  # noqa: S310 - our own loopback server
            pass
        yield server.endpoint_url
    finally:
        server.stop()


def client(endpoint: str, service: str) -> Any:
    return boto3.client(service, endpoint_url=endpoint, region_name=REGION, **LOCAL_CREDENTIALS)


def streamed_table(endpoint: str) -> str:
    dynamodb = client(endpoint, "dynamodb")
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
    dynamodb = client(endpoint, "dynamodb")
    nested = {"M": {"n": {"N": "1.50"}, "l": {"L": [{"B": b"\x01"}, {"NULL": True}, {"BOOL": False}]}}}
    values = {"b": {"B": b"\x00\xff"}, "bs": {"BS": [b"x"]}, "ss": {"SS": ["p", "q"]}, "m": nested}
    dynamodb.put_item(TableName="streamed", Item={"pk": {"S": "a"}, **values})
    dynamodb.put_item(TableName="streamed", Item={"pk": {"S": "a"}, "v": {"N": "2"}})
    dynamodb.delete_item(TableName="streamed", Key={"pk": {"S": "a"}})

    # When the records are read over HTTP and in process
    over_http = read_all(client(endpoint, "dynamodbstreams"), stream_arn)
    in_process = read_all(InProcessStreams(REGION), stream_arn)

    # Then the events Lambda would send are the same, and both readers then find nothing new
    records, created, then, shard = in_process
    assert [payload["eventName"] for payload, _ in records] == ["INSERT", "MODIFY", "REMOVE"]
    assert (records, then, shard) == (over_http[0], over_http[2], over_http[3])
    # (over HTTP the creation time comes to the millisecond; in process it is exact)
    assert all(abs(exact - sent) < 0.001 for exact, sent in zip(created, over_http[1], strict=True))
    # and a LATEST iterator starts after what is there, as over HTTP
    assert read_all(InProcessStreams(REGION), stream_arn, "LATEST")[0] == []


def test_the_lighter_hot_paths_answer_what_moto_answers(endpoint: str) -> None:
    # Given a queue with visible, delayed and in-flight messages, and a bus rule delivering to a queue
    sqs, events = client(endpoint, "sqs"), client(endpoint, "events")
    url = sqs.create_queue(QueueName="held")["QueueUrl"]
    for index in range(12):
        sqs.send_message(QueueUrl=url, MessageBody=str(index), DelaySeconds=300 if index % 4 == 0 else 0)
    sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=5, VisibilityTimeout=300)
    target = sqs.create_queue(QueueName="target")["QueueUrl"]
    target_arn = sqs.get_queue_attributes(QueueUrl=target, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    events.put_rule(Name="all", EventPattern=json.dumps({"source": ["tests"]}))
    events.put_targets(Rule="all", Targets=[{"Id": "q", "Arn": target_arn}])

    def observe() -> tuple[Any, ...]:
        counts = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        events.put_events(Entries=[{"Source": "tests", "DetailType": "T", "Detail": json.dumps({"n": 1})}])
        [delivered] = sqs.receive_message(QueueUrl=target)["Messages"]
        sqs.delete_message(QueueUrl=target, ReceiptHandle=delivered["ReceiptHandle"])
        event = json.loads(delivered["Body"])
        return counts, {key: value for key, value in event.items() if key not in {"id", "time"}}

    # When the same things are asked of moto as it is and with the hot paths made cheap
    before = observe()
    with lighter_moto():
        during = observe()
        received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    counts_after = observe()[0]

    # Then the answers are the same: of 12 messages, 3 delayed, 5 in flight, 4 visible, and those 4 received
    assert before == during
    counts = before[0]
    assert [counts[f"ApproximateNumberOfMessages{kind}"] for kind in ("", "Delayed", "NotVisible")] == [
        "4",
        "3",
        "5",
    ]
    assert len(received) == 4
    assert all(int(message["Body"]) % 4 for message in received)  # none of the delayed ones
    # and moto as it is then counts them in flight
    assert [counts_after[f"ApproximateNumberOfMessages{kind}"] for kind in ("", "Delayed", "NotVisible")] == [
        "0",
        "3",
        "9",
    ]


def test_of_writers_racing_one_conditional_write_on_an_item_exactly_one_wins(endpoint: str) -> None:
    # Given a table, and sixteen writers that each put the same new item only if it does not exist
    dynamodb = client(endpoint, "dynamodb")
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


def test_metric_statistics_with_the_metric_index_answer_what_moto_answers(endpoint: str) -> None:
    # Given datapoints of two metrics in one namespace, with and without dimensions, and of another namespace
    cloudwatch = client(endpoint, "cloudwatch")
    now = datetime.now(UTC).replace(microsecond=0)

    def put(offset_s: int) -> None:
        for namespace, metric, dimensions in (
            ("Outbox", "Held", [{"Name": "service", "Value": "a"}]),
            ("Outbox", "Held", []),
            ("Outbox", "Other", []),
            ("Elsewhere", "Held", []),
        ):
            cloudwatch.put_metric_data(
                Namespace=namespace,
                MetricData=[
                    {
                        "MetricName": metric,
                        "Dimensions": dimensions,
                        "Timestamp": now - timedelta(seconds=offset_s),
                        "Value": float(offset_s % 7),
                    }
                ],
            )

    def observe() -> list[Any]:
        answers = []
        for dimensions in ([{"Name": "service", "Value": "a"}], []):
            answer = cloudwatch.get_metric_statistics(
                Namespace="Outbox",
                MetricName="Held",
                Dimensions=dimensions,
                StartTime=now - timedelta(seconds=90),
                EndTime=now + timedelta(seconds=1),
                Period=60,
                Statistics=["Maximum", "Sum", "SampleCount"],
            )
            answers.append(sorted(answer["Datapoints"], key=lambda point: point["Timestamp"]))
        return answers

    for offset_s in range(0, 120, 10):
        put(offset_s)

    # When the same is asked of moto as it is and with the index, also after more datapoints came in
    before = observe()
    with lighter_moto():
        during = observe()
        put(5)
        grown = observe()
    after = observe()

    # Then the answers are the same
    assert before == during
    assert all(before)  # datapoints were found, with and without the dimension
    assert grown == after
    assert grown != before


def test_names_are_converted_once_while_the_hot_paths_are_cheap_and_as_moto_does_after() -> None:
    # Given moto's name conversion as its modules imported it
    original = moto.core.utils.camelcase_to_underscores
    names = ["ApproximateNumberOfMessagesNotVisible", "QueueArn", "theNewAttribute", "", "ABTest"]
    expected = [original(name) for name in names]

    # When the hot paths are made cheap, Then every module converts through one cache, with moto's answers
    with lighter_moto():
        converted = vars(moto.sqs.models)["camelcase_to_underscores"]
        assert converted is moto.core.utils.camelcase_to_underscores
        assert converted is not original
        assert [converted(name) for name in names] == expected
        assert [converted(name) for name in names] == expected

    # and afterwards each module has moto's own again
    assert vars(moto.sqs.models)["camelcase_to_underscores"] is original
    assert moto.core.utils.camelcase_to_underscores is original


def keyed_table(endpoint: str, name: str, hash_type: str, range_type: str | None) -> Any:
    """A table keyed `h` (and `r`), indexed on `g` (and `r`), holding keys whose text order is not theirs."""
    dynamodb = client(endpoint, "dynamodb")
    keys = [{"AttributeName": "h", "KeyType": "HASH"}]
    attributes = [
        {"AttributeName": "h", "AttributeType": hash_type},
        {"AttributeName": "g", "AttributeType": "S"},
    ]
    index_keys = [{"AttributeName": "g", "KeyType": "HASH"}]
    if range_type is not None:
        keys.append({"AttributeName": "r", "KeyType": "RANGE"})
        attributes.append({"AttributeName": "r", "AttributeType": range_type})
        index_keys.append({"AttributeName": "r", "KeyType": "RANGE"})
    dynamodb.create_table(
        TableName=name,
        KeySchema=keys,
        AttributeDefinitions=attributes,
        BillingMode="PAY_PER_REQUEST",
        GlobalSecondaryIndexes=[
            {"IndexName": "by_g", "KeySchema": index_keys, "Projection": {"ProjectionType": "ALL"}}
        ],
    )
    values: dict[str, list[Any]] = {
        "S": ["b", "a10", "a9", "A", "ab", "a"],
        "N": ["10", "9", "-1", "1.5", "100", "0"],
    }
    values["B"] = [text.encode() for text in values["S"]]
    for index, hash_value in enumerate(values[hash_type]):
        for range_value in values[range_type][: 1 + index % 3] if range_type else [None]:
            item: dict[str, Any] = {"h": {hash_type: hash_value}, "g": {"S": "odd" if index % 2 else "even"}}
            if range_type is not None:
                item["r"] = {range_type: range_value}
            dynamodb.put_item(TableName=name, Item=item)
    return dynamodb


@pytest.mark.parametrize(("hash_type", "range_type"), [("S", None), ("N", "N"), ("B", "S"), ("S", "N")])
def test_items_walked_in_key_order_answer_what_moto_answers(
    endpoint: str, hash_type: str, range_type: str | None
) -> None:
    dynamodb = keyed_table(endpoint, "keyed", hash_type, range_type)

    def observe() -> tuple[Any, ...]:
        scanned = dynamodb.scan(TableName="keyed")["Items"]
        paged = dynamodb.scan(TableName="keyed", Limit=2)
        indexed = dynamodb.query(
            TableName="keyed",
            IndexName="by_g",
            KeyConditionExpression="g = :g",
            ExpressionAttributeValues={":g": {"S": "odd"}},
        )["Items"]
        backwards = dynamodb.query(
            TableName="keyed",
            IndexName="by_g",
            KeyConditionExpression="g = :g",
            ExpressionAttributeValues={":g": {"S": "even"}},
            ScanIndexForward=False,
            Limit=3,
        )
        return scanned, paged["Items"], paged.get("LastEvaluatedKey"), indexed, backwards["Items"]

    before = observe()
    with lighter_moto():
        during = observe()
    assert during == before
    assert len(before[0]) >= 6


def test_items_of_keys_of_mixed_types_are_left_to_moto_s_own_sort() -> None:
    sorted_by_moto = Table.all_items
    calls: list[int] = []

    class Mixed:
        range_key_attr = None

        def __init__(self) -> None:
            self.items = {"a": _Keyed("S", "a"), 1: _Keyed("N", "1")}

    def counting(self: Any) -> list[Any]:
        calls.append(1)
        return list(self.items.values())

    Table.all_items = counting  # type: ignore[method-assign]
    try:
        with lighter_moto():
            stand_in: Any = Mixed()  # moto's shape only
            items = Table.all_items(stand_in)
    finally:
        Table.all_items = sorted_by_moto  # type: ignore[method-assign]
    assert calls == [1]
    assert len(items) == 2


def _item_of_size(size: int) -> dict[str, Any]:
    """Attributes whose size, as moto and DynamoDB count it (names and values in UTF-8 bytes), is `size`."""
    fixed = len("pk") + len("k") + len("blob") + len("é".encode())  # a two-byte character among the rest
    return {"pk": {"S": "k"}, "blob": {"S": "é" + "x" * (size - fixed)}}


@pytest.mark.parametrize("size", [ITEM_SIZE_LIMIT - 1, ITEM_SIZE_LIMIT, ITEM_SIZE_LIMIT + 1])
def test_a_new_item_sized_once_is_refused_exactly_when_moto_refuses_it(size: int) -> None:
    def build() -> Any:
        attributes = _item_of_size(size)
        return Item(DynamoType(attributes["pk"]), None, attributes)

    def outcome() -> Any:
        try:
            item = build()
        except ItemSizeTooLarge:
            return "refused"
        return (type(item.attrs), item.attrs, item.hash_key, item.range_key)

    # Given moto's own item construction, which checks the size as it sets each attribute
    by_moto = outcome()

    # When the item is sized once, Then it is refused or built exactly as moto refuses or builds it
    with lighter_moto():
        assert Item.__init__ is not _MOTO_ITEM_INIT
        sized_once = outcome()
    assert sized_once == by_moto
    assert (by_moto == "refused") is (size > ITEM_SIZE_LIMIT)  # moto's limit is still the one copied
    assert Item.__init__ is _MOTO_ITEM_INIT


def test_an_item_built_while_the_hot_paths_are_cheap_still_checks_each_later_attribute() -> None:
    with lighter_moto():
        attributes = _item_of_size(ITEM_SIZE_LIMIT - 10)
        item = Item(DynamoType(attributes["pk"]), None, attributes)
        with pytest.raises(ItemSizeTooLarge):
            item.attrs["more"] = DynamoType({"S": "x" * 20})  # what an update expression does


@pytest.mark.parametrize("malformed", [{"L": [{}]}, {"S": None}, {"M": {"x": {}}}])
def test_an_item_past_the_limit_is_refused_before_a_later_attribute_moto_cannot_convert(
    malformed: dict[str, Any],
) -> None:
    def outcome() -> str:
        # Given an item past the limit, then an attribute moto's conversion or sizing would fail on
        attributes = {**_item_of_size(ITEM_SIZE_LIMIT + 1), "malformed": malformed}
        try:
            Item(DynamoType(attributes["pk"]), None, attributes)
        except Exception as error:  # the error is what is compared
            return type(error).__name__
        return "built"

    by_moto = outcome()
    assert by_moto == "ItemSizeTooLarge"  # moto refuses at the attribute that passes the limit

    # When sized once, Then the same refusal, not the later attribute's own error
    with lighter_moto():
        assert outcome() == by_moto


_MOTO_ITEM_INIT = Item.__init__


def test_receipt_handles_are_drawn_in_one_call_as_moto_draws_them_and_moto_s_is_back_after(
    endpoint: str,
) -> None:
    # Given moto's own receipt handles: the length and letters the layer copies
    original = moto.sqs.utils.generate_receipt_handle
    by_moto = {original() for _ in range(50)}
    assert {len(handle) for handle in by_moto} == {RECEIPT_HANDLE_LENGTH}
    assert set().union(*by_moto) <= set(string.ascii_lowercase)

    # When a message is received while the hot paths are cheap
    sqs = client(endpoint, "sqs")
    url = sqs.create_queue(QueueName="handles")["QueueUrl"]
    with lighter_moto():
        assert vars(moto.sqs.models)["generate_receipt_handle"] is not original
        handles = []
        for body in ("a", "b", "c"):
            sqs.send_message(QueueUrl=url, MessageBody=body)
            received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1)["Messages"][0]
            handles.append(received["ReceiptHandle"])
            sqs.delete_message(QueueUrl=url, ReceiptHandle=received["ReceiptHandle"])

    # Then its handle is as moto's are, each its own, the message deleted by it; and moto's is back after
    assert all(
        len(handle) == RECEIPT_HANDLE_LENGTH and set(handle) <= set(string.ascii_lowercase)
        for handle in handles
    )
    assert len(set(handles)) == 3
    assert "Messages" not in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0)
    assert vars(moto.sqs.models)["generate_receipt_handle"] is original


class _Keyed:
    def __init__(self, kind: str, value: str) -> None:
        self.hash_key = type("Key", (), {"type": kind, "cast_value": value})()
        self.range_key = None


def _sends_and_deletes(sqs: Any, name: str) -> list[Any]:
    """What moto answers to sends and deletes on a standard queue and on FIFO queues with and without
    content-based deduplication, a duplicate within the window among them, and every kind of delete."""
    answers: list[Any] = []
    standard = sqs.create_queue(QueueName=f"{name}-standard")["QueueUrl"]
    content = sqs.create_queue(
        QueueName=f"{name}-content.fifo",
        Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"},
    )["QueueUrl"]
    explicit = sqs.create_queue(QueueName=f"{name}-explicit.fifo", Attributes={"FifoQueue": "true"})[
        "QueueUrl"
    ]
    for body in ("a", "b", "a"):
        sqs.send_message(QueueUrl=standard, MessageBody=body)
        sqs.send_message(QueueUrl=content, MessageBody=body, MessageGroupId="g")
        sqs.send_message(QueueUrl=explicit, MessageBody=body, MessageGroupId="g", MessageDeduplicationId=body)
    for refused in (
        {"QueueUrl": explicit, "MessageBody": "c", "MessageGroupId": "g"},  # no deduplication id
        {"QueueUrl": content, "MessageBody": "c"},  # no group
    ):
        with pytest.raises(sqs.exceptions.ClientError) as error:
            sqs.send_message(**refused)
        answers.append(error.value.response["Error"]["Code"])
    sqs.send_message_batch(
        QueueUrl=content,
        Entries=[{"Id": str(n), "MessageBody": body, "MessageGroupId": "h"} for n, body in enumerate("xyx")],
    )
    for url in (standard, content, explicit):
        answers.append(
            sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"][
                "ApproximateNumberOfMessages"
            ]
        )
        first = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0)["Messages"]
        again = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=300)["Messages"]
        answers.append(sorted(message["Body"] for message in again))
        old_handle, current = first[0]["ReceiptHandle"], again[-1]["ReceiptHandle"]
        sqs.delete_message(QueueUrl=url, ReceiptHandle=old_handle)  # a handle the message had before
        sqs.delete_message(QueueUrl=url, ReceiptHandle=old_handle)  # deleted already: success again
        sqs.delete_message(QueueUrl=url, ReceiptHandle=current)
        with pytest.raises(sqs.exceptions.ReceiptHandleIsInvalid):
            sqs.delete_message(QueueUrl=url, ReceiptHandle="not-a-handle")
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        answers.append(
            {key: value for key, value in attributes.items() if "Timestamp" not in key and "Arn" not in key}
        )
    return answers


def test_sends_and_deletes_answer_what_moto_answers(endpoint: str) -> None:
    # Given moto as it is, and then with the hot paths made cheap
    sqs = client(endpoint, "sqs")
    before = _sends_and_deletes(sqs, "before")
    with lighter_moto():
        during = _sends_and_deletes(sqs, "during")

    # Then every answer is the same: duplicates dropped, refusals, counts, receives, deletes
    assert during == before
    assert before[0:2] == ["InvalidParameterValue", "MissingParameter"]
    # 3 on the standard queue; content-based: the second "a" and "x" dropped; explicit ids: the second "a"
    assert before[2::3] == ["3", "4", "2"]
    assert before[3] == ["a", "a", "b"]
    assert [counts["ApproximateNumberOfMessagesNotVisible"] for counts in before[4::3]] == ["1", "1", "0"]


def test_moto_s_send_reads_only_content_based_deduplication_of_a_queue_s_attributes(endpoint: str) -> None:
    """The canary of the cheap send: if moto's send path starts reading another attribute of the queue, the
    one-attribute answer given while it sends would be wrong, and this fails."""
    read: list[str] = []

    def note(what: str) -> None:
        if getattr(
            moto_performance._sending, "active", False
        ):  # reads while moto sends; not GetQueueAttributes
            read.append(what)

    class Recording(dict[str, Any]):
        def get(self, key: str, default: Any = None) -> Any:
            note(key)
            return super().get(key, default)

        def __getitem__(self, key: str) -> Any:
            note(key)
            return super().__getitem__(key)

        def __contains__(self, key: object) -> bool:
            note(str(key))
            return super().__contains__(key)

        def __iter__(self) -> Any:
            note("<every attribute>")
            return super().__iter__()

        def keys(self) -> Any:
            note("<every attribute>")
            return super().keys()

        def items(self) -> Any:
            note("<every attribute>")
            return super().items()

        def values(self) -> Any:
            note("<every attribute>")
            return super().values()

    sqs = client(endpoint, "sqs")
    with lighter_moto():
        recorded = moto.sqs.models.Queue.attributes
        cheap = recorded.fget  # type: ignore[attr-defined]
        moto.sqs.models.Queue.attributes = property(lambda queue: Recording(cheap(queue)))  # type: ignore[method-assign,assignment]
        try:
            _sends_and_deletes(sqs, "canary")
        finally:
            moto.sqs.models.Queue.attributes = recorded  # type: ignore[method-assign]
    assert "ContentBasedDeduplication" in read
    assert set(read) == {"ContentBasedDeduplication"}
