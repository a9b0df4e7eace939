"""`outbox redrive` and `outbox skip` through the real entry point, against the local runtime: same
`event_id`, in order, audited, dry runs that change nothing, queues cleaned up after."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

import pytest

from outbox.model import FAILED_INDEX_PARTITION_KEY, LEASE_UNTIL, OutboxStatus, RowKey, failed_shard
from outbox_ops.clients import OpsClients
from outbox_ops.failed import FailedFilter
from outbox_ops.redrive import Operations, Operator, Outcome
from outbox_ops.release import audit_key, redrive
from outbox_ops.resources import OutboxResources
from outbox_publisher.routing import Destination
from tests.integration.ops.conftest import Ops
from tests.integration.ops.test_ops_status_and_failed import BAD_PAYLOAD, new

GOOD_PAYLOAD = {"S": '{"total":"9.99"}'}
MOTO_CALLER = "arn:aws:sts::123456789012:user/moto"
"""Who moto says the caller is: what the audit records."""


def poisoned(
    ops: Ops, aggregate_id: str, *, age: timedelta = timedelta(days=1)
) -> tuple[RowKey, RowKey, str]:
    """X#1 poison (FAILED, on the poison queue) and X#2 held behind it, both `age` old."""
    first = ops.put(new(aggregate_id, 1, age=age), **BAD_PAYLOAD)
    second = ops.put(new(aggregate_id, 2, age=age))
    ops.publish()
    assert (ops.status_of(first), ops.status_of(second)) == ("FAILED", "PENDING")
    return first, second, str(ops.row(first)["event_id"]["S"])


def released(ops: Ops, aggregate_id: str) -> tuple[RowKey, RowKey, str]:
    """X#1 FAILED on a route that let X#2 go on past it (released), and X#2 out since."""
    first = ops.put(new(aggregate_id, 1, age=timedelta(days=1)))
    second = ops.put(new(aggregate_id, 2, age=timedelta(days=1)))
    ops.mark_failed(first, "invalid_row: InvalidPayload", release_reason="route continues past poison")
    ops.sweep()
    assert (ops.status_of(first), ops.status_of(second)) == ("FAILED", "OUT")
    assert "released_at" in ops.row(first)
    return first, second, str(ops.row(first)["event_id"]["S"])


def discarded(ops: Ops, aggregate_id: str) -> tuple[RowKey, str]:
    """X#2 (X#1 never written: it reads as out) whose stream record the mapping discarded to the on-failure
    queue: DynamoDB failed every read of the order gate, so each run stopped before it and handed it back
    until the mapping's retries ran out. The row is PENDING; the message names only shard and sequence
    numbers."""
    rule = ops.runtime.faults.arm("dynamodb", "BatchGetItem", error_code="InternalServerError")
    key = ops.put(new(aggregate_id, 2, age=timedelta(days=1)))
    ops.publish()
    ops.runtime.faults.disarm(rule)
    (message,) = ops.messages(ops.on_failure_queue)
    assert "DDBStreamBatchInfo" in json.loads(message)
    assert ops.status_of(key) == "PENDING"
    # The stream publisher's last try claimed the (late) row; its lease ends with that invocation, as it has
    # by the time an operator looks (the runtime's invocations do not move the wall clock the lease is on).
    ops.dynamodb.update_item(
        TableName=ops.table,
        Key=key.item(),
        UpdateExpression=f"SET {LEASE_UNTIL} = :ended",
        ExpressionAttributeValues={":ended": {"N": str(int(time.time()) - 1)}},
    )
    return key, message


def fix_payload(ops: Ops, key: RowKey) -> None:
    ops.dynamodb.update_item(
        TableName=ops.table,
        Key=key.item(),
        UpdateExpression="SET payload = :good",
        ExpressionAttributeValues={":good": GOOD_PAYLOAD},
    )


def operations(ops: Ops, **replaced: Any) -> Operations:
    """The library behind the commands, on the runtime, with some clients replaced."""
    clients = OpsClients.connect(region="us-east-1", endpoint_url=ops.runtime.endpoint_url)
    clients.__dict__.update(replaced)
    return Operations(clients, OutboxResources.find(clients.cloudformation, "OutboxStack", {}))


