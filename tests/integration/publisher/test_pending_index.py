"""The sweeper's read of the sparse pending index, on moto: every shard, oldest first, what is due, and a
count that says when it is only a lower bound."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from outbox.errors import ThrottledError
from outbox.model import PENDING_SHARDS, OutboxStatus, RowKey, pending_shard
from outbox_sweeper import pending
from outbox_sweeper.pending import DynamoDBPendingIndex, PendingRow, PendingScan
from tests.integration.publisher.publisher_world import client_error
from tests.support.aws import Tables
from tests.support.clock import START
from tests.support.events import event
from tests.unit.publisher.fakes import FakeDeadline

DUE_BEFORE = START - timedelta(seconds=1)  # every test event occurred at START - 2 s


def due_rows(scan: PendingScan) -> list[PendingRow]:
    return [row for rows in scan.due.values() for row in rows]


def put(dynamodb: Any, tables: Tables, aggregate: str, seq: int, **extra: Any) -> RowKey:
    e = event(aggregate, seq)
    dynamodb.put_item(TableName=tables.outbox, Item=e.to_item() | extra)
    return RowKey(e.aggregate_key, seq)


def test_pending_rows_of_every_shard_are_found_and_only_pending_ones(dynamodb: Any, tables: Tables) -> None:
    # Given 40 pending rows spread over the shards, and a published one
    keys = {put(dynamodb, tables, f"o-{n}", 1) for n in range(40)}
    published = event("done", 1).with_status(OutboxStatus.PUBLISHED)
    dynamodb.put_item(TableName=tables.outbox, Item=published.to_item())
    assert len({pending_shard(key.aggregate_key) for key in keys}) > 1

    # When the sweeper reads the index
    scan = DynamoDBPendingIndex(dynamodb, tables.outbox).scan(
        due_before=DUE_BEFORE, now=START, limit=500, deadline=FakeDeadline()
    )

    # Then it found all 40 pending rows, querying each shard once
    assert {row.key for row in due_rows(scan)} == keys
    assert (scan.count, scan.complete, scan.calls) == (40, True, PENDING_SHARDS)
    assert scan.oldest == START - timedelta(seconds=2)


def test_rows_backing_off_or_too_young_are_counted_but_not_due(dynamodb: Any, tables: Tables) -> None:
    # Given a due row, one backing off for 10 s more, one whose backoff is over, and a gap released
    due = put(dynamodb, tables, "A", 1)
    put(dynamodb, tables, "B", 1, next_attempt_at={"N": str(int(START.timestamp()) + 10)})
    over = put(dynamodb, tables, "C", 1, next_attempt_at={"N": str(int(START.timestamp()))})
    released = put(dynamodb, tables, "D", 3, predecessor_released_at={"S": "2026-11-29T12:00:00.000Z"})

    # When the sweeper reads the index, and then reads it as if every row were younger than the grace
    index = DynamoDBPendingIndex(dynamodb, tables.outbox)
    scan = index.scan(due_before=DUE_BEFORE, now=START, limit=500, deadline=FakeDeadline())
    young = index.scan(due_before=START - timedelta(minutes=1), now=START, limit=500, deadline=FakeDeadline())

    # Then all four are counted; the one backing off is not due; the released gap is said so
    assert scan.count == 4
    assert {row.key: row.predecessor_released for row in due_rows(scan)} == {
        due: False,
        over: False,
        released: True,
    }
    assert (young.count, young.due) == (4, {})


def test_aggregates_come_oldest_first(dynamodb: Any, tables: Tables) -> None:
    # Given ten rows that occurred one second apart, newest first
    for n in range(10):
        e = event(f"o-{n}", 1)
        item = e.to_item() | {"occurred_at": {"S": f"2026-11-29T11:00:{59 - n:02d}.000Z"}}
        dynamodb.put_item(TableName=tables.outbox, Item=item)

    # When the sweeper reads the index
    scan = DynamoDBPendingIndex(dynamodb, tables.outbox).scan(
        due_before=DUE_BEFORE, now=START, limit=3, deadline=FakeDeadline()
    )

    # Then the aggregates come oldest first, and all ten were counted
    assert list(scan.due)[:3] == ["Order#o-9", "Order#o-8", "Order#o-7"]
    assert (scan.count, scan.due_count) == (10, 10)


def test_a_scan_short_of_time_stops_and_says_its_count_is_a_lower_bound(
    dynamodb: Any, tables: Tables
) -> None:
    # Given pending rows, and an invocation with 20 s left (less than the scan keeps for the rest of the run)
    put(dynamodb, tables, "A", 1)

    # When the sweeper reads the index
    scan = DynamoDBPendingIndex(dynamodb, tables.outbox).scan(
        due_before=DUE_BEFORE, now=START, limit=500, deadline=FakeDeadline(20_000)
    )

    # Then it read nothing and says the count is incomplete
    assert (scan.calls, scan.count, scan.complete) == (0, 0, False)


def test_a_row_whose_timestamp_is_unreadable_or_far_in_the_future_is_due_at_once(
    dynamodb: Any, tables: Tables
) -> None:
    # Given pending rows another writer dated "yesterday" (not a timestamp) and a year ahead (a bad clock)
    unreadable = put(dynamodb, tables, "A", 1, occurred_at={"S": "yesterday"})
    future = put(dynamodb, tables, "B", 1, occurred_at={"S": "2027-11-29T12:00:00.000Z"})
    soon = put(dynamodb, tables, "C", 1, occurred_at={"S": "2026-11-29T12:00:00.500Z"})

    # When the sweeper reads the index
    scan = DynamoDBPendingIndex(dynamodb, tables.outbox).scan(
        due_before=DUE_BEFORE, now=START, limit=500, deadline=FakeDeadline()
    )

    # Then both are due now, not never (the engine poisons the unreadable one); a row dated within the
    # clock skew's reach waits like any fresh row; the unreadable one comes first
    assert [row.key for row in due_rows(scan)] == [unreadable, future]
    assert soon not in [row.key for row in due_rows(scan)]
    assert scan.count == 3
    assert scan.oldest is None  # neither readable date is in the past


def test_each_aggregate_keeps_its_lowest_seqs_up_to_the_limit(dynamodb: Any, tables: Tables) -> None:
    # Given six pending rows of A, written highest seq first, and a limit of three rows per run
    for seq in (6, 5, 4, 3, 2, 1):
        put(dynamodb, tables, "A", seq)

    # When the sweeper reads the index
    scan = DynamoDBPendingIndex(dynamodb, tables.outbox).scan(
        due_before=DUE_BEFORE, now=START, limit=3, deadline=FakeDeadline()
    )

    # Then it kept A#1 to A#3 (what a run must claim first) and counted all six
    assert [row.key.seq for row in scan.due["Order#A"]] == [1, 2, 3]
    assert scan.due_count == 6


def test_the_scan_starts_at_the_shard_it_is_given(dynamodb: Any, tables: Tables) -> None:
    # Given pending rows, and a scan with time for just one shard's query... starting at shard 5
    keys = [put(dynamodb, tables, f"o-{n}", 1) for n in range(40)]
    in_shard_5 = {key for key in keys if pending_shard(key.aggregate_key) == 5}
    deadline = ShrinkingDeadline()

    # When the sweeper reads the index from shard 5
    scan = DynamoDBPendingIndex(dynamodb, tables.outbox).scan(
        due_before=DUE_BEFORE, now=START, limit=500, deadline=deadline, first_shard=5
    )

    # Then shard 5 is the one it read
    assert scan.calls == 1
    assert {row.key for row in due_rows(scan)} == in_shard_5
    assert not scan.complete


class ShrinkingDeadline:
    """Time for one query: then the scan's reserve is reached."""

    def __init__(self) -> None:
        self.asked = 0

    def remaining_ms(self) -> int:
        self.asked += 1
        return 60_000 if self.asked == 1 else 1_000


