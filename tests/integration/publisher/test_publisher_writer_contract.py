"""Another writer's breaks of the row contract, on moto's real NEW_AND_OLD_IMAGES stream: each is reported
(metric, log with ids only) and kept FAILED where a row is left, never silently published or dropped."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from outbox.model import OutboxEvent, RowKey
from outbox.stream_mapping import PUBLISHER_FILTER_PATTERNS
from outbox_local.filtering import FilterCriteria
from outbox_publisher import handler as entry_point
from tests.integration.publisher.publisher_world import DynamoDBClientFailingWrites, World, build_world
from tests.support.aws import Tables
from tests.support.events import event
from tests.support.lambda_context import FakeLambdaContext
from tests.support.metrics import emitted_metrics

SECRET = "LEAK-MARKER-writer-contract"


@pytest.fixture
def world(tables: Tables, dynamodb: Any, monkeypatch: pytest.MonkeyPatch) -> World:
    world = build_world(tables, dynamodb)
    for name, value in world.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(entry_point, "_publisher", None)
    entry_point.metrics.clear_metrics()  # what tests calling `handle` directly left behind
    return world


MAPPING_FILTER = FilterCriteria.from_template(
    {"Filters": [{"Pattern": json.dumps(pattern)} for pattern in PUBLISHER_FILTER_PATTERNS]}
)


def publish(
    world: World, capsys: pytest.CaptureFixture[str], *, skip: int = 0
) -> tuple[dict[str, Any], dict[str, list[float]]]:
    """The deployed handler on the stream's records from `skip`, as the mapping's filter lets them through;
    its response and the metrics it emitted."""
    lambda_event = world.stream_event(skip=skip)
    lambda_event["Records"] = [r for r in lambda_event["Records"] if MAPPING_FILTER.accepts(r)]
    response = entry_point.handler(lambda_event, FakeLambdaContext())
    return response, emitted_metrics(capsys.readouterr().out)


def sequence_numbers(lambda_event: dict[str, Any]) -> list[str]:
    return [record["dynamodb"]["SequenceNumber"] for record in lambda_event["Records"]]


def slot(event: OutboxEvent) -> dict[str, Any]:
    return RowKey(event.aggregate_key, event.seq).item()


def rewrite(world: World, original: OutboxEvent, **changes: Any) -> OutboxEvent:
    """Another writer puts a new event in `original`'s slot without the attribute_not_exists condition."""
    replacement = event(original.aggregate_id, original.seq, payload={"note": SECRET}, **changes)
    world.put_raw(replacement.to_item())
    return replacement


def logged(caplog: pytest.LogCaptureFixture) -> str:
    standard = set(vars(logging.makeLogRecord({})))
    return " ".join(
        f"{r.getMessage()} { ({k: v for k, v in vars(r).items() if k not in standard}) }"
        for r in caplog.records
    )


