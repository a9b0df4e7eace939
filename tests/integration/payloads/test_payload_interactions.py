"""Large payloads with the other parts of a write and a publish, on moto: several events in one append, a
trace context, the same event id written twice, a stored envelope replaced by another event's of one size."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from outbox.dynamodb import DynamoDBTransactionExecutor
from outbox.errors import DuplicateEventError, InvalidEventError
from outbox.model import OutboxStatus
from outbox.payload_store import PayloadStore, PayloadUnavailableError
from outbox.s3_payloads import S3PayloadStore
from outbox.trace_context import TraceContext
from outbox.transaction import Transaction
from outbox.writer import OutboxWriter
from outbox_inbox.envelope import envelope_of
from outbox_inbox.errors import MalformedEnvelopeError
from tests.integration.payloads.conftest import BUCKET, stored_key, write
from tests.integration.payloads.test_large_payload_faults import (
    S3ClientFailing,
    large,
    object_keys,
    published,
    publisher_reading,
    sweeper_reading,
)
from tests.integration.publisher.publisher_world import World
from tests.support.events import event
from tests.support.inbox import sqs_record

HEADER = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


class FailingSecondPut:
    """The real store, but its second PutObject fails as S3 throttling would."""

    def __init__(self, real: PayloadStore) -> None:
        self._real = real
        self._puts = 0

    def put(self, key: str, text: str) -> Any:
        self._puts += 1
        if self._puts == 2:
            raise PayloadUnavailableError("S3 PutObject failed (SlowDown)", code="SlowDown")
        return self._real.put(key, text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def test_a_store_failing_on_the_second_of_two_events_leaves_the_transaction_empty(
    world: World, store: S3PayloadStore
) -> None:
    # Given two large events appended together, the store failing on the second
    transaction = Transaction()
    writer = OutboxWriter(world.tables.outbox, payload_store=FailingSecondPut(store))

    # When they are appended, Then the failure is raised and neither event joined the transaction
    with pytest.raises(PayloadUnavailableError):
        writer.append(transaction, large("A", 1), large("A", 2))
    assert len(transaction) == 0


def test_an_event_refused_after_a_large_one_stores_nothing(
    world: World, store: S3PayloadStore, s3: Any
) -> None:
    # Given a large event and, after it in the same append, one that cannot be written (not PENDING)
    transaction = Transaction()
    refused = event("A", 2).with_status(OutboxStatus.FAILED)

    # When they are appended, Then the refusal comes before anything is stored or added
    with pytest.raises(InvalidEventError):
        OutboxWriter(world.tables.outbox, payload_store=store).append(transaction, large("A", 1), refused)
    assert len(transaction) == 0
    assert object_keys(s3) == []


def test_a_stored_envelope_carries_the_trace_on_every_path(
    world: World, store: S3PayloadStore, s3: Any
) -> None:
    # Given a large event written while a request was traced
    big = large("A", 1)
    writer = OutboxWriter(
        world.tables.outbox,
        payload_store=store,
        trace_context=lambda: TraceContext.given(HEADER, TRACEPARENT),
    )
    transaction = Transaction()
    writer.append(transaction, big)
    DynamoDBTransactionExecutor(world.dynamodb).execute(transaction)
    stored = json.loads(s3.get_object(Bucket=BUCKET, Key=stored_key(s3, big))["Body"].read())
    assert (stored["trace_header"], stored["traceparent"]) == (HEADER, TRACEPARENT)

    # When it is published as claim checks on both destinations and a consumer resolves each
    assert world.invoke(world.publisher(), world.stream_event()) == {"batchItemFailures": []}
    [on_topic], [on_bus] = published(world)

    # Then the SNS claim carries the trace as attributes, the EventBridge claim in its detail, and the
    # consumer gets it back in the envelope either way
    assert on_topic["MessageAttributes"]["trace_header"]["StringValue"] == HEADER
    detail = json.loads(on_bus["Body"])["detail"]
    assert "payload" not in detail
    assert detail["trace_header"] == HEADER
    for body in (on_topic["Body"], on_bus["Body"]):
        envelope = envelope_of(sqs_record(body), payloads=store)
        assert (envelope.trace_header, envelope.traceparent) == (HEADER, TRACEPARENT)


def test_a_cancelled_write_of_the_same_event_id_leaves_the_committed_envelope_as_it_was(
    world: World, store: S3PayloadStore, s3: Any
) -> None:
    # Given a large event written and committed
    big = large("A", 1)
    write(world, store, big)
    committed_ref = world.row(big)["payload_ref"]["S"]

    # When the same event id is written again with another body (a retried command) and its slot is taken
    again = large("A", 1, size=310 * 1024)
    again = replace(again, event_id=big.event_id)
    transaction = Transaction()
    OutboxWriter(world.tables.outbox, payload_store=store).append(transaction, again)
    with pytest.raises(DuplicateEventError):
        DynamoDBTransactionExecutor(world.dynamodb).execute(transaction)

    # Then the second write stored an object of its own, and the row still names the first, unchanged
    assert len(object_keys(s3)) == 2
    assert world.row(big)["payload_ref"]["S"] == committed_ref
    world.invoke(world.publisher(), world.stream_event())
    _, [on_bus] = published(world)
    resolved = envelope_of(sqs_record(on_bus["Body"]), payloads=store)
    assert dict(resolved.payload) == dict(big.payload)


def test_a_stored_envelope_of_the_same_size_naming_another_slot_is_poison_and_never_forwarded(
    world: World, store: S3PayloadStore, s3: Any
) -> None:
    # Given a 100 KB event (stored, small enough to go whole) whose object was replaced by text of the same
    # size naming another aggregate and seq
    middle = large("A", 1, size=100 * 1024)
    write(world, store, middle)
    key = stored_key(s3, middle)
    text = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read().decode()
    forged = text.replace('"seq":1,', '"seq":7,')
    assert len(forged) == len(text)
    assert forged != text
    s3.put_object(Bucket=BUCKET, Key=key, Body=forged.encode())

    # When the publisher handles the stream
    world.invoke(world.publisher(), world.stream_event())

    # Then nothing is forwarded, and the event is poison naming the field that differs
    assert published(world) == ([], [])
    [poison] = world.poison()
    assert (poison["reason"], poison["error_code"]) == ("invalid_row", "PayloadMismatch")
    assert "seq" in world.row(middle)["last_error"]["S"]


def test_a_consumer_refuses_a_claim_whose_stored_envelope_names_another_event(
    world: World, store: S3PayloadStore, s3: Any
) -> None:
    # Given a large event published as claim checks, its object then replaced by another seq's envelope
    big = large("A", 1)
    write(world, store, big)
    world.invoke(world.publisher(), world.stream_event())
    _, [on_bus] = published(world)
    key = stored_key(s3, big)
    text = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read().decode()
    s3.put_object(Bucket=BUCKET, Key=key, Body=text.replace('"seq":1,', '"seq":7,').encode())

    # When the consumer resolves the EventBridge claim, Then it is a malformed envelope naming the field
    with pytest.raises(MalformedEnvelopeError, match="another seq"):
        envelope_of(sqs_record(on_bus["Body"]), payloads=store)


def test_a_sweep_that_cannot_read_a_stored_envelope_records_why_and_waits_without_counting_it(
    world: World, store: S3PayloadStore, s3: Any
) -> None:
    # Given a large event the stream path could not publish, and S3 denying every read to the sweeper
    big = large("A", 1)
    write(world, store, big)
    world.clock.advance(seconds=600)
    sweeper = sweeper_reading(world, S3ClientFailing(s3, "AccessDenied", 403))

    attempts_before = world.row(big).get("attempts")

    # When a sweep runs
    world.sweep(sweeper)

    # Then the row is still PENDING, saying why and when it is tried again, its failures not counted
    row = world.row(big)
    assert row["status"]["S"] == "PENDING"
    assert row["last_error"]["S"] == "PayloadAccessDenied"
    assert "next_attempt_at" in row
    assert row["envelope_waits"]["N"] == "1"
    assert "sweep_failures" not in row
    assert row.get("attempts") == attempts_before
    assert published(world) == ([], [])

    # When S3 answers again and a sweep runs after the wait, Then it is out
    world.clock.advance(seconds=600)
    world.sweep(world.sweeper())
    assert [json.loads(m["Body"])["detail"]["seq"] for m in published(world)[1]] == [1]
    assert world.stored(big) is None


def test_a_stored_envelope_is_not_read_without_the_time_for_it(
    world: World, store: S3PayloadStore, s3: Any
) -> None:
    # Given a large event, and an invocation with too little time left for one more bounded call
    big = large("A", 1)
    write(world, store, big)
    counting = S3ClientFailing(s3, "SlowDown", 503)

    # When the publisher handles the stream
    result = world.invoke(publisher_reading(world, counting), world.stream_event(), remaining_ms=1_000)

    # Then S3 was not called, nothing was published or poisoned, and the record is handed back for another
    # invocation, its row still PENDING
    assert counting.calls == 0
    assert len(result["batchItemFailures"]) == 1
    assert published(world) == ([], [])
    assert world.poison() == []
    assert world.row(big)["status"]["S"] == "PENDING"


def test_a_row_the_transaction_refuses_takes_the_whole_append_out_and_keeps_what_was_there(
    world: World, store: S3PayloadStore
) -> None:
    from outbox.errors import DuplicateItemKeyError
    from outbox.transaction import TableKeys

    # Given a transaction holding the caller's own action, and an append whose second row takes the slot
    # of its first (a large event's)
    transaction = Transaction()
    transaction.put(TableKeys(world.tables.orders, "pk"), {"pk": {"S": "ORDER#1"}}, label="order")
    writer = OutboxWriter(world.tables.outbox, payload_store=store)

    # When it is appended, Then the refusal takes every row of the append out, and the caller's stays
    with pytest.raises(DuplicateItemKeyError):
        writer.append(transaction, large("A", 1), event("A", 1))
    assert transaction.labels == ("order",)


def test_an_envelope_over_the_maximum_anywhere_in_the_append_stores_nothing(
    world: World, store: S3PayloadStore, s3: Any
) -> None:
    from outbox.payload_refs import MAX_STORED_ENVELOPE_BYTES
    from outbox.payload_store import PayloadTooLargeError

    # Given a large event, then one whose envelope is over the store's maximum
    too_large = large("A", 2, size=MAX_STORED_ENVELOPE_BYTES)
    transaction = Transaction()

    # When they are appended, Then the refusal comes before the first one is stored
    with pytest.raises(PayloadTooLargeError):
        OutboxWriter(world.tables.outbox, payload_store=store).append(transaction, large("A", 1), too_large)
    assert len(transaction) == 0
    assert object_keys(s3) == []