class MeanwhileBeforeTheTransaction:
    """DynamoDB where something else happens to the table between a command's read of a row and its
    transaction: `meanwhile` runs once, just before the first TransactWriteItems, and `after_meanwhile` is
    the table as it left it."""

    def __init__(self, ops: Ops, meanwhile: Callable[[], None]) -> None:
        self._ops = ops
        self._real = ops.runtime.client("dynamodb")
        self._meanwhile: Callable[[], None] | None = meanwhile
        self.after_meanwhile: list[dict[str, Any]] = []

    def transact_write_items(self, **arguments: Any) -> Any:
        if self._meanwhile is not None:
            self._meanwhile()
            self._meanwhile = None
            self.after_meanwhile = self._ops.rows()
        return self._real.transact_write_items(**arguments)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


DYNAMODB_WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"})


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Mapping[str, Any]]]:
    """Every DynamoDB write the commands' clients make, as (operation, parameters)."""
    made: list[tuple[str, Mapping[str, Any]]] = []
    connect = OpsClients.client

    def recording(self: OpsClients, service: str) -> Any:
        client = connect(self, service)

        def record(params: Mapping[str, Any], model: Any, **_: Any) -> None:
            if model.name in DYNAMODB_WRITES:
                made.append((model.name, params))

        if service == "dynamodb":
            client.meta.events.register("before-parameter-build", record)
        return client

    monkeypatch.setattr(OpsClients, "client", recording)
    return made


def test_a_dry_run_says_what_would_be_done_and_changes_nothing(ops: Ops) -> None:
    # Given a FAILED event, on the poison queue
    _first, _, event_id = poisoned(ops, "dry")
    rows, poison = ops.rows(), ops.messages(ops.poison_queue)

    # When the operator redrives it as a dry run, for scripts and for people
    result = ops.cli("redrive", "--event-id", event_id, "--reason", "check", "--dry-run", "--json")
    text = ops.cli("redrive", "--event-id", event_id, "--reason", "check", "--dry-run")

    # Then it says it would redrive it and remove its poison message (what the real run removes), and neither
    # the table (audit records included) nor the queues changed
    assert result.code == 0, result.err
    assert [(r["event_id"], r["outcome"]) for r in result.json["rows"]] == [(event_id, "would_redrive")]
    assert result.json["dry_run"] is True
    assert (result.json["poison_messages_to_remove"], result.json["poison_messages_removed"]) == (1, 0)
    assert text.out.startswith("DRY RUN: nothing was changed; this is what the command would do\n")
    assert text.out.endswith("poison messages it would remove: 1\non-failure messages it would remove: 0\n")
    assert ops.rows() == rows
    assert ops.messages(ops.poison_queue) == poison
    assert ops.messages(ops.on_failure_queue) == []


def test_a_redrive_without_a_reason_is_refused(ops: Ops) -> None:
    # Given a FAILED event
    _, _, event_id = poisoned(ops, "noreason")
    rows = ops.rows()

    # When the operator redrives it without a reason, or with a blank one
    missing = ops.cli("redrive", "--event-id", event_id)
    blank = ops.cli("redrive", "--event-id", event_id, "--reason", "  ")

    # Then both are refused as usage errors, saying why, and nothing changed
    assert missing.code == 2
    assert "--reason" in missing.err
    assert blank.code == 2
    assert "argument --reason: a reason is required" in blank.err
    assert ops.rows() == rows


def test_a_redriven_event_is_published_with_its_event_id_in_order_and_audited(ops: Ops) -> None:
    # Given X#1 FAILED (its payload was not JSON), never released, and X#2 held behind it; the writer's bug
    # is fixed
    first, second, event_id = poisoned(ops, "fixed")
    fix_payload(ops, first)

    # When the operator redrives it (no --allow-out-of-order: nothing after it went while it was FAILED)
    result = ops.cli("redrive", "--event-id", event_id, "--reason", "payload repaired", "--json")

    # Then it is PENDING again, out of the failed index, its poison message gone; the audit record says who,
    # when, why, and that the redrive was in order
    assert result.code == 0, result.err
    assert [(r["event_id"], r["outcome"]) for r in result.json["rows"]] == [(event_id, "redriven")]
    assert result.json["poison_messages_removed"] == 1
    assert ops.messages(ops.poison_queue) == []
    row = ops.row(first)
    assert (row["status"]["S"], row["generation"]["N"], row["event_id"]["S"]) == ("PENDING", "1", event_id)
    assert FAILED_INDEX_PARTITION_KEY not in row
    (entry,) = ops.audit(first)
    assert (entry["action"]["S"], entry["by"]["S"], entry["reason"]["S"], entry["generation"]["N"]) == (
        "redrive",
        MOTO_CALLER,
        "payload repaired",
        "0",
    )
    assert "out_of_order" not in entry

    # When the sweeper runs
    ops.sweep()

    # Then X#1, then X#2 are out (their rows left the table), and nothing is FAILED any more
    assert (ops.status_of(first), ops.status_of(second)) == ("OUT", "OUT")
    assert ops.cli("failed", "list", "--json").json["failed"] == []

    # When the original poison INSERT of X#1 reaches the publisher again (a stale re-delivery)
    ops.redeliver_insert(first)

    # Then no row comes back, and the audit record is as it was
    assert ops.status_of(first) == "OUT"
    assert ops.audit(first) == [entry]


