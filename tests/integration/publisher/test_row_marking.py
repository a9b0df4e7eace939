"""The core row marker on moto: conditional, never backwards, batched, with per-row fallback."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from outbox.leases import DynamoDBRowClaimer, Lease
from outbox.marking import DynamoDBRowMarker, FailedMark, PublishedMark
from outbox.model import OutboxStatus, RowKey, pending_shard
from outbox.release import redrive
from tests.support.aws import Tables
from tests.support.clock import START
from tests.support.events import event


def seed(dynamodb: Any, table: str, count: int, aggregate: str = "A") -> list[RowKey]:
    rows = [event(aggregate, seq).to_item() for seq in range(1, count + 1)]
    for start in range(0, len(rows), 25):
        dynamodb.batch_write_item(
            RequestItems={table: [{"PutRequest": {"Item": r}} for r in rows[start : start + 25]]}
        )
    return [RowKey(f"Order#{aggregate}", seq) for seq in range(1, count + 1)]


def get(dynamodb: Any, table: str, key: RowKey) -> dict[str, Any]:
    item: dict[str, Any] = dynamodb.get_item(TableName=table, Key=key.item(), ConsistentRead=True)["Item"]
    return item


def test_published_and_failed_marks_set_their_fields(dynamodb: Any, tables: Tables) -> None:
    # Given two pending rows
    published, failed = seed(dynamodb, tables.outbox, 2)
    marker = DynamoDBRowMarker(dynamodb, tables.outbox, published_retention=timedelta(days=2))

    # When one is marked PUBLISHED and the other FAILED
    report = marker.mark(
        [PublishedMark(published, START, 2), FailedMark(failed, "no_route: NoRoute: " + "e" * 600, 0, START)]
    )

    # Then one transaction did both
    assert report.calls == 1
    assert sorted(report.marked) == [published, failed]
    row = get(dynamodb, tables.outbox, published)
    assert row["status"] == {"S": "PUBLISHED"}
    assert row["published_at"] == {"S": "2026-11-29T12:00:00.000Z"}
    assert row["expires_at"] == {"N": str(int((START + timedelta(days=2)).timestamp()))}
    assert row["attempts"] == {"N": "2"}
    assert "pending_shard" not in row
    bad = get(dynamodb, tables.outbox, failed)
    assert bad["status"] == {"S": "FAILED"}
    assert len(bad["last_error"]["S"]) == 512
    assert "expires_at" not in bad
    assert "pending_shard" not in bad
    assert bad["failed_shard"] == {"N": str(pending_shard(failed.aggregate_key))}  # in the failed index
    assert "failed_shard" not in row
    listed = dynamodb.query(
        TableName=tables.outbox,
        IndexName="failed",
        KeyConditionExpression="failed_shard = :shard",
        ExpressionAttributeValues={":shard": bad["failed_shard"]},
    )["Items"]
    assert [RowKey.of(item) for item in listed] == [failed]


def test_rows_are_never_moved_backwards(dynamodb: Any, tables: Tables) -> None:
    # Given three rows, the middle one already FAILED by someone else
    keys = seed(dynamodb, tables.outbox, 3)
    marker = DynamoDBRowMarker(dynamodb, tables.outbox)
    marker.mark([FailedMark(keys[1], "rejected", 1, START)])

    # When all three are marked PUBLISHED
    report = marker.mark([PublishedMark(key, START, 1) for key in keys])

    # Then the cancelled transaction fell back to one update per row; the FAILED row was left alone
    assert report.calls == 1 + 3
    assert report.marked == [keys[0], keys[2]]
    assert report.already_moved == [keys[1]]
    assert report.failed == {}
    assert get(dynamodb, tables.outbox, keys[1])["status"] == {"S": OutboxStatus.FAILED.value}


def test_a_missing_row_counts_as_moved_on(dynamodb: Any, tables: Tables) -> None:
    # Given no row at all
    marker = DynamoDBRowMarker(dynamodb, tables.outbox)

    # When it is marked
    report = marker.mark([PublishedMark(RowKey("Order#gone", 1), START, 1)])

    # Then it is reported as already moved, and not created
    assert report.already_moved == [RowKey("Order#gone", 1)]
    assert dynamodb.scan(TableName=tables.outbox)["Items"] == []


def test_more_than_100_rows_take_one_transaction_per_100(dynamodb: Any, tables: Tables) -> None:
    # Given 101 pending rows
    keys = seed(dynamodb, tables.outbox, 101)
    marker = DynamoDBRowMarker(dynamodb, tables.outbox)

    # When they are all marked, one of them twice
    report = marker.mark([PublishedMark(key, START, 1) for key in keys] + [PublishedMark(keys[0], START, 3)])

    # Then two calls did it (100 + a single UpdateItem), the duplicate collapsed to its last mark
    assert report.calls == 2
    assert len(report.marked) == 101
    assert get(dynamodb, tables.outbox, keys[0])["attempts"] == {"N": "3"}


def test_a_refused_update_is_reported_not_raised(dynamodb: Any, tables: Tables) -> None:
    # Given a marker on a table that does not exist
    marker = DynamoDBRowMarker(dynamodb, "no-such-table")

    # When it marks one row, then two
    single = marker.mark([PublishedMark(RowKey("Order#a", 1), START, 1)])
    double = marker.mark(
        [PublishedMark(RowKey("Order#a", 1), START, 1), PublishedMark(RowKey("Order#b", 1), START, 1)]
    )

    # Then the rows are reported as not marked, with the error's type
    assert list(single.failed) == [RowKey("Order#a", 1)]
    assert len(double.failed) == 2


def test_a_claimed_row_is_marked_only_by_the_holder_of_its_lease(dynamodb: Any, tables: Tables) -> None:
    # Given two rows a sweep run holds
    keys = seed(dynamodb, tables.outbox, 2)
    claimer = DynamoDBRowClaimer(dynamodb, tables.outbox)
    for key in keys:
        claimer.claim(key, Lease("sweeper:run-1", START + timedelta(seconds=60)), START)
    marker = DynamoDBRowMarker(dynamodb, tables.outbox)

    # When another run (which lost the lease) marks the first, and the holder marks the second
    theirs = marker.mark([PublishedMark(keys[0], START, 1, lease_owner="sweeper:run-0")])
    mine = marker.mark([PublishedMark(keys[1], START, 1, lease_owner="sweeper:run-1")])

    # Then only the holder's mark took: the other row is still PENDING, counted as moved on
    assert theirs.already_moved == [keys[0]]
    assert get(dynamodb, tables.outbox, keys[0])["status"] == {"S": "PENDING"}
    assert mine.marked == [keys[1]]
    row = get(dynamodb, tables.outbox, keys[1])
    assert row["status"] == {"S": "PUBLISHED"}
    assert "lease_owner" not in row


def test_a_mark_made_at_an_older_generation_never_marks_a_redriven_row(dynamodb: Any, tables: Tables) -> None:
    # Given a row that failed and was redriven by an operator (generation 1, PENDING again)
    (key,) = seed(dynamodb, tables.outbox, 1)
    marker = DynamoDBRowMarker(dynamodb, tables.outbox)
    marker.mark([FailedMark(key, "rejected", 1, START)])
    redrive(dynamodb, tables.outbox, key, reason="payload fixed", actor="alice", now=START)

    # When a publisher working from the row's first life (a stale stream record) marks it, FAILED or PUBLISHED
    stale = marker.mark([FailedMark(key, "rejected", 1, START)])
    stale_published = marker.mark([PublishedMark(key, START, 1)])

    # Then neither mark takes: the row is still PENDING for its redrive
    assert stale.already_moved == [key]
    assert stale_published.already_moved == [key]
    assert get(dynamodb, tables.outbox, key)["status"] == {"S": "PENDING"}

    # When a publisher that read the redriven row (generation 1) marks it
    current = marker.mark([PublishedMark(key, START, 1, generation=1)])

    # Then it is PUBLISHED
    assert current.marked == [key]
    assert get(dynamodb, tables.outbox, key)["status"] == {"S": "PUBLISHED"}


def test_a_mark_for_the_event_a_slot_held_never_marks_the_event_another_writer_put_there(
    dynamodb: Any, tables: Tables
) -> None:
    # Given two pending rows, one of which another writer rewrote with a new event after it was read
    keys = seed(dynamodb, tables.outbox, 2)
    read = [get(dynamodb, tables.outbox, key)["event_id"]["S"] for key in keys]
    dynamodb.put_item(TableName=tables.outbox, Item=event("A", 2).to_item())
    marker = DynamoDBRowMarker(dynamodb, tables.outbox)

    # When both are marked (in one transaction) for the events the publisher read
    report = marker.mark(
        [PublishedMark(key, START, 1, event_id=event_id) for key, event_id in zip(keys, read, strict=True)]
    )

    # Then the untouched row is PUBLISHED; the rewritten one stays PENDING, its new event unannounced
    assert report.marked == [keys[0]]
    assert report.already_moved == [keys[1]]
    assert get(dynamodb, tables.outbox, keys[1])["status"] == {"S": "PENDING"}
