"""The sparse `pending` index: which rows are PENDING, how old the oldest is, and which are due.

A row is in the index exactly while it is PENDING (the library sets `pending_shard` on write and removes it
when the row leaves PENDING), spread over `PENDING_SHARDS` index partitions and sorted by `occurred_at`
within each. One scan queries every shard, starting at the one the caller names (a sweeper rotates it, so
a scan cut short by time does not always leave the same shards out), eventually consistent: the claim that
follows is conditional, so a stale entry costs nothing but that claim. A row is due when it is not backing
off and is older than the grace, or has an `occurred_at` that cannot be read or lies more than a grace in
the future (a writer's bad clock: waiting for it would strand the row; the engine poisons an unreadable
one).

The scan reads index entries (keys and two small attributes), never the table. It counts every pending row
it reads; with a very large backlog it stops at the time it was given and says the count is a lower bound.
It keeps the due rows it returns bounded (a few MB, `_DueRows`): each aggregate's lowest due row, and more
of its lowest ones up to `limit` (a run claims no more) from a shared budget; it still counts the rest.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any, NamedTuple, Protocol

from outbox.clock import parse_timestamp
from outbox.deadline import Deadline
from outbox.dynamodb import call
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
DUE_AGGREGATES_KEPT = 20_000
"""Aggregates one scan keeps a due row of (each row about 350 bytes in memory)."""
DUE_EXTRA_ROWS_KEPT = 20_000
"""Due rows beyond each aggregate's first that one scan keeps, across aggregates."""


class PendingRow(NamedTuple):
    """One index entry. A NamedTuple, as the publisher's per-event records: immutable, and the cheapest to
    define at a cold start and to build per row."""

    key: RowKey
    occurred_at: datetime | None
    """None: the row's `occurred_at` is not a timestamp."""
    next_attempt_at: datetime | None = None
    predecessor_released: bool = False


class PendingScan:
    """What one scan of the index found. A plain class, not a dataclass: it is only filled in and read, and a
    dataclass would cost the cold start its generated methods (docs/BENCHMARKS.md, "Cold start")."""

    __slots__ = ("calls", "complete", "count", "due", "due_count", "oldest")

    def __init__(self) -> None:
        self.due: dict[str, list[PendingRow]] = {}
        """Due rows kept, by aggregate: aggregates oldest first, each one's rows in `seq` order."""
        self.due_count = 0
        """Due rows read, kept or not."""
        self.count = 0
        """PENDING rows read (all of them unless `complete` is False)."""
        self.oldest: datetime | None = None
        self.complete = True
        self.calls = 0


class PendingIndex(Protocol):
    """Port: reads the pending index. Raises an OutboxError if DynamoDB did not answer."""

    def scan(
        self, *, due_before: datetime, now: datetime, limit: int, deadline: Deadline, first_shard: int = 0
    ) -> PendingScan: ...


class DynamoDBPendingIndex:
    def __init__(self, client: Any, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def scan(
        self, *, due_before: datetime, now: datetime, limit: int, deadline: Deadline, first_shard: int = 0
    ) -> PendingScan:
        scan = PendingScan()
        kept = _DueRows(limit)
        future_after = now + (now - due_before)
        for offset in range(PENDING_SHARDS):
            shard = (first_shard + offset) % PENDING_SHARDS
            for item in self._entries(shard, scan, deadline):
                row = _row(item)
                if row is None:
                    continue  # no readable key: nothing can claim it (the stream publisher poisons it)
                scan.count += 1
                occurred = row.occurred_at
                if (
                    occurred is not None
                    and occurred <= now
                    and (scan.oldest is None or occurred < scan.oldest)
                ):
                    scan.oldest = occurred
                backing_off = row.next_attempt_at is not None and row.next_attempt_at > now
                if not backing_off and (
                    occurred is None or occurred <= due_before or occurred > future_after
                ):
                    scan.due_count += 1
                    kept.add(row)
        scan.due = kept.by_aggregate()
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
            page = call("Query", self._client.query, **arguments)
            yield from page.get("Items", [])
            if "LastEvaluatedKey" not in page:
                return
            arguments["ExclusiveStartKey"] = page["LastEvaluatedKey"]


class _DueRows:
    """Due rows, bounded. Every aggregate (up to `DUE_AGGREGATES_KEPT`) keeps its lowest due row: the one a
    run must claim first, so an aggregate held behind a FAILED event never keeps another from its first
    claim. Rows beyond the first, up to `per_aggregate` in all per aggregate, share `DUE_EXTRA_ROWS_KEPT`;
    once that is spent, a lower `seq` still replaces an aggregate's highest."""

    def __init__(self, per_aggregate: int) -> None:
        self._per_aggregate = per_aggregate
        self._rows: dict[str, list[PendingRow]] = {}
        self._extra = 0

    def add(self, row: PendingRow) -> None:
        rows = self._rows.get(row.key.aggregate_key)
        if rows is None:
            if len(self._rows) < DUE_AGGREGATES_KEPT:
                self._rows[row.key.aggregate_key] = [row]
            return
        if len(rows) < self._per_aggregate and self._extra < DUE_EXTRA_ROWS_KEPT:
            rows.append(row)
            self._extra += 1
            return
        highest = max(range(len(rows)), key=lambda position: rows[position].key.seq)
        if row.key.seq < rows[highest].key.seq:
            rows[highest] = row

    def by_aggregate(self) -> dict[str, list[PendingRow]]:
        ordered = {aggregate: sorted(rows, key=_seq) for aggregate, rows in self._rows.items()}
        return dict(sorted(ordered.items(), key=lambda entry: _age_key(entry[1])))


def _seq(row: PendingRow) -> int:
    return row.key.seq


def _age_key(rows: list[PendingRow]) -> datetime:
    """An aggregate's place: its oldest row's (an unreadable timestamp counts as the oldest of all)."""
    return min(row.occurred_at or datetime.min.replace(tzinfo=UTC) for row in rows)


def _row(item: Mapping[str, Any]) -> PendingRow | None:
    key = RowKey.of(item)
    if key is None:
        return None
    try:
        occurred_at: datetime | None = parse_timestamp(str(item[PENDING_INDEX_SORT_KEY]["S"]))
    except (KeyError, TypeError, ValueError):
        occurred_at = None
    next_attempt = item.get(NEXT_ATTEMPT_AT, {}).get("N")
    return PendingRow(
        key,
        occurred_at,
        datetime.fromtimestamp(float(next_attempt), UTC) if next_attempt is not None else None,
        PREDECESSOR_RELEASED_AT in item,
    )
