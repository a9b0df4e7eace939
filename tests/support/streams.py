"""Lambda-shaped DynamoDB stream events from REAL moto stream records.

Reads the outbox table's stream the way the Lambda poller does (DescribeStream, GetShardIterator
TRIM_HORIZON, GetRecords) and shapes each record as Lambda delivers it with the local runtime's
`outbox_local.stream_records.lambda_record` (one shaping for the emulator and the tests: it adds the
`eventSourceARN` moto lacks and turns ApproximateCreationDateTime into epoch seconds).
"""

from __future__ import annotations

from typing import Any

from outbox_local.stream_records import lambda_record
from tests.support.aws import REGION


def read_stream(streams: Any, stream_arn: str, *, after: str | None = None) -> list[dict[str, Any]]:
    """Every record of every shard, oldest first (moto has one shard); with `after`, only those after that
    sequence number (a test that reads the stream again and again, without re-reading what it has seen)."""
    position: dict[str, str] = (
        {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": after}
        if after is not None
        else {"ShardIteratorType": "TRIM_HORIZON"}
    )
    records: list[dict[str, Any]] = []
    shards = streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]
    for shard in shards:
        iterator = streams.get_shard_iterator(StreamArn=stream_arn, ShardId=shard["ShardId"], **position)[
            "ShardIterator"
        ]
        while iterator:
            page = streams.get_records(ShardIterator=iterator)
            records.extend(page["Records"])
            if not page["Records"]:
                break
            iterator = page.get("NextShardIterator")
    return records


def lambda_event(raw_records: list[dict[str, Any]], stream_arn: str) -> dict[str, Any]:
    """The event Lambda sends for a batch of these records."""
    return {"Records": [dict(lambda_record(raw, stream_arn, REGION).payload) for raw in raw_records]}


def table_with_stream(dynamodb: Any, name: str) -> str:
    """A table keyed by `pk` (a string) whose stream carries new images; answers the stream's ARN."""
    description = dynamodb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"},
    )["TableDescription"]
    return str(description["LatestStreamArn"])
