"""The stream mappings read a DynamoDB stream from moto's backend in this process, not over HTTP: moto's
serializer and botocore's parser cost about 1.5 ms of CPU per record (a sixth of the runtime's CPU at 50
orders/s, `bench/local_load.py`), and moto's registry of shard iterators keeps every one ever handed out.

`DescribeStream`, `GetShardIterator` and `GetRecords` are answered as the `dynamodbstreams` client answers
them (the shapes `StreamMappingRunner` reads), from the same records moto holds. Only the runtime's own
mappings read this way, as Lambda's pollers read streams inside AWS: a function's or a developer's
`dynamodbstreams` calls still go to the endpoint.
"""

from __future__ import annotations

from datetime import UTC
from typing import Any

from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.dynamodb.models import dynamodb_backends
from moto.dynamodb.models.table import StreamShard

_ITERATOR_TYPES = frozenset({"TRIM_HORIZON", "LATEST", "AFTER_SEQUENCE_NUMBER"})


class InProcessStreams:
    """The subset of a `dynamodbstreams` client the stream mappings use, on this process's moto backend."""

    def __init__(self, region: str, account_id: str = DEFAULT_ACCOUNT_ID) -> None:
        self._region = region
        self._account_id = account_id

    def describe_stream(self, StreamArn: str) -> dict[str, Any]:  # noqa: N803 - the client's parameter names
        shard = self._shard(StreamArn)
        return {"StreamDescription": {"StreamArn": StreamArn, "Shards": [shard.to_json()] if shard else []}}

    def get_shard_iterator(
        self,
        StreamArn: str,  # noqa: N803
        ShardId: str,  # noqa: N803
        ShardIteratorType: str,  # noqa: N803
        SequenceNumber: str | None = None,  # noqa: N803
    ) -> dict[str, Any]:
        if ShardIteratorType not in _ITERATOR_TYPES:
            raise ValueError(f"ShardIteratorType {ShardIteratorType!r} is not read in process")
        shard = self._shard(StreamArn)
        position = 0
        if shard is not None and ShardIteratorType == "LATEST":
            position = len(shard.items)
        elif shard is not None and ShardIteratorType == "AFTER_SEQUENCE_NUMBER":
            position = _after(shard, str(SequenceNumber))
        return {"ShardIterator": f"{position}|{StreamArn}"}

    def get_records(self, ShardIterator: str, Limit: int = 1000) -> dict[str, Any]:  # noqa: N803
        position_text, _, stream_arn = ShardIterator.partition("|")
        position = int(position_text)
        shard = self._shard(stream_arn)
        # A slice of the list moto appends to: what was written before this read, whole.
        records = shard.items[position : position + Limit] if shard is not None else []
        return {
            "Records": [_as_answered(record.to_json()) for record in records],
            "NextShardIterator": f"{position + len(records)}|{stream_arn}",
        }

    def _shard(self, stream_arn: str) -> StreamShard | None:
        table_name = stream_arn.split(":", 5)[5].split("/")[1]
        table = dynamodb_backends[self._account_id][self._region].get_table(table_name)
        return table.stream_shard


def _after(shard: StreamShard, sequence_number: str) -> int:
    """The position just after the record with this sequence number (a mapping resuming where a previous
    runner of it stopped). Searched from the end: the record is usually recent."""
    for index in range(len(shard.items) - 1, -1, -1):
        if shard.items[index].record["dynamodb"]["SequenceNumber"] == sequence_number:
            return index + 1
    raise ValueError(f"sequence number {sequence_number} is not in the stream")


def _as_answered(record: dict[str, Any]) -> dict[str, Any]:
    """moto's record as GetRecords answers it: its creation time is a naive UTC datetime, which moto's
    serializer sends as epoch seconds (and botocore hands over as an aware datetime)."""
    stream = dict(record["dynamodb"])
    created = stream.get("ApproximateCreationDateTime")
    if created is not None and hasattr(created, "replace"):
        stream["ApproximateCreationDateTime"] = created.replace(tzinfo=UTC)
    return {**record, "dynamodb": stream}