class ThrottledQueries:
    def query(self, **_: Any) -> None:
        raise client_error("ThrottlingException", "Query")


def test_a_throttled_read_is_a_typed_error() -> None:
    # Given DynamoDB throttling queries
    index = DynamoDBPendingIndex(ThrottledQueries(), "outbox")

    # When the sweeper reads the index
    # Then it gets the library's typed error
    with pytest.raises(ThrottledError):
        index.scan(due_before=DUE_BEFORE, now=START, limit=500, deadline=FakeDeadline())


def test_every_aggregate_keeps_its_first_due_row_when_the_others_have_spent_the_budget(
    dynamodb: Any, tables: Tables, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a budget of 4 rows beyond each aggregate's first, and A with 6 due rows, then B with 2
    monkeypatch.setattr(pending, "DUE_EXTRA_ROWS_KEPT", 4)
    for seq in (1, 2, 3, 4, 5, 6):
        put(dynamodb, tables, "A", seq)
    put(dynamodb, tables, "B", 1, occurred_at={"S": "2026-11-29T11:59:59.000Z"})
    put(dynamodb, tables, "B", 2, occurred_at={"S": "2026-11-29T11:59:59.000Z"})

    # When the sweeper reads the index
    scan = DynamoDBPendingIndex(dynamodb, tables.outbox).scan(
        due_before=START, now=START, limit=500, deadline=FakeDeadline()
    )

    # Then A kept its five lowest (the budget ran out), and B still has its first row, the one a run must
    # claim first; everything was counted
    assert [row.key.seq for row in scan.due["Order#A"]] == [1, 2, 3, 4, 5]
    assert [row.key.seq for row in scan.due["Order#B"]] == [1]
    assert scan.due_count == 8


def test_no_more_aggregates_than_the_cap_are_kept(
    dynamodb: Any, tables: Tables, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a cap of 3 aggregates and 5 pending aggregates
    monkeypatch.setattr(pending, "DUE_AGGREGATES_KEPT", 3)
    for n in range(5):
        put(dynamodb, tables, f"o-{n}", 1)

    # When the sweeper reads the index
    scan = DynamoDBPendingIndex(dynamodb, tables.outbox).scan(
        due_before=DUE_BEFORE, now=START, limit=500, deadline=FakeDeadline()
    )

    # Then it kept 3 and counted 5
    assert (len(scan.due), scan.due_count, scan.count) == (3, 5, 5)