def test_a_stale_insert_of_a_redriven_row_cannot_mark_it_failed_again(ops: Ops) -> None:
    # Given a fresh poison row (the stream publishes it without a claim), fixed and redriven
    first, _, event_id = poisoned(ops, "stale", age=timedelta(0))
    fix_payload(ops, first)
    assert ops.cli("redrive", "--event-id", event_id, "--reason", "payload repaired").code == 0

    # When its original INSERT (the poison image) reaches the publisher again before the sweeper ran
    ops.redeliver_insert(first)

    # Then the stale poisoning does not mark the redriven row: it is still PENDING for the sweeper, unlisted
    row = ops.row(first)
    assert (row["status"]["S"], row["generation"]["N"]) == ("PENDING", "1")
    assert FAILED_INDEX_PARTITION_KEY not in row
    assert ops.cli("failed", "list", "--json").json["failed"] == []


def test_a_redrive_of_a_row_ever_released_is_refused_unless_allowed_out_of_order(ops: Ops) -> None:
    # Given Y#1 FAILED on a route that let Y#2 go on past it, and Y#2 out since: the table cannot tell
    first, _, event_id = released(ops, "order")
    rows = ops.rows()

    # When the operator redrives Y#1, as a dry run and for real
    dry = ops.cli("redrive", "--event-id", event_id, "--reason", "needed after all", "--dry-run", "--json")
    refused = ops.cli("redrive", "--event-id", event_id, "--reason", "needed after all", "--json")

    # Then both refuse (Y#1 could go out after Y#2), saying when it was released and what to pass; nothing
    # changed, no audit entry either
    released_at = ops.row(first)["released_at"]["S"]
    for result in (dry, refused):
        assert result.code == 1
        (row,) = result.json["rows"]
        assert row["outcome"] == "refused"
        assert f"it was released at {released_at}" in row["detail"]
        assert "allow" in row["detail"]
    assert ops.rows() == rows
    assert ops.audit(first) == []

    # When the operator allows it out of order
    allowed = ops.cli(
        "redrive", "--event-id", event_id, "--reason", "needed after all", "--allow-out-of-order", "--json"
    )

    # Then it is redriven, its audit entry records the override, and the sweeper publishes it
    assert allowed.code == 0, allowed.err
    assert [r["outcome"] for r in allowed.json["rows"]] == ["redriven"]
    assert [(e["action"]["S"], e["out_of_order"]) for e in ops.audit(first)] == [("redrive", {"BOOL": True})]
    ops.sweep()
    assert ops.status_of(first) == "OUT"


def test_a_row_once_released_stays_one_through_a_redrive(ops: Ops) -> None:
    # Given Y#1 released (Y#2 went on past it), redriven out of order, and FAILED again (not released now)
    first, _, event_id = released(ops, "again")
    assert ops.cli("redrive", "--event-id", event_id, "--reason", "r1", "--allow-out-of-order").code == 0
    first_released_at = ops.row(first)["first_released_at"]["S"]
    ops.mark_failed(first)
    assert "released_at" not in ops.row(first)

    # When the operator redrives it again, without --allow-out-of-order
    result = ops.cli("redrive", "--event-id", event_id, "--reason", "r2", "--json")

    # Then it is refused: Y#2 went out while Y#1 was FAILED the first time, and that is kept on the row
    assert result.code == 1
    (row,) = result.json["rows"]
    assert row["outcome"] == "refused"
    assert f"it was released at {first_released_at}" in row["detail"]
    assert [e["reason"]["S"] for e in ops.audit(first)] == ["r1"]