def test_a_row_an_earlier_release_kept_published_rewritten_by_another_writer_is_failed_not_published(
    world: World, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    # Given A#1 kept PUBLISHED by an earlier release (awaiting its TTL)
    original = event("A", 1)
    world.put_raw(original.to_item() | {"status": {"S": "PUBLISHED"}, "expires_at": {"N": "1900000000"}})
    seen = len(world.stream_event()["Records"])

    # When another writer puts a new event into the same slot, unconditionally, and the publisher gets it
    replacement = rewrite(world, original)
    response, metrics = publish(world, capsys, skip=seen)

    # Then the new event is not published: the row is FAILED with the reason, whole in the poison queue
    assert response == {"batchItemFailures": []}
    assert world.topic_envelopes() == []
    assert world.bus_envelopes() == []
    row = world.row(original)
    assert row["status"] == {"S": "FAILED"}
    assert row["event_id"] == {"S": replacement.event_id}
    assert row["last_error"]["S"].startswith("writer_contract: SlotRewritten: another writer replaced")
    assert "event_id, payload" in row["last_error"]["S"]
    [poison] = world.poison()
    assert (poison["reason"], poison["error_code"]) == ("writer_contract", "SlotRewritten")
    assert poison["row"]["event_id"] == {"S": replacement.event_id}
    # and it is counted and logged with ids only
    assert metrics["WriterContractViolations"] == [1.0]
    assert metrics["PoisonEvents"] == [1.0]
    text = logged(caplog)
    assert "a slot's event was replaced" in text
    assert original.event_id in text
    assert SECRET not in text
    assert SECRET not in row["last_error"]["S"]


def test_a_slot_written_again_after_its_row_was_settled_is_a_new_event_to_the_publisher(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given A#1 published and settled: its row left the table
    original = event("A", 1)
    world.write(original)
    publish(world, capsys)
    assert world.stored(original) is None
    world.topic_envelopes()
    world.bus_envelopes()
    seen = len(world.stream_event()["Records"])

    # When another writer writes a new event into the same slot (it computed the next seq from the outbox
    # table, which keeps no settled rows, instead of from its business data)
    replacement = event("A", 1)
    world.write(replacement)
    response, metrics = publish(world, capsys, skip=seen)

    # Then the publisher cannot tell it from a new event: it is an INSERT like any other, and it is published
    # (the contract's rule is the writer's to keep: docs/contracts.md, "Outbox row"; inbox consumers refuse
    # the reused slot as `slot_rewritten`)
    assert response == {"batchItemFailures": []}
    assert [e["event_id"] for e in world.topic_envelopes()] == [replacement.event_id]
    assert metrics["WriterContractViolations"] == [0.0]


def test_a_slot_rewritten_before_publication_is_failed_holds_its_successors_and_keeps_both_rows(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given A#1 written long ago (the stream delivers it late), another writer rewriting its slot before the
    # publisher ran, then A#2
    original = event("A", 1)
    world.write(original)
    replacement = rewrite(world, original)
    successor = event("A", 2)
    world.write(successor)

    # When the publisher gets the whole stream (INSERT, MODIFY, INSERT) in one batch
    response, metrics = publish(world, capsys)

    # Then nothing is published: the late INSERT's claim found the slot rewritten and left it to the MODIFY,
    # which made the row FAILED; A#2 waits behind it for an operator
    assert response == {"batchItemFailures": []}
    assert world.topic_envelopes() == []
    row = world.row(original)
    assert (row["status"], row["event_id"]) == ({"S": "FAILED"}, {"S": replacement.event_id})
    assert world.row(successor)["status"] == {"S": "PENDING"}
    assert metrics["WriterContractViolations"] == [1.0]
    assert metrics["HeldEvents"] == [1.0]
    # and the poison message holds both the row and the one it replaced, so neither event is lost
    [poison] = world.poison()
    assert poison["row"]["event_id"] == {"S": replacement.event_id}
    assert poison["replaced_row"]["event_id"] == {"S": original.event_id}
    assert poison["replaced_row"]["payload"] == original.to_item()["payload"]


def test_a_fresh_event_whose_slot_is_rewritten_in_the_same_batch_is_published_and_its_row_failed(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given A#1 just written (no claim needed), rewritten by another writer before the publisher ran
    original = OutboxEvent.new(
        aggregate_type="Order", aggregate_id="A", seq=1, event_type="OrderPlaced", payload={"total": "1"}
    )
    world.write(original)
    replacement = rewrite(world, original)

    # When the publisher gets INSERT and MODIFY in one batch
    response, metrics = publish(world, capsys)

    # Then the committed original is published from its INSERT; the row, holding another event now, is not
    # marked PUBLISHED for it but FAILED with the reason
    assert response == {"batchItemFailures": []}
    assert [e["event_id"] for e in world.topic_envelopes()] == [original.event_id]
    row = world.row(original)
    assert (row["status"], row["event_id"]) == ({"S": "FAILED"}, {"S": replacement.event_id})
    assert metrics["WriterContractViolations"] == [1.0]


def test_a_rewrite_that_keeps_the_event_id_but_changes_the_payload_is_a_break_too(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given A#1 pending, whose payload another writer replaces in place
    original = event("A", 1)
    world.write(original)
    seen = len(world.stream_event()["Records"])
    world.put_raw(original.to_item() | {"payload": {"S": json.dumps({"note": SECRET})}})

    # When the publisher gets the MODIFY alone
    _, metrics = publish(world, capsys, skip=seen)

    # Then the row is FAILED naming only the payload as changed
    row = world.row(original)
    assert row["status"] == {"S": "FAILED"}
    assert "(changed: payload)" in row["last_error"]["S"]
    assert metrics["WriterContractViolations"] == [1.0]


def test_the_publishing_paths_own_updates_of_a_pending_row_are_no_break(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given A#1 pending, updated the way a sweeper's lease or an operator's release does (no event field)
    original = event("A", 1)
    world.write(original)
    seen = len(world.stream_event()["Records"])
    world.dynamodb.update_item(
        TableName=world.tables.outbox,
        Key=slot(original),
        UpdateExpression="SET lease_owner = :owner, lease_until = :until",
        ExpressionAttributeValues={":owner": {"S": "sweeper:run-1"}, ":until": {"N": "1"}},
    )

    # When the publisher gets that MODIFY (the filter lets PENDING to PENDING through)
    records = world.stream_event(skip=seen)["Records"]
    assert [MAPPING_FILTER.accepts(r) for r in records] == [True]
    response, metrics = publish(world, capsys, skip=seen)

    # Then it is skipped: nothing published, poisoned or reported
    assert response == {"batchItemFailures": []}
    assert world.topic_envelopes() == []
    assert world.row(original)["status"] == {"S": "PENDING"}
    assert metrics["RecordsSkipped"] == [1.0]
    assert metrics["WriterContractViolations"] == [0.0]


def test_a_pending_row_another_writer_deletes_reads_as_out_and_invokes_nothing(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given A#1 written and deleted by another writer before the publisher saw it, then A#2
    deleted, successor = event("A", 1), event("A", 2)
    world.write(deleted)
    world.dynamodb.delete_item(TableName=world.tables.outbox, Key=slot(deleted))
    world.write(successor)
    records = world.stream_event()["Records"]

    # When the mapping's filter sees the records, and the publisher gets what it lets through
    passed = [record["eventName"] for record in records if MAPPING_FILTER.accepts(record)]
    response, metrics = publish(world, capsys)

    # Then the REMOVE reaches nothing: the publisher's own settles are deletes too, so a delete cannot be told
    # from one. A#1's record comes late (it is claimed first, which reads the row): its row is gone, which
    # reads as settled, so A#1 is never published; A#2 goes, after a gap that an inbox consumer in `strict`
    # mode waits for. This is what the model no longer sees (docs/contracts.md, "Outbox row"): never delete a
    # row.
    assert passed == ["INSERT", "INSERT"]
    assert response == {"batchItemFailures": []}
    assert [e["event_id"] for e in world.topic_envelopes()] == [successor.event_id]
    assert metrics["WriterContractViolations"] == [0.0]
    assert world.stored(successor) is None


def test_a_rewrite_whose_failed_mark_dynamodb_refuses_is_handed_back_not_left_for_the_sweeper(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given A#1 pending, then rewritten by another writer; and DynamoDB throttling the publisher's writes
    original = event("A", 1)
    world.write(original)
    seen = len(world.stream_event()["Records"])
    rewrite(world, original)
    modify = world.stream_event(skip=seen)
    throttled = world.publisher(dynamodb_client=DynamoDBClientFailingWrites(world.dynamodb))

    # When the publisher gets the MODIFY
    response = world.invoke(throttled, modify)

    # Then the record is handed back, with nothing sent to the poison queue yet
    assert [f["itemIdentifier"] for f in response["batchItemFailures"]] == sequence_numbers(modify)
    assert world.poison() == []
    assert world.row(original)["status"] == {"S": "PENDING"}

    # And when Lambda retries it with DynamoDB back, the row is FAILED and poisoned: the sweeper never gets
    # to publish the rewritten event
    assert world.invoke(world.publisher(), modify) == {"batchItemFailures": []}
    assert world.row(original)["status"] == {"S": "FAILED"}
    assert [p["error_code"] for p in world.poison()] == ["SlotRewritten"]
    world.clock.advance(seconds=3600)
    assert world.sweep(world.sweeper()).swept == 0
    assert world.topic_envelopes() == []


def test_a_published_row_rewritten_in_place_loses_its_ttl_when_it_is_failed(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given A#1 kept PUBLISHED with its TTL (by an earlier release), then made PENDING again with another
    # event by an UpdateItem
    original = event("A", 1)
    world.put_raw(
        original.to_item()
        | {
            "status": {"S": "PUBLISHED"},
            "expires_at": {"N": "1900000000"},
            "published_at": {"S": "2026-11-29T12:00:00.000Z"},
        }
    )
    seen = len(world.stream_event()["Records"])
    replacement = event("A", 1, payload={"note": SECRET})
    world.dynamodb.update_item(
        TableName=world.tables.outbox,
        Key=slot(original),
        UpdateExpression="SET #s = :pending, event_id = :id, payload = :payload",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={
            ":pending": {"S": "PENDING"},
            ":id": {"S": replacement.event_id},
            ":payload": replacement.to_item()["payload"],
        },
    )

    # When the publisher gets the MODIFY
    publish(world, capsys, skip=seen)

    # Then the FAILED row keeps nothing of its published life: TTL would otherwise delete it
    row = world.row(original)
    assert row["status"] == {"S": "FAILED"}
    assert "expires_at" not in row
    assert "published_at" not in row


def test_an_event_published_before_its_slot_was_rewritten_never_settles_the_new_event(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given A#1 just written, and another writer rewriting its slot after the publisher sent A#1 and before
    # its settle landed
    original = OutboxEvent.new(
        aggregate_type="Order", aggregate_id="A", seq=1, event_type="OrderPlaced", payload={"total": "1"}
    )
    world.write(original)
    insert = world.stream_event()

    class RewritingBeforeTheSettle:
        def __init__(self, real: Any) -> None:
            self._real = real

        def delete_item(self, **arguments: Any) -> Any:
            rewrite(world, original)
            return self._real.delete_item(**arguments)

        def __getattr__(self, name: str) -> Any:
            return getattr(self._real, name)

    # When the publisher handles the INSERT, then the rewrite's MODIFY
    world.invoke(world.publisher(dynamodb_client=RewritingBeforeTheSettle(world.dynamodb)), insert)
    publish(world, capsys, skip=len(insert["Records"]))

    # Then A#1 is out once, and the row holding the new event was not deleted for it: it is FAILED
    assert [e["event_id"] for e in world.topic_envelopes()] == [original.event_id]
    row = world.row(original)
    assert row["event_id"] != {"S": original.event_id}
    assert row["status"] == {"S": "FAILED"}


def test_an_event_id_reused_across_aggregates_in_one_batch_is_poison_for_the_second_row(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given A#1, and another writer's B#1 under A#1's event_id
    first = event("A", 1)
    world.write(first)
    world.put_raw(event("B", 1).to_item() | {"event_id": {"S": first.event_id}})

    # When the publisher gets both
    response, metrics = publish(world, capsys)

    # Then A#1 is published once; B#1 is FAILED with the reason, in the poison queue, not published
    assert response == {"batchItemFailures": []}
    assert [e["aggregate_id"] for e in world.topic_envelopes()] == ["A"]
    row = world.row(event("B", 1))
    assert row["status"] == {"S": "FAILED"}
    assert row["last_error"]["S"].startswith("writer_contract: EventIdReused")
    assert [p["error_code"] for p in world.poison()] == ["EventIdReused"]
    assert metrics["WriterContractViolations"] == [1.0]


def test_the_mapping_filter_lets_through_only_inserts_and_the_changes_that_can_break_the_contract(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given every kind of change a row goes through: written, leased, settled, failed and redriven, kept
    # PUBLISHED and expired (an earlier release's), and the breaks (rewritten, pending deleted)
    leased, published, redriven, rewritten, deleted, settled = (event(name, 1) for name in "ABCDEF")
    world.write(leased, published, redriven, rewritten, deleted, settled)
    inserts = len(world.stream_event()["Records"])
    table = world.tables.outbox
    world.dynamodb.update_item(
        TableName=table,
        Key=slot(leased),
        UpdateExpression="SET lease_owner = :o",
        ExpressionAttributeValues={":o": {"S": "sweeper:run"}},
    )
    for moved, status in ((published, "PUBLISHED"), (redriven, "FAILED"), (redriven, "PENDING")):
        world.dynamodb.update_item(
            TableName=table,
            Key=slot(moved),
            UpdateExpression="SET #s = :s",
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues={":s": {"S": status}},
        )
    world.dynamodb.delete_item(TableName=table, Key=slot(published))  # as TTL does, once PUBLISHED
    rewrite(world, rewritten)
    world.dynamodb.delete_item(TableName=table, Key=slot(deleted))
    world.dynamodb.delete_item(
        TableName=table,
        Key=slot(settled),
        ConditionExpression="#s = :pending",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":pending": {"S": "PENDING"}},
    )

    # When the mapping's filter sees each record
    records = world.stream_event(skip=inserts)["Records"]
    passed = [
        (record["eventName"], record["dynamodb"]["Keys"]["aggregate_key"]["S"])
        for record in records
        if MAPPING_FILTER.accepts(record)
    ]

    # Then the lease and the rewrite reach the publisher; settles, FAILED marks, redrives, expiries and
    # deletes cost no invocation (a delete by another writer cannot be told from a settle)
    assert passed == [("MODIFY", "Order#A"), ("MODIFY", "Order#D")]


@pytest.mark.parametrize("seq", ["0", "-1"])
def test_a_row_with_a_seq_below_one_is_poison_not_handed_back_forever(
    world: World, capsys: pytest.CaptureFixture[str], seq: str
) -> None:
    # Given another writer's row whose seq is 0 or negative (found by the bad-input catalogue: the order gate
    # handed it back on every invocation, blocking the shard)
    world.put_raw(event("A", 1).to_item() | {"seq": {"N": seq}})

    # When the publisher gets it
    response, metrics = publish(world, capsys)

    # Then it is poison with its reason and FAILED, and the shard goes on
    assert response == {"batchItemFailures": []}
    assert [p["reason"] for p in world.poison()] == ["invalid_row"]
    row = world.dynamodb.get_item(
        TableName=world.tables.outbox, Key={"aggregate_key": {"S": "Order#A"}, "seq": {"N": seq}}
    )["Item"]
    assert row["status"] == {"S": "FAILED"}
    assert metrics["PoisonEvents"] == [1.0]
