"""The core row marker on moto (with outbox_local.moto_partiql): conditional, never backwards, 25 rows a
BatchExecuteStatement, each row answered on its own."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError
from moto.dynamodb.exceptions import MockValidationException
from moto.dynamodb.models import DynamoDBBackend

from outbox.leases import DynamoDBRowClaimer, Lease
from outbox.marking import DynamoDBRowMarker
from outbox.model import OutboxStatus, RowKey, pending_shard
from outbox.release import redrive
from outbox.row_marks import FailedMark, PublishedMark
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

    # Then one BatchExecuteStatement did both
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

    # Then one call did it: the FAILED row failed its own statement only, and was left alone
    assert report.calls == 1
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


def test_more_than_25_rows_take_one_call_per_25(dynamodb: Any, tables: Tables) -> None:
    # Given 101 pending rows
    keys = seed(dynamodb, tables.outbox, 101)
    marker = DynamoDBRowMarker(dynamodb, tables.outbox)

    # When they are all marked, one of them twice
    report = marker.mark([PublishedMark(key, START, 1) for key in keys] + [PublishedMark(keys[0], START, 3)])

    # Then five calls did it (4 x 25 + 1), the duplicate collapsed to its last mark
    assert report.calls == 5
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


def test_a_redelivered_batch_costs_the_calls_of_the_first_delivery(dynamodb: Any, tables: Tables) -> None:
    # Given 30 rows already PUBLISHED (a batch the stream mapping delivers again)
    keys = seed(dynamodb, tables.outbox, 30)
    marker = DynamoDBRowMarker(dynamodb, tables.outbox)
    first = marker.mark([PublishedMark(key, START, 1) for key in keys])

    # When they are marked again
    again = marker.mark([PublishedMark(key, START + timedelta(hours=1), 1) for key in keys])

    # Then both took two calls (25 + 5); the second moved nothing, and the rows kept their first marking
    assert (first.calls, len(first.marked)) == (2, 30)
    assert (again.calls, again.marked, again.failed) == (2, [], {})
    assert again.already_moved == keys
    assert get(dynamodb, tables.outbox, keys[0])["published_at"] == {"S": "2026-11-29T12:00:00.000Z"}
    assert get(dynamodb, tables.outbox, keys[0])["attempts"] == {"N": "1"}


def test_a_failed_mark_in_a_batch_leaves_no_ttl_and_no_publication_of_an_earlier_life(
    dynamodb: Any, tables: Tables
) -> None:
    # Given two pending rows, one carrying what an earlier life left (a rewritten slot: published_at, TTL)
    keys = seed(dynamodb, tables.outbox, 2)
    dynamodb.update_item(
        TableName=tables.outbox,
        Key=keys[1].item(),
        UpdateExpression="SET published_at = :at, expires_at = :ttl",
        ExpressionAttributeValues={":at": {"S": "2026-11-01T00:00:00.000Z"}, ":ttl": {"N": "1"}},
    )
    marker = DynamoDBRowMarker(dynamodb, tables.outbox)

    # When both are marked FAILED in one call
    report = marker.mark([FailedMark(key, "rejected", 1, START) for key in keys])

    # Then both are FAILED, in the failed index, out of the pending one, with no TTL and no publication time
    assert (report.calls, report.marked) == (1, keys)
    for key in keys:
        row = get(dynamodb, tables.outbox, key)
        assert row["status"] == {"S": "FAILED"}
        assert row["attempts"] == {"N": "1"}
        assert {"expires_at", "published_at", "pending_shard"}.isdisjoint(row)
        assert row["failed_shard"] == {"N": str(pending_shard(key.aggregate_key))}


def test_a_row_written_without_attempts_is_marked_with_them(dynamodb: Any, tables: Tables) -> None:
    # Given three rows another writer wrote without `attempts`
    keys = seed(dynamodb, tables.outbox, 3)
    for key in keys:
        dynamodb.update_item(TableName=tables.outbox, Key=key.item(), UpdateExpression="REMOVE attempts")
    marker = DynamoDBRowMarker(dynamodb, tables.outbox)

    # When two are marked as read (without attempts), and one by a caller that took it for a row with them
    report = marker.mark(
        [PublishedMark(key, START, 2, attempts_stored=False) for key in keys[:2]]
        + [PublishedMark(keys[2], START, 2)]
    )

    # Then all three are PUBLISHED with 2 attempts: the third's statement failed on `attempts` alone, and one
    # UpdateItem marked it
    assert sorted(report.marked) == keys
    assert report.calls == 2
    assert [get(dynamodb, tables.outbox, key)["attempts"] for key in keys] == [{"N": "2"}] * 3


def test_a_release_goes_in_the_batch_and_sets_first_released_at_only_where_absent(
    dynamodb: Any, tables: Tables
) -> None:
    # Given four pending rows, the last two already released once (a redriven poison row keeps the time)
    keys = seed(dynamodb, tables.outbox, 4)
    for key in keys[2:]:
        dynamodb.update_item(
            TableName=tables.outbox,
            Key=key.item(),
            UpdateExpression="SET first_released_at = :first",
            ExpressionAttributeValues={":first": {"S": "2026-11-01T00:00:00.000Z"}},
        )
    marker = DynamoDBRowMarker(dynamodb, tables.outbox)

    # When one is published, and three FAILED with their aggregate released: one read without
    # first_released_at, one read with it, and one read before it was set (a race: its statement fails)
    report = marker.mark(
        [
            PublishedMark(keys[0], START, 1),
            FailedMark(keys[1], "rejected", 1, START, release_reason="continues"),
            FailedMark(keys[2], "rejected", 1, START, release_reason="continues", first_released_stored=True),
            FailedMark(keys[3], "rejected", 1, START, release_reason="continues"),
        ]
    )

    # Then one batch marked three, and one UpdateItem the raced row; the first release time is never moved
    assert report.calls == 2
    assert sorted(report.marked) == keys
    firsts = [get(dynamodb, tables.outbox, key).get("first_released_at") for key in keys]
    assert firsts == [
        None,
        {"S": "2026-11-29T12:00:00.000Z"},
        {"S": "2026-11-01T00:00:00.000Z"},
        {"S": "2026-11-01T00:00:00.000Z"},
    ]
    for key in keys[1:]:
        row = get(dynamodb, tables.outbox, key)
        assert (row["status"], row["released_at"], row["release_reason"]) == (
            {"S": "FAILED"},
            {"S": "2026-11-29T12:00:00.000Z"},
            {"S": "continues"},
        )


def test_a_partiql_form_dynamodb_refuses_leaves_no_row_pending(
    dynamodb: Any, tables: Tables, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given DynamoDB refusing BatchExecuteStatement as a form (ValidationException), and 30 pending rows
    def refuse(_: DynamoDBBackend, statements: list[dict[str, Any]]) -> list[dict[str, Any]]:
        raise MockValidationException("Statement wasn't well formed, can't be processed")

    monkeypatch.setattr(DynamoDBBackend, "batch_execute_statement", refuse)
    keys = seed(dynamodb, tables.outbox, 30)
    marker = DynamoDBRowMarker(dynamodb, tables.outbox)

    # When they are marked, then marked again (a redelivery)
    first = marker.mark([PublishedMark(key, START, 1) for key in keys])
    again = marker.mark([PublishedMark(key, START, 1) for key in keys])

    # Then UpdateItem marked every row, after one refused call; the redelivery went UpdateItem at once
    assert (first.calls, sorted(first.marked), first.failed) == (31, keys, {})
    assert (again.calls, again.already_moved) == (30, keys)
    assert {get(dynamodb, tables.outbox, key)["status"]["S"] for key in keys} == {"PUBLISHED"}


def update(table: str, statement: str, parameters: list[dict[str, Any]]) -> dict[str, Any]:
    return {"Statement": f'UPDATE "{table}" {statement}', "Parameters": parameters}


def test_moto_answers_an_update_it_cannot_parse_with_a_validation_error(
    dynamodb: Any, tables: Tables
) -> None:
    # Given a pending row
    (key,) = seed(dynamodb, tables.outbox, 1)
    where = 'WHERE "aggregate_key" = ? AND "seq" = ?'
    bound = [{"S": key.aggregate_key}, {"N": key.seq_text}]

    # When UPDATEs outside the emulated grammar are sent: a literal, a comma list, and an unknown operator
    answer = dynamodb.batch_execute_statement(
        Statements=[
            update(tables.outbox, f"SET \"status\" = 'PUBLISHED' {where}", bound),
            update(
                tables.outbox, f'SET "status" = ?, "attempts" = ? {where}', [{"S": "X"}, {"N": "1"}, *bound]
            ),
            update(tables.outbox, f'SET "attempts" = "attempts" * ? {where}', [{"N": "2"}, *bound]),
        ]
    )

    # Then each is answered ValidationError (never handed to moto) and the row is untouched
    assert [response["Error"]["Code"] for response in answer["Responses"]] == ["ValidationError"] * 3
    assert get(dynamodb, tables.outbox, key)["status"] == {"S": "PENDING"}


def test_moto_refuses_a_batch_naming_one_item_twice(dynamodb: Any, tables: Tables) -> None:
    # Given a pending row, and two statements on it
    (key,) = seed(dynamodb, tables.outbox, 1)
    statement = update(
        tables.outbox,
        'SET "status" = ? WHERE "aggregate_key" = ? AND "seq" = ?',
        [{"S": "PUBLISHED"}, {"S": key.aggregate_key}, {"N": key.seq_text}],
    )

    # When both are sent in one batch, then with an INSERT
    with pytest.raises(ClientError) as duplicates:
        dynamodb.batch_execute_statement(Statements=[statement, statement])
    insert = {"Statement": f"INSERT INTO \"{tables.outbox}\" VALUE {{'aggregate_key': 'x', 'seq': 1}}"}
    with pytest.raises(ClientError) as mixed:
        dynamodb.batch_execute_statement(Statements=[statement, insert])

    # Then DynamoDB's refusal: the whole call, nothing written
    assert duplicates.value.response["Error"]["Code"] == "ValidationException"
    assert "Provided list of item keys contains duplicates" in str(duplicates.value)
    assert mixed.value.response["Error"]["Code"] == "ValidationException"
    assert get(dynamodb, tables.outbox, key)["status"] == {"S": "PENDING"}
