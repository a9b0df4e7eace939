"""On-failure queue messages: Lambda's record of stream batches it discarded, mapped back to outbox rows.

When the stream mapping gives up on a batch (retries or record age exhausted), Lambda sends its on-failure
destination a message naming only the shard and the range of sequence numbers (`DDBStreamBatchInfo`), not
the rows. The rows are found by reading that range of the stream again, while the stream still holds it
(24 hours): each INSERT's keys. Past that the range is trimmed and the message cannot be mapped; the rows
themselves are not lost: a PENDING one is swept, a FAILED one is listed by `outbox failed list`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from outbox.aws_errors import error_code
from outbox.model import RowKey
from outbox.stream_mapping import INSERT_EVENT_NAME
from outbox_ops.queues import QueueMessage

# Reading an open shard, GetRecords may answer empty pages before the range's records: give up after these.
_EMPTY_PAGES = 10
_RECORDS_PER_CALL = 1000
# The range is no longer readable: past the stream's 24 hours, or its shard (or iterator) is gone.
_GONE = frozenset({"TrimmedDataAccessException", "ResourceNotFoundException", "ExpiredIteratorException"})


@dataclass(frozen=True)
class DiscardedBatch:
    """One on-failure message: a range of one shard's records Lambda did not deliver."""

    message: QueueMessage
    stream_arn: str
    shard_id: str
    first: str
    last: str
    size: int

    @classmethod
    def of(cls, message: QueueMessage) -> DiscardedBatch | None:
        body = message.body
        info = body.get("DDBStreamBatchInfo") if isinstance(body, Mapping) else None
        if not isinstance(info, Mapping):
            return None
        try:
            return cls(
                message,
                str(info["streamArn"]),
                str(info["shardId"]),
                str(info["startSequenceNumber"]),
                str(info["endSequenceNumber"]),
                int(info.get("batchSize", 0)),
            )
        except (KeyError, TypeError, ValueError):
            return None


class StreamRangeTrimmedError(Exception):
    """The range cannot be read to its end: older than the stream's 24 hours, or its shard is gone."""


def keys_in(streams: Any, batch: DiscardedBatch) -> list[RowKey]:
    """The keys of the rows whose INSERTs the batch held, in stream order. Raises StreamRangeTrimmedError when
    the range cannot be read to its last record: a message is settled only when every row behind it is."""
    try:
        iterator = streams.get_shard_iterator(
            StreamArn=batch.stream_arn,
            ShardId=batch.shard_id,
            ShardIteratorType="AT_SEQUENCE_NUMBER",
            SequenceNumber=batch.first,
        )["ShardIterator"]
    except ClientError as error:
        if error_code(error) in _GONE:
            raise StreamRangeTrimmedError(batch.shard_id) from None
        raise
    last = int(batch.last)
    keys: list[RowKey] = []
    empty = 0
    while iterator and empty < _EMPTY_PAGES:
        try:
            page = streams.get_records(ShardIterator=iterator, Limit=_RECORDS_PER_CALL)
        except ClientError as error:
            if error_code(error) in _GONE:
                raise StreamRangeTrimmedError(batch.shard_id) from None
            raise
        records = page.get("Records", [])
        empty = 0 if records else empty + 1
        for record in records:
            stream = record.get("dynamodb", {})
            sequence = int(stream.get("SequenceNumber", "0"))
            if sequence > last:
                return keys
            key = RowKey.of(stream.get("Keys", {}))
            if record.get("eventName") == INSERT_EVENT_NAME and key is not None:
                keys.append(key)
            if sequence == last:
                return keys
        iterator = page.get("NextShardIterator")
    # The shard ended, or kept answering nothing, before the range's last record: not all of it was read.
    raise StreamRangeTrimmedError(batch.shard_id)