def test_a_row_saved_released_without_its_first_release_stays_one_through_a_redrive(ops: Ops) -> None:
    # Given Y#1 saved FAILED and released by another writer (a backfill, in the failed index) with
    # `released_at` only, no `first_released_at`; redriven out of order, then FAILED again (not released now)
    event = new("backfilled", 1, age=timedelta(days=1))
    key = ops.put(
        event.with_status(OutboxStatus.FAILED, last_error="rejected: x"),
        released_at={"S": "2026-11-30T12:00:00.000Z"},
        release_reason={"S": "route continues past poison"},
        failed_at={"S": "2026-11-30T12:00:00.000Z"},
        **{FAILED_INDEX_PARTITION_KEY: {"N": str(failed_shard(event.aggregate_key))}},
    )
    event_id = ops.row(key)["event_id"]["S"]
    assert ops.cli("redrive", "--event-id", event_id, "--reason", "r1", "--allow-out-of-order").code == 0
    ops.mark_failed(key)

    # When the operator redrives it again, without --allow-out-of-order
    result = ops.cli("redrive", "--event-id", event_id, "--reason", "r2", "--json")

    # Then it is refused: the release is remembered through the first redrive
    assert result.code == 1
    (row,) = result.json["rows"]
    assert row["outcome"] == "refused"
    assert "it was released at 2026-11-30T12:00:00.000Z" in row["detail"]


def test_a_redriven_row_keeps_the_destinations_that_took_it_and_goes_only_to_the_others(ops: Ops) -> None:
    # Given V#1 the topic took and the bus did not, until the sweeper gave up on it (FAILED)
    key = ops.put(new("partial", 1, age=timedelta(days=1)))
    ops.mark_failed(key, "gave_up: eventbridge InternalException", delivered_to=frozenset({Destination.SNS}))
    event_id = ops.row(key)["event_id"]["S"]
    assert ops.cli("failed", "show", event_id, "--json").json["delivered_to"] == [Destination.SNS.value]

    # When the operator redrives it
    assert ops.cli("redrive", "--event-id", event_id, "--reason", "bus is back").code == 0

    # Then the PENDING row still records that the topic took it
    assert ops.row(key)["delivered_to"] == {"SS": [Destination.SNS.value]}

    # When the sweeper publishes it
    ops.sweep()

    # Then it went to the bus only, once, and its row left the table
    assert ops.deliveries(event_id) == {Destination.SNS.value: 0, Destination.EVENTBRIDGE.value: 1}
    assert ops.status_of(key) == "OUT"


def test_a_skip_deletes_the_failed_row_with_its_audit_entry_and_the_events_behind_it_go(
    ops: Ops, writes: list[tuple[str, Mapping[str, Any]]]
) -> None:
    # Given Z#1 FAILED (on the poison queue), Z#2 held behind it
    first, second, event_id = poisoned(ops, "skip")
    stored = ops.row(first)
    rows = ops.rows()

    # When the operator skips it, as a dry run
    dry = ops.cli("skip", event_id, "--reason", "superseded", "--dry-run", "--json")

    # Then it says it would skip it and remove its poison message, and nothing changed: it wrote nothing
    assert [r["outcome"] for r in dry.json["rows"]] == ["would_skip"]
    assert (dry.json["poison_messages_to_remove"], dry.json["poison_messages_removed"]) == (1, 0)
    assert len(ops.messages(ops.poison_queue)) == 1
    assert ops.rows() == rows
    assert writes == []

    # When the operator skips it for real
    skipped = ops.cli("skip", event_id, "--reason", "superseded", "--json")

    # Then its row has left the table, its poison message is gone, and the audit record holds the skip with
    # the row as it was (its payload too)
    assert skipped.code == 0, skipped.err
    assert [r["outcome"] for r in skipped.json["rows"]] == ["skipped"]
    assert skipped.json["poison_messages_removed"] == 1
    assert ops.status_of(first) == "OUT"
    (entry,) = ops.audit(first)
    assert (entry["action"]["S"], entry["by"]["S"], entry["reason"]["S"]) == (
        "skip",
        MOTO_CALLER,
        "superseded",
    )
    kept = {name: value for name, value in stored.items() if name not in ("aggregate_key", "seq")}
    assert entry["row"]["M"] == kept
    # And both in one transaction: the delete of the row (as read: FAILED, its generation and event) and the
    # audit entry, nothing else written
    ((operation, parameters),) = writes
    assert operation == "TransactWriteItems"
    assert [(kind, item["Key"]) for entry in parameters["TransactItems"] for kind, item in entry.items()] == [
        ("Delete", first.item()),
        ("Update", audit_key(first).item()),
    ]

    # When the sweeper runs
    ops.sweep()

    # Then Z#2 goes; Z#1 was never published
    assert ops.status_of(second) == "OUT"
    assert ops.deliveries(event_id) == {Destination.SNS.value: 0, Destination.EVENTBRIDGE.value: 0}


