"""An operator's redrive and skip on moto (outbox_ops.release): each one transaction of the row and its audit
record, changing nothing unless the row is still as it was read, and saying why it refused."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from botocore.exceptions import EndpointConnectionError

from outbox.errors import AwsUnavailableError, ThrottledError
from outbox.model import OutboxEvent, OutboxStatus, RowKey
from outbox_ops.audit import AuditRecords
from outbox_ops.release import ReleaseError, audit_key, redrive, skip
from tests.integration.publisher.publisher_world import client_error
from tests.support.aws import Tables
from tests.support.clock import START
from tests.support.events import event

RELEASED = {"released_at": {"S": "2026-11-28T12:00:00.000Z"}, "release_reason": {"S": "continues"}}


def put(dynamodb: Any, tables: Tables, e: OutboxEvent, **extra: Any) -> RowKey:
    dynamodb.put_item(TableName=tables.outbox, Item=e.to_item() | extra)
    return RowKey(e.aggregate_key, e.seq)


def stored(dynamodb: Any, tables: Tables, key: RowKey) -> dict[str, Any] | None:
    item: dict[str, Any] | None = dynamodb.get_item(
        TableName=tables.outbox, Key=key.item(), ConsistentRead=True
    ).get("Item")
    return item


def failed(e: OutboxEvent) -> OutboxEvent:
    return e.with_status(OutboxStatus.FAILED, last_error="rejected: sns:InvalidParameter", attempts=4)


def test_a_redrive_makes_a_failed_row_pending_again_and_records_who_and_why(
    dynamodb: Any, tables: Tables
) -> None:
    # Given a FAILED row that had backed off, in the failed index, SNS having taken it before it failed
    e = failed(event("A", 1))
    key = put(
        dynamodb,
        tables,
        e,
        sweep_failures={"N": "3"},
        next_attempt_at={"N": "1"},
        failed_shard={"N": "2"},
        delivered_to={"SS": ["sns"]},
    )

    # When an operator redrives it
    redrive(dynamodb, tables.outbox, key, reason="topic policy fixed", actor="alice", now=START)

    # Then it is PENDING, one generation on, its attempts and backoff started afresh, out of the failed index,
    # still saying SNS took it (so the sweeper sends it to EventBridge only)
    row = stored(dynamodb, tables, key)
    assert row is not None
    assert (row["status"], row["generation"], row["attempts"]) == ({"S": "PENDING"}, {"N": "1"}, {"N": "0"})
    for gone in ("sweep_failures", "next_attempt_at", "failed_shard", "released_at"):
        assert gone not in row
    assert row["delivered_to"] == {"SS": ["sns"]}
    assert row["event_id"] == {"S": e.event_id}
    # and its audit record holds the entry
    record = AuditRecords(dynamodb, tables.outbox).of_event(key)
    assert record is not None
    assert record.event_id == e.event_id
    assert [(x.action, x.at, x.by, x.reason, x.generation, x.out_of_order) for x in record.entries] == [
        ("redrive", "2026-11-29T12:00:00.000Z", "alice", "topic policy fixed", 0, False)
    ]


def test_a_skip_takes_the_failed_row_out_of_the_table_keeping_it_in_its_audit_record(
    dynamodb: Any, tables: Tables
) -> None:
    # Given a FAILED row
    e = failed(event("A", 1))
    key = put(dynamodb, tables, e)

    # When an operator skips it
    skip(dynamodb, tables.outbox, key, reason="superseded", actor="bob", now=START)

    # Then the row left the table (its successors may go), and its audit record keeps it whole
    assert stored(dynamodb, tables, key) is None
    record = AuditRecords(dynamodb, tables.outbox).of_event(key)
    assert record is not None
    [entry] = record.entries
    assert (entry.action, entry.by, entry.reason) == ("skip", "bob", "superseded")
    assert entry.row is not None
    assert {name: entry.row[name] for name in ("event_id", "payload", "status")} == {
        "event_id": {"S": e.event_id},
        "payload": e.to_item()["payload"],
        "status": {"S": "FAILED"},
    }
    # and a second skip finds nothing to skip
    with pytest.raises(ReleaseError, match="is not FAILED"):
        skip(dynamodb, tables.outbox, key, reason="again", actor="eve", now=START)


def test_a_skipped_row_too_large_for_its_audit_record_is_kept_without_its_payload(
    dynamodb: Any, tables: Tables
) -> None:
    # Given a FAILED row of nearly 400 KB
    e = failed(event("A", 1, payload={"blob": "x" * 395_000}))
    key = put(dynamodb, tables, e)

    # When an operator skips it
    skip(dynamodb, tables.outbox, key, reason="too big to ever publish", actor="bob", now=START)

    # Then its audit record keeps everything but the payload, and says so
    record = AuditRecords(dynamodb, tables.outbox).of_event(key)
    assert record is not None
    [entry] = record.entries
    assert entry.row is not None
    assert "payload" not in entry.row
    assert entry.row["payload_omitted"] == {"BOOL": True}
    assert entry.row["event_id"] == {"S": e.event_id}


@pytest.mark.parametrize("status", [OutboxStatus.PENDING, OutboxStatus.PUBLISHED, None])
def test_only_a_failed_row_can_be_redriven_or_skipped(
    dynamodb: Any, tables: Tables, status: OutboxStatus | None
) -> None:
    # Given a row that is not FAILED, or no row at all (its event is out)
    key = RowKey("Order#A", 1)
    if status is not None:
        put(dynamodb, tables, event("A", 1).with_status(status))
    before = stored(dynamodb, tables, key)

    # When an operator tries to redrive or skip it
    # Then each is refused with the state it needed, and nothing changed, no audit record written
    with pytest.raises(ReleaseError, match="Order#A seq 1 is not FAILED"):
        redrive(dynamodb, tables.outbox, key, reason="r", actor="ops", now=START)
    with pytest.raises(ReleaseError, match="Order#A seq 1 is not FAILED"):
        skip(dynamodb, tables.outbox, key, reason="r", actor="ops", now=START)
    assert stored(dynamodb, tables, key) == before
    assert stored(dynamodb, tables, audit_key(key)) is None


class ChangedAfterTheRead:
    """DynamoDB as a release sees it when another operator redrives the row between its read and its write."""

    def __init__(self, real: Any, table: str, key: RowKey) -> None:
        self._real = real
        self._table = table
        self._key = key

    def get_item(self, **arguments: Any) -> Any:
        answer = self._real.get_item(**arguments)
        self._real.update_item(
            TableName=self._table,
            Key=self._key.item(),
            UpdateExpression="ADD generation :one",
            ExpressionAttributeValues={":one": {"N": "1"}},
        )
        return answer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


@pytest.mark.parametrize("action", [redrive, skip], ids=["redrive", "skip"])
def test_a_row_changed_between_the_read_and_the_write_is_refused_and_nothing_is_written(
    dynamodb: Any, tables: Tables, action: Any
) -> None:
    # Given a FAILED row another operator redrives (and sees fail again) while this release runs
    key = put(dynamodb, tables, failed(event("A", 1)))
    racing = ChangedAfterTheRead(dynamodb, tables.outbox, key)

    # When the release writes
    # Then it is refused: neither the row nor an audit record changed for it
    with pytest.raises(ReleaseError, match="changed meanwhile"):
        action(racing, tables.outbox, key, reason="r", actor="ops", now=START)
    row = stored(dynamodb, tables, key)
    assert row is not None
    assert (row["status"], row["generation"]) == ({"S": "FAILED"}, {"N": "1"})
    assert stored(dynamodb, tables, audit_key(key)) is None


def test_a_row_ever_released_is_redriven_only_when_out_of_order_is_asked_for(
    dynamodb: Any, tables: Tables
) -> None:
    # Given A#1 FAILED on a route that continues past poison: its successors went on without it
    key = put(dynamodb, tables, failed(event("A", 1)), **RELEASED)
    before = stored(dynamodb, tables, key)

    # When an operator redrives it plainly
    # Then it is refused (a later event may be out, and the table cannot tell), and nothing changed
    with pytest.raises(ReleaseError, match="cannot be told: the table keeps no published rows"):
        redrive(dynamodb, tables.outbox, key, reason="needed after all", actor="bob", now=START)
    assert stored(dynamodb, tables, key) == before

    # When the operator asks for it out of order
    redrive(
        dynamodb, tables.outbox, key, reason="needed after all", actor="bob", now=START, out_of_order=True
    )

    # Then it is PENDING again, no longer released, and its audit entry says it went out of order
    row = stored(dynamodb, tables, key)
    assert row is not None
    assert row["status"] == {"S": "PENDING"}
    assert "released_at" not in row
    record = AuditRecords(dynamodb, tables.outbox).of_event(key)
    assert record is not None
    assert [(x.action, x.out_of_order) for x in record.entries] == [("redrive", True)]


def test_a_row_released_once_and_redriven_since_is_still_known_as_released(
    dynamodb: Any, tables: Tables
) -> None:
    # Given a row released long ago, redriven out of order since, and FAILED again (now unreleased)
    key = put(dynamodb, tables, failed(event("A", 1)), first_released_at={"S": "2026-11-01T00:00:00.000Z"})

    # When an operator redrives it plainly / Then it is refused: later events may have gone out back then
    with pytest.raises(ReleaseError, match=r"released at 2026-11-01T00:00:00\.000Z"):
        redrive(dynamodb, tables.outbox, key, reason="r", actor="bob", now=START)


def test_every_redrive_and_skip_is_kept_in_order_and_outlives_the_row(dynamodb: Any, tables: Tables) -> None:
    # Given a FAILED row, redriven, failed again, then skipped
    key = put(dynamodb, tables, failed(event("A", 1)))
    redrive(dynamodb, tables.outbox, key, reason="first try", actor="alice", now=START)
    dynamodb.update_item(
        TableName=tables.outbox,
        Key=key.item(),
        UpdateExpression="SET #s = :failed",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":failed": {"S": "FAILED"}},
    )
    skip(dynamodb, tables.outbox, key, reason="give up", actor="bob", now=START + timedelta(hours=1))

    # Then the row is gone, and its audit record keeps both entries, in order, with each one's generation
    assert stored(dynamodb, tables, key) is None
    [record] = AuditRecords(dynamodb, tables.outbox).select()
    assert [(x.action, x.at, x.by, x.reason, x.generation) for x in record.entries] == [
        ("redrive", "2026-11-29T12:00:00.000Z", "alice", "first try", 0),
        ("skip", "2026-11-29T13:00:00.000Z", "bob", "give up", 1),
    ]
    assert AuditRecords(dynamodb, tables.outbox).select("Order#A") == [record]
    assert AuditRecords(dynamodb, tables.outbox).select("Order#B") == []


@pytest.mark.parametrize(("reason", "actor", "refusal"), [("", "ops", "reason"), ("r", " ", "actor")])
def test_a_release_without_a_reason_or_an_actor_is_refused_before_anything_is_written(
    dynamodb: Any, tables: Tables, reason: str, actor: str, refusal: str
) -> None:
    # Given a FAILED row
    key = put(dynamodb, tables, failed(event("A", 1)))
    before = stored(dynamodb, tables, key)

    # When an operator gives no reason (or no actor) / Then it is refused and nothing changed
    for action in (redrive, skip):
        with pytest.raises(ReleaseError, match=f"an? {refusal}"):
            action(dynamodb, tables.outbox, key, reason=reason, actor=actor, now=START)
    assert stored(dynamodb, tables, key) == before


class FailingClient:
    def __init__(self, error: Exception) -> None:
        self.error = error

    def get_item(self, **_: Any) -> None:
        raise self.error


def test_releases_translate_aws_failures_into_typed_errors() -> None:
    # Given DynamoDB throttling, then unreachable
    throttled = FailingClient(client_error("ProvisionedThroughputExceededException", "GetItem"))
    unreachable = FailingClient(EndpointConnectionError(endpoint_url="https://dynamodb"))
    key = RowKey("Order#A", 1)

    # When a redrive and a skip are tried / Then each raises the library's typed error, never botocore's
    with pytest.raises(ThrottledError):
        redrive(throttled, "outbox", key, reason="r", actor="ops", now=START)
    with pytest.raises(AwsUnavailableError):
        skip(unreachable, "outbox", key, reason="r", actor="ops", now=START)


@pytest.mark.parametrize("release", [redrive, skip], ids=["redrive", "skip"])
def test_a_failed_row_whose_generation_another_writer_stored_as_text_can_still_be_released(
    dynamodb: Any, tables: Tables, release: Any
) -> None:
    # Given a FAILED row with a `generation` the outbox cannot read (another writer's text)
    key = put(dynamodb, tables, failed(event("A", 1)), generation={"S": "one"})

    # When an operator releases it
    release(dynamodb, tables.outbox, key, reason="writer fixed", actor="alice", now=START)

    # Then the release happened: a redriven row is PENDING with a readable generation, a skipped one is gone
    row = stored(dynamodb, tables, key)
    if release is redrive:
        assert row is not None
        assert (row["status"], row["generation"]) == ({"S": "PENDING"}, {"N": "1"})
    else:
        assert row is None
    record = AuditRecords(dynamodb, tables.outbox).of_event(key)
    assert record is not None
    assert [entry.action for entry in record.entries] == [release.__name__]
