"""Which conditions a settle (the delete of a published row) needs, shown by the promise itself.

A settle deletes the row only if it is still PENDING, holds the event the run published (`event_id`) and is
of the generation the run read. Each test plays a race in which one of those conditions is all that stands
between the promise and a lost event, then plays it again with that condition taken out of the settle (the
adapter's condition, monkeypatched: a mutant) and shows the promise broken. The promise, as checked here:
every event still to go out is either out on every destination with the content it has now, or kept in the
table, PENDING or FAILED with its reason; nothing is gone unpublished.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import pytest

from outbox.model import IS_PENDING, OutboxEvent, RowKey
from outbox_ops.release import redrive
from outbox_publisher import dynamodb_rows
from outbox_publisher.row_updates import Generation
from tests.integration.publisher.publisher_world import World
from tests.integration.publisher.sweeping import GRACE
from tests.support.clock import START
from tests.support.events import event

# What each condition adds to the settle's condition expression, and the values it names.
CLAUSES = {
    "status": (re.escape(IS_PENDING) + " AND ", [":pending"]),
    "event_id": (" AND event_id = :event_id", [":event_id"]),
    "generation": (r" AND (attribute_not_exists\(generation\)|generation = :generation)", [":generation"]),
}


@pytest.fixture(params=[None, *CLAUSES], ids=["as-built", *(f"without-{name}" for name in CLAUSES)])
def without(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str | None:
    """The settle as built, or a mutant without one of its conditions (FAILED marks and parks keep theirs)."""
    name: str | None = request.param
    if name is not None:
        clause, names = CLAUSES[name]
        real = dynamodb_rows._condition

        def mutant(
            event_id: str | None, generation: Generation, lease_owner: str | None
        ) -> tuple[str, dict[str, str], dict[str, Any]]:
            condition, attribute_names, values = real(event_id, generation, lease_owner)
            if lease_owner is not None or "#status" not in condition:
                return condition, attribute_names, values
            stripped = re.sub(
                clause, "attribute_exists(aggregate_key) AND " if name == "status" else "", condition
            )
            if name == "status":
                attribute_names = {}
            return stripped, attribute_names, {k: v for k, v in values.items() if k not in names}

        monkeypatch.setattr(dynamodb_rows, "_condition", mutant)
    return name


def kept_or_out(world: World, e: OutboxEvent, published: list[dict[str, Any]]) -> bool:
    """The promise for one event: its row is still in the table (PENDING, or FAILED with a reason), or the
    content it had last went out (`published`: the envelopes every destination received)."""
    row = world.stored(e)
    if row is not None:
        status = row["status"]["S"]
        return status == "PENDING" or (status == "FAILED" and bool(row.get("last_error", {}).get("S")))
    return any(
        envelope["payload"] == e.payload and envelope["event_id"] == e.event_id for envelope in published
    )


def settle_after(world: World, change: Any) -> Any:
    """A DynamoDB client that makes `change` just before the publisher's settle of a row."""

    class ChangingBeforeTheSettle:
        def __init__(self, real: Any) -> None:
            self._real = real

        def delete_item(self, **arguments: Any) -> Any:
            change()
            return self._real.delete_item(**arguments)

        def __getattr__(self, name: str) -> Any:
            return getattr(self._real, name)

    return ChangingBeforeTheSettle(world.dynamodb)


def test_the_event_id_keeps_a_settle_from_deleting_another_event_written_into_the_slot(
    world: World, without: str | None
) -> None:
    # Given A#1 published by the stream publisher, and another writer putting a new event into its slot
    # between the publish and the settle
    original = event("A", 1)
    world.write(original)
    replacement = event("A", 1, payload={"note": "the new event"})
    insert = world.stream_event()

    # When the publisher handles the INSERT, then the rewrite's MODIFY
    dynamodb = settle_after(world, lambda: world.put_raw(replacement.to_item()))
    world.invoke(world.publisher(dynamodb_client=dynamodb), insert)
    world.invoke(world.publisher(), world.stream_event(skip=len(insert["Records"])))

    # Then the new event is kept (FAILED with its reason: a writer broke the contract) as built; without the
    # event_id condition its row was deleted by the old event's settle, and it is gone unpublished
    published = world.topic_envelopes()
    assert kept_or_out(world, replacement, published) is (without != "event_id")


def test_the_status_keeps_a_settle_from_deleting_a_row_failed_in_the_same_run(
    world: World, without: str | None
) -> None:
    # Given A#1 written, then rewritten in place by another writer keeping its event_id (its payload changed),
    # both records in one batch: the run publishes the INSERT's event and marks the row FAILED for the MODIFY
    original = event("A", 1)
    world.write(original)
    rewritten = OutboxEvent.from_item(
        original.to_item() | {"payload": {"S": json.dumps({"note": "changed"})}}
    )
    world.put_raw(rewritten.to_item())

    # When the publisher handles the batch
    world.invoke(world.publisher(), world.stream_event())

    # Then the rewritten event is kept FAILED as built; without the status condition the settle of the
    # original deleted the FAILED row, and the rewritten event is gone unpublished
    published = world.topic_envelopes()
    assert kept_or_out(world, rewritten, published) is (without != "status")


def test_the_generation_keeps_a_stale_record_from_settling_a_redriven_row(
    world: World, without: str | None
) -> None:
    # Given A#1 FAILED, its payload fixed by an operator and redriven (generation 1)
    original = event("A", 1, payload={"total": "wrong"})
    world.write(original)
    stale_insert = world.stream_event()
    key = RowKey(original.aggregate_key, 1)
    world.dynamodb.update_item(
        TableName=world.tables.outbox,
        Key=key.item(),
        UpdateExpression="SET #s = :failed, last_error = :why, payload = :fixed",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={
            ":failed": {"S": "FAILED"},
            ":why": {"S": "gave_up: sns:InternalError"},
            ":fixed": {"S": json.dumps({"total": "9.99"})},
        },
    )
    redrive(world.dynamodb, world.tables.outbox, key, reason="payload fixed", actor="ops", now=START)
    fixed = OutboxEvent.from_item(world.row(original))

    # When a stale delivery of its first INSERT reaches the stream publisher, then the sweeper runs
    world.invoke(world.publisher(), stale_insert)
    world.clock.advance(GRACE + timedelta(seconds=1))
    world.sweep(world.sweeper())

    # Then the event as redriven went out as built; without the generation condition the stale record's
    # settle deleted the redriven row, and the fixed event never went out
    published = world.topic_envelopes()
    assert kept_or_out(world, fixed, published) is (without != "generation")