def test_a_skip_of_a_row_redriven_meanwhile_is_refused_and_changes_nothing(ops: Ops) -> None:
    # Given a FAILED event, and another operator redriving it between the skip's read and its transaction
    first, _, event_id = poisoned(ops, "race-skip")
    table = MeanwhileBeforeTheTransaction(
        ops,
        lambda: redrive(ops.dynamodb, ops.table, first, reason="fixed it", actor="bob"),
    )

    # When the operator skips it
    report = operations(ops, dynamodb=table).skip_failed(
        event_id, Operator(actor="alice", reason="superseded")
    )

    # Then the skip is refused: the row is the redriven one (PENDING, generation 1), the audit record holds
    # only the other redrive: the skip's transaction changed neither
    (result,) = report.rows
    assert result.outcome is Outcome.REFUSED
    assert result.detail == "Order#race-skip seq 1 changed meanwhile: nothing changed"
    assert ops.rows() == table.after_meanwhile
    assert (ops.status_of(first), ops.row(first)["generation"]["N"]) == ("PENDING", "1")
    assert [(e["action"]["S"], e["by"]["S"]) for e in ops.audit(first)] == [("redrive", "bob")]
    # And its poison message stays for the redrive's command to settle
    assert report.poison_messages_removed == 0
    assert len(ops.messages(ops.poison_queue)) == 1


def test_a_redrive_of_a_row_another_operator_redrove_meanwhile_is_refused(ops: Ops) -> None:
    # Given a FAILED event, and another operator redriving it between this redrive's read and its transaction
    first, _, event_id = poisoned(ops, "race-redrive")
    table = MeanwhileBeforeTheTransaction(
        ops,
        lambda: redrive(ops.dynamodb, ops.table, first, reason="fixed it", actor="bob"),
    )

    # When the operator redrives it too
    report = operations(ops, dynamodb=table).redrive_failed(
        FailedFilter(event_ids=frozenset({event_id})), Operator(actor="alice", reason="me too")
    )

    # Then this one is refused and changes nothing: one redrive, one generation, one audit entry
    (result,) = report.rows
    assert (result.outcome, result.detail) == (
        Outcome.REFUSED,
        "Order#race-redrive seq 1 changed meanwhile: nothing changed",
    )
    assert ops.rows() == table.after_meanwhile
    assert ops.row(first)["generation"]["N"] == "1"
    assert [e["by"]["S"] for e in ops.audit(first)] == ["bob"]


def test_on_failure_messages_are_mapped_back_to_their_rows_and_redriven(ops: Ops) -> None:
    # Given a record the stream mapping discarded to the on-failure queue, whose row the sweeper then gave up
    # on (as it does past its cutoffs), marking it FAILED
    key, message = discarded(ops, "discarded")
    ops.mark_failed(key)
    rows = ops.rows()

    # When the operator redrives the on-failure queue as a dry run
    dry = ops.cli("redrive", "--on-failure-queue", "--reason", "topic policy fixed", "--dry-run", "--json")

    # Then the message is mapped to W#1, which would be redriven, and the message removed; nothing changed
    assert dry.code == 0, dry.err
    assert [(r["aggregate_key"], r["seq"], r["outcome"]) for r in dry.json["rows"]] == [
        (key.aggregate_key, key.seq, "would_redrive")
    ]
    assert (dry.json["on_failure_messages_to_remove"], dry.json["on_failure_messages_removed"]) == (1, 0)
    assert ops.rows() == rows
    assert ops.messages(ops.on_failure_queue) == [message]

    # When the operator redrives it for real, and the sweeper runs
    done = ops.cli("redrive", "--on-failure-queue", "--reason", "topic policy fixed", "--json")
    ops.sweep()

    # Then W#1 is redriven and out, audited, and the on-failure message is gone
    assert done.code == 0, done.err
    assert [r["outcome"] for r in done.json["rows"]] == ["redriven"]
    assert done.json["on_failure_messages_removed"] == 1
    assert ops.messages(ops.on_failure_queue) == []
    assert ops.status_of(key) == "OUT"
    assert [e["reason"]["S"] for e in ops.audit(key)] == ["topic policy fixed"]


