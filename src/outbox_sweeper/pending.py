"""The sparse `pending` index: which rows are PENDING, how old the oldest is, and which are due.

A row is in the index exactly while it is PENDING (the library sets `pending_shard` on write and removes it
when the row leaves PENDING), spread over `PENDING_SHARDS` index partitions and sorted by `occurred_at`
within each. One scan queries every shard, oldest first (eventually consistent: the claim that follows is
conditional, so a stale entry costs nothing but that claim). A row is due when it is older than the grace
and not backing off.

The scan reads index entries (keys and two small attributes), never the table. It counts every pending row
it reads; with a very large backlog it stops at the time it was given and says the count is a lower bound.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from outbox.clock import parse_timestamp
from outbox.deadline import Deadline
from outbox.dynamodb import translate_client_error
from outbox.errors import AwsUnavailableError
from outbox.model import (
    NEXT_ATTEMPT_AT,
    PENDING_INDEX_NAME,
    PENDING_INDEX_PARTITION_KEY,
    PENDING_INDEX_SORT_KEY,
    PENDING_SHARDS,
    PREDECESSOR_RELEASED_AT,
    RowKey,
)

# Stop reading the index with less than this left: the run still has to claim, publish and mark.
_SCAN_RESERVE_MS = 30_000


@dataclass(frozen=True, slots=True)
class PendingRow:
    key: RowKey
    occurred_at: datetime
    next_attempt_at: datetime | None = None
    predecessor_released: bool = False


@dataclass(slots=True)
class PendingScan:
    due: list[PendingRow] = field(default_factory=list)
    """Older than the grace and not backing off, oldest first, at most the limit asked for."""
    count: int = 0
    """PENDING rows read (all of them unless `complete` is False)."""
    oldest: datetime | None = None
    complete: bool = True
    calls: int = 0


class PendingIndex(Protocol):
    """Port: reads the pending index. Raises an OutboxError if DynamoDB did not answer."""

    def scan(self, *, due_before: datetime, now: datetime, limit: int, deadline: Deadline) -> PendingScan: ...


class DynamoDBPendingIndex:
    def __init__(self, client: Any, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def scan(self, *, due_before: datetime, now: datetime, limit: int, deadline: Deadline) -> PendingScan:
        scan = PendingScan()
        due: list[PendingRow] = []
        for shard in range(PENDING_SHARDS):
            for item in self._entries(shard, scan, deadline):
                row = _row(item)
                if row is None:
                    continue  # not written by the contract's rules: the claim would refuse it anyway
                scan.count += 1
                if scan.oldest is None or row.occurred_at < scan.oldest:
                    scan.oldest = row.occurred_at
                backing_off = row.next_attempt_at is not None and row.next_attempt_at > now
                if row.occurred_at <= due_before and not backing_off:
                    due.append(row)
        due.sort(key=lambda row: (row.occurred_at, row.key))
        scan.due = due[:limit]
        return scan

    def _entries(self, shard: int, scan: PendingScan, deadline: Deadline) -> Iterator[Mapping[str, Any]]:
        arguments: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": PENDING_INDEX_NAME,
            "KeyConditionExpression": "#shard = :shard",
            "ExpressionAttributeNames": {"#shard": PENDING_INDEX_PARTITION_KEY},
            "ExpressionAttributeValues": {":shard": {"N": str(shard)}},
        }
        while True:
            if deadline.remaining_ms() < _SCAN_RESERVE_MS:
                scan.complete = False
                return
            scan.calls += 1
            try:
                page = self._client.query(**arguments)
            except ClientError as error:
                raise translate_client_error(error, "Query") from error
            except BotoCoreError as error:
                raise AwsUnavailableError(f"Query did not answer: {type(error).__name__}") from error
            yield from page.get("Items", [])
            if "LastEvaluatedKey" not in page:
                return
            arguments["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _row(item: Mapping[str, Any]) -> PendingRow | None:
    key = RowKey.of(item)
    try:
        occurred_at = parse_timestamp(str(item[PENDING_INDEX_SORT_KEY]["S"]))
    except (KeyError, TypeError, ValueError):
        return None
    if key is None:
        return None
    next_attempt = item.get(NEXT_ATTEMPT_AT, {}).get("N")
    return PendingRow(
        key,
        occurred_at,
        datetime.fromtimestamp(float(next_attempt), occurred_at.tzinfo) if next_attempt is not None else None,
        PREDECESSOR_RELEASED_AT in item,
    )