def test_an_on_failure_message_whose_rows_are_still_pending_is_settled_without_a_redrive(ops: Ops) -> None:
    # Given a record discarded by the mapping whose row is still PENDING (the sweeper's to publish)
    key, _ = discarded(ops, "pending")
    row = ops.row(key)

    # When the operator redrives the on-failure queue
    done = ops.cli("redrive", "--on-failure-queue", "--reason", "topic policy fixed", "--json")

    # Then the row is left to the sweeper, untouched and unaudited, and the message is settled
    assert [(r["seq"], r["outcome"]) for r in done.json["rows"]] == [(key.seq, "pending")]
    assert done.json["on_failure_messages_removed"] == 1
    assert ops.row(key) == row
    assert ops.audit(key) == []

    # And the sweeper publishes it
    ops.sweep()
    assert ops.status_of(key) == "OUT"


def test_an_on_failure_message_whose_rows_are_out_is_settled_and_deleted(ops: Ops) -> None:
    # Given a record discarded by the mapping whose row the sweeper has published since (it left the table)
    key, _ = discarded(ops, "out")
    ops.sweep()
    assert ops.status_of(key) == "OUT"
    rows = ops.rows()

    # When the operator redrives the on-failure queue
    done = ops.cli("redrive", "--on-failure-queue", "--reason", "topic policy fixed", "--json")

    # Then the row is reported out (nothing to do), the message is deleted, and nothing was written
    assert done.code == 0, done.err
    assert [(r["aggregate_key"], r["seq"], r["outcome"]) for r in done.json["rows"]] == [
        (key.aggregate_key, key.seq, "out")
    ]
    assert done.json["on_failure_messages_removed"] == 1
    assert ops.messages(ops.on_failure_queue) == []
    assert ops.rows() == rows


def test_a_poison_message_a_stale_redelivery_left_is_removed_once_its_row_is_out(ops: Ops) -> None:
    # Given a fresh poison row, fixed and redriven, whose original INSERT came again: parked once more on the
    # poison queue, the row not marked (its generation moved on)
    first, _, event_id = poisoned(ops, "orphan", age=timedelta(0))
    fix_payload(ops, first)
    assert ops.cli("redrive", "--event-id", event_id, "--reason", "payload repaired").code == 0
    ops.redeliver_insert(first)
    assert len(ops.messages(ops.poison_queue)) == 1
    # ... then published (as the sweeper does once the row is due): its row leaves the table
    ops.settle(first)
    assert ops.status_of(first) == "OUT"

    # When the operator next redrives something else
    _, _, other_id = poisoned(ops, "orphan-other")
    result = ops.cli("redrive", "--event-id", other_id, "--reason", "r", "--json")

    # Then the stale message goes with the other's: the poison queue is empty
    assert result.json["poison_messages_removed"] == 2
    assert ops.messages(ops.poison_queue) == []


def test_a_poison_message_of_the_redriven_rows_next_failure_is_kept(ops: Ops) -> None:
    # Given a FAILED event on the poison queue, and (as if the sweeper had already failed its redrive) a newer
    # poison message of the same row, generation 1
    _, _, event_id = poisoned(ops, "newer")
    (old,) = ops.messages(ops.poison_queue)
    newer = json.loads(old)
    newer["row"]["generation"] = {"N": "1"}
    ops.sqs.send_message(QueueUrl=ops.poison_queue, MessageBody=json.dumps(newer))

    # When the operator redrives it
    result = ops.cli("redrive", "--event-id", event_id, "--reason", "r", "--json")

    # Then only the message of the life it redrove is removed
    assert result.json["poison_messages_removed"] == 1
    (left,) = ops.messages(ops.poison_queue)
    assert json.loads(left)["row"]["generation"] == {"N": "1"}
