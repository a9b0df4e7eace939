"""The inbox on moto: each event's effect once, an aggregate's events in order, gaps that wait, and nothing
half-written. The effect is the sample's order-summary projection (a real read model)."""

import dataclasses
import itertools
import json
import random
from datetime import timedelta
from typing import Any

import pytest

from order_consumers.projections import CancellationLedger, OrderSummaryProjection, summary_key
from outbox.errors import ConditionFailedError
from outbox.model import OutboxEvent
from outbox.transaction import TableKeys, Transaction
from outbox_inbox import ConsumerSettings, GapNotFilledError, GapTimeout, Ordering, Outcome
from outbox_inbox.envelope import Envelope
from outbox_inbox.inbox import DEFAULT_DEDUPE_WINDOW_S
from tests.support.aws import scan_all
from tests.support.clock import START
from tests.support.events import event
from tests.support.inbox import Consumer, cancelled, order_events, sqs_record


def deliver(consumer: Any, event: OutboxEvent, **record: Any) -> Outcome:
    outcome: Outcome = consumer.consume_sqs_record(sqs_record(event.envelope_json(), **record))
    return outcome


def summary(harness: Consumer, order_id: str = "o-1") -> dict[str, Any] | None:
    item: dict[str, Any] | None = harness.dynamodb.get_item(
        TableName=harness.table, Key=summary_key(order_id), ConsistentRead=True
    ).get("Item")
    return item


def clear(harness: Consumer) -> None:
    """Empty the table (the inbox's records too): moto's transactions slow down as a table grows."""
    for item in scan_all(harness.dynamodb, harness.table):
        harness.dynamodb.delete_item(TableName=harness.table, Key={"pk": item["pk"]})


def read_model(harness: Consumer) -> list[dict[str, Any]]:
    """The read model's items (the inbox's own records left out)."""
    items = scan_all(harness.dynamodb, harness.table)
    return sorted(
        (item for item in items if item["pk"]["S"].startswith("order#")), key=lambda i: i["pk"]["S"]
    )


@pytest.mark.parametrize("deliveries", [1, 2, 5])
def test_the_same_event_delivered_n_times_has_one_effect(consumer: Consumer, deliveries: int) -> None:
    # Given an order-summary consumer whose effect counts its applications
    projection = OrderSummaryProjection(consumer.table)

    def counting(envelope: Envelope, transaction: Transaction) -> None:
        projection(envelope, transaction)
        transaction.update(
            TableKeys(consumer.table, "pk"),
            {"pk": {"S": "applications"}},
            "ADD times :one",
            label="count",
            values={":one": {"N": "1"}},
        )

    inbox_consumer = consumer.build(effect=counting)
    placed = order_events()[0]
    # When the same OrderPlaced arrives `deliveries` times
    outcomes = [deliver(inbox_consumer, placed) for _ in range(deliveries)]
    # Then it was applied once and acknowledged as a duplicate every other time
    assert outcomes == [Outcome.APPLIED] + [Outcome.DUPLICATE] * (deliveries - 1)
    counter = consumer.dynamodb.get_item(TableName=consumer.table, Key={"pk": {"S": "applications"}})["Item"]
    assert counter["times"] == {"N": "1"}
    assert summary(consumer) is not None


def test_five_events_in_any_order_with_duplicates_yield_the_in_order_read_model(consumer: Consumer) -> None:
    # Given the read model of the five events applied once, in order
    events = order_events()
    reference = consumer.build(effect=OrderSummaryProjection(consumer.table))
    for item in events:
        assert deliver(reference, item) is Outcome.APPLIED
    expected = read_model(consumer)
    assert [(item["status"], item["last_seq"]) for item in expected] == [({"S": "CONFIRMED"}, {"N": "2"})]
    clear(consumer)

    # The reversed order, then a fixed sample of the 120 (each costs a fresh inbox on moto; the reliability
    # suite's schedules deliver in random orders too)
    every_order = list(itertools.permutations(events))
    orders = [every_order[-1], *random.Random(5).sample(every_order[:-1], 15)]  # noqa: S311 - not a secret
    for order in orders:
        # When the events arrive in this order, each one twice, and SQS hands back what waits for a
        # predecessor (redelivering it after the ones behind it in the queue)
        inbox_consumer = consumer.build(effect=OrderSummaryProjection(consumer.table))
        queue = [item for item in order for _ in (0, 1)]
        handed_back = 0
        while queue:
            item = queue.pop(0)
            try:
                deliver(inbox_consumer, item)
            except GapNotFilledError:
                handed_back += 1
                queue.append(item)
        # Then the read model is the in-order one, every time
        assert read_model(consumer) == expected, order
        assert handed_back > 0 or order == tuple(events)
        clear(consumer)


def test_a_gap_is_handed_back_then_applied_once_its_predecessor_arrives(consumer: Consumer) -> None:
    # Given a strict consumer
    placed, confirmed, *_ = order_events()
    inbox_consumer = consumer.build(effect=OrderSummaryProjection(consumer.table))
    # When seq 2 arrives before seq 1
    with pytest.raises(GapNotFilledError) as gap:
        deliver(inbox_consumer, confirmed)
    # Then it is not applied (the summary does not exist) and the error says what it waits for
    assert summary(consumer) is None
    assert (gap.value.seq, gap.value.last_applied) == (2, 0)
    # When seq 1 arrives, then seq 2 again
    assert deliver(inbox_consumer, placed) is Outcome.APPLIED
    assert deliver(inbox_consumer, confirmed) is Outcome.APPLIED
    # Then both are applied, in order
    item = summary(consumer)
    assert item is not None
    assert (item["status"], item["last_seq"]) == ({"S": "CONFIRMED"}, {"N": "2"})


def test_after_the_configured_wait_a_gap_goes_to_the_dead_letter_queue_with_its_reason(
    consumer: Consumer,
) -> None:
    # Given a strict consumer waiting at most 10 minutes for a missing predecessor
    placed, confirmed, *_ = order_events()
    inbox_consumer = consumer.build(
        effect=OrderSummaryProjection(consumer.table), settings=ConsumerSettings(max_gap_wait_s=600)
    )
    body = confirmed.envelope_json()
    record = sqs_record(body, first_received=START)
    # When seq 2 is received at once, and again 9 minutes later
    with pytest.raises(GapNotFilledError):
        inbox_consumer.consume_sqs_record(record)
    consumer.clock.advance(minutes=9)
    with pytest.raises(GapNotFilledError):
        inbox_consumer.consume_sqs_record(record)
    assert consumer.dead_letters() == []
    # When it is received once more, 10 minutes after its first receipt
    consumer.clock.advance(minutes=1)
    outcome = inbox_consumer.consume_sqs_record(record)
    # Then it is acknowledged as dead-lettered, and the dead-letter queue holds it unchanged with the reason
    assert outcome is Outcome.DEAD_LETTERED
    [letter] = consumer.dead_letters()
    assert letter["Body"] == body
    reason = letter["MessageAttributes"]["inbox_reason"]["StringValue"]
    assert reason == "gap: seq 2 waited 600 s for seq 1 (max 600 s)"
    assert letter["MessageAttributes"]["inbox_source_message_id"]["StringValue"] == record["messageId"]
    # And nothing was applied: seq 1, arriving now, applies on its own
    assert summary(consumer) is None
    assert deliver(inbox_consumer, placed) is Outcome.APPLIED


def test_by_configuration_a_gap_that_waited_long_enough_is_applied_and_the_skip_recorded(
    consumer: Consumer,
) -> None:
    # Given a strict consumer that applies an event once it has waited 60 s
    events = order_events()
    inbox_consumer = consumer.build(
        settings=ConsumerSettings(max_gap_wait_s=60, on_gap_timeout=GapTimeout.APPLY),
    )
    assert deliver(inbox_consumer, events[0]) is Outcome.APPLIED
    # When seq 4 arrives (2 and 3 lost) and is received again after 60 s
    record = sqs_record(events[3].envelope_json())
    with pytest.raises(GapNotFilledError):
        inbox_consumer.consume_sqs_record(record)
    consumer.clock.advance(seconds=60)
    # Then it is applied with the gap recorded on the aggregate's inbox record
    assert inbox_consumer.consume_sqs_record(record) is Outcome.APPLIED_WITH_GAP
    aggregate = consumer.dynamodb.get_item(
        TableName=consumer.table, Key={"pk": {"S": "summary#aggregate#Order#o-1"}}
    )["Item"]
    assert aggregate["last_seq"] == {"N": "4"}
    assert sorted(aggregate["skipped_seqs"]["NS"]) == ["2", "3"]
    # And a redelivery of seq 4 is a duplicate, and seq 5 follows directly
    assert inbox_consumer.consume_sqs_record(record) is Outcome.DUPLICATE
    assert deliver(inbox_consumer, events[4]) is Outcome.APPLIED
    # And a skipped event that arrives after all is not dropped as a duplicate: it is dead-lettered, saying so
    assert deliver(inbox_consumer, events[1]) is Outcome.DEAD_LETTERED
    [letter] = consumer.dead_letters()
    assert letter["MessageAttributes"]["inbox_reason"]["StringValue"] == (
        "late: seq 2 arrived after the consumer applied past it (it was skipped)"
    )


def test_every_skipped_seq_stays_recognisable_after_a_second_skip(consumer: Consumer) -> None:
    # Given a consumer that applies past gaps after 60 s, and one aggregate's events 1..9
    events = [event("o-1", seq, payload={"n": seq}) for seq in range(1, 10)]
    inbox_consumer = consumer.build(
        settings=ConsumerSettings(max_gap_wait_s=60, on_gap_timeout=GapTimeout.APPLY)
    )
    assert deliver(inbox_consumer, events[0]) is Outcome.APPLIED
    # When it skips 2-4 (seq 5 waited long enough), then 6-7 (seq 8 waited long enough)
    for waiting in (events[4], events[7]):
        record = sqs_record(waiting.envelope_json(), first_received=consumer.clock())
        with pytest.raises(GapNotFilledError):
            inbox_consumer.consume_sqs_record(record)
        consumer.clock.advance(seconds=60)
        assert inbox_consumer.consume_sqs_record(record) is Outcome.APPLIED_WITH_GAP
    # Then seq 3 (skipped first) arriving now is recognised as late, as is seq 7
    assert deliver(inbox_consumer, events[2]) is Outcome.DEAD_LETTERED
    assert deliver(inbox_consumer, events[6]) is Outcome.DEAD_LETTERED
    assert len(consumer.dead_letters()) == 2
    # And seq 9 applies
    assert deliver(inbox_consumer, events[8]) is Outcome.APPLIED


def test_a_filtered_consumer_in_latest_mode_applies_order_cancelled_at_seq_3_with_no_wait(
    consumer: Consumer,
) -> None:
    # Given the cancellations consumer, which only ever receives OrderCancelled (latest ordering)
    inbox_consumer = consumer.build(
        ordering=Ordering.LATEST, effect=CancellationLedger(consumer.table), name="cancellations"
    )
    # When OrderCancelled at seq 3 arrives, seqs 1 and 2 never delivered to it
    outcome = deliver(inbox_consumer, cancelled("o-9", 3))
    # Then it is applied at once
    assert outcome is Outcome.APPLIED
    item = consumer.dynamodb.get_item(TableName=consumer.table, Key={"pk": {"S": "cancellation#o-9"}})["Item"]
    assert (item["seq"], item["previous_status"]) == ({"N": "3"}, {"S": "CONFIRMED"})


def test_latest_mode_skips_an_older_seq_as_stale(consumer: Consumer) -> None:
    # Given a latest-mode projection that has applied seq 4 of an aggregate
    events = order_events()
    inbox_consumer = consumer.build(ordering=Ordering.LATEST)
    assert deliver(inbox_consumer, events[3]) is Outcome.APPLIED
    # When seq 2 arrives late, and seq 4 again, then seq 5
    # Then seq 2 is stale, seq 4 a duplicate, seq 5 applied
    assert deliver(inbox_consumer, events[1]) is Outcome.STALE
    assert deliver(inbox_consumer, events[3]) is Outcome.DUPLICATE
    assert deliver(inbox_consumer, events[4]) is Outcome.APPLIED


def test_unordered_mode_only_deduplicates(consumer: Consumer) -> None:
    # Given an unordered consumer
    events = order_events()
    inbox_consumer = consumer.build(ordering=Ordering.UNORDERED)
    # When seq 5 arrives first, then seq 1, then seq 5 again
    # Then both apply at once, and the repeat is a duplicate
    assert deliver(inbox_consumer, events[4]) is Outcome.APPLIED
    assert deliver(inbox_consumer, events[0]) is Outcome.APPLIED
    assert deliver(inbox_consumer, events[4]) is Outcome.DUPLICATE


def test_a_cancelled_transaction_between_effect_and_record_leaves_neither(consumer: Consumer) -> None:
    # Given an effect whose own write's condition fails (the transaction is cancelled)
    def refused(envelope: Envelope, transaction: Transaction) -> None:
        OrderSummaryProjection(consumer.table)(envelope, transaction)
        transaction.condition_check(
            TableKeys(consumer.table, "pk"), {"pk": {"S": "gate"}}, "attribute_exists(pk)", label="gate"
        )

    inbox_consumer = consumer.build(effect=refused)
    placed = order_events()[0]
    # When the event is consumed
    with pytest.raises(ConditionFailedError):
        deliver(inbox_consumer, placed)
    # Then neither the effect nor any inbox record was written
    assert scan_all(consumer.dynamodb, consumer.table) == []
    # And once the effect can be applied, the same event applies (it was never recorded as processed)
    consumer.dynamodb.put_item(TableName=consumer.table, Item={"pk": {"S": "gate"}})
    assert deliver(inbox_consumer, placed) is Outcome.APPLIED


def test_inbox_records_carry_a_ttl_of_the_dedupe_window_and_aggregate_records_none(
    consumer: Consumer,
) -> None:
    # Given a strict consumer
    inbox_consumer = consumer.build()
    # When it applies an event
    deliver(inbox_consumer, order_events()[0])
    # Then its processed-event record expires after the dedupe window; the aggregate's last applied seq
    # never expires (it is what still refuses a duplicate that arrives after the window)
    records = {item["pk"]["S"]: item for item in scan_all(consumer.dynamodb, consumer.table)}
    event_record = next(item for key, item in records.items() if "#event#" in key)
    aggregate_record = records["summary#aggregate#Order#o-1"]
    assert int(event_record["expires_at"]["N"]) == int(START.timestamp()) + DEFAULT_DEDUPE_WINDOW_S
    assert "expires_at" not in aggregate_record


def test_a_duplicate_after_the_dedupe_window_is_still_refused_by_seq(consumer: Consumer) -> None:
    # Given a strict consumer that applied seq 1 and seq 2, whose processed-event records then expired
    events = order_events()
    inbox_consumer = consumer.build()
    deliver(inbox_consumer, events[0])
    deliver(inbox_consumer, events[1])
    for item in scan_all(consumer.dynamodb, consumer.table):
        if "#event#" in item["pk"]["S"]:
            consumer.dynamodb.delete_item(TableName=consumer.table, Key={"pk": item["pk"]})
    # When seq 1 arrives again
    # Then it is a duplicate all the same: its seq is at or below the last applied
    assert deliver(inbox_consumer, events[0]) is Outcome.DUPLICATE


def test_a_payload_that_breaks_its_schema_goes_to_the_dead_letter_queue(consumer: Consumer) -> None:
    # Given the order-summary consumer and an OrderPlaced without its lines
    placed = order_events()[0]
    envelope = json.loads(placed.envelope_json())
    del envelope["payload"]["lines"]
    inbox_consumer = consumer.build(effect=OrderSummaryProjection(consumer.table))
    # When it is consumed
    outcome = inbox_consumer.consume_sqs_record(sqs_record(json.dumps(envelope)))
    # Then it is dead-lettered with the field named and nothing is written
    assert outcome is Outcome.DEAD_LETTERED
    [letter] = consumer.dead_letters()
    reason = letter["MessageAttributes"]["inbox_reason"]["StringValue"]
    assert reason == "malformed payload: payload field lines is not a list"
    assert scan_all(consumer.dynamodb, consumer.table) == []


def test_the_wait_counts_from_the_first_receipt_not_from_publication(consumer: Consumer) -> None:
    # Given an event published long ago but received for the first time now
    confirmed = order_events()[1]
    inbox_consumer = consumer.build(settings=ConsumerSettings(max_gap_wait_s=60))
    consumer.clock.advance(timedelta(days=1))
    # When it arrives before its predecessor
    # Then it waits (it has not waited 60 s since SQS first handed it out)
    with pytest.raises(GapNotFilledError):
        deliver(inbox_consumer, confirmed, first_received=consumer.clock())


@pytest.mark.parametrize("ordering", list(Ordering))
def test_an_event_id_another_writer_reused_for_another_aggregate_is_dead_lettered_not_dropped(
    consumer: Consumer, ordering: Ordering
) -> None:
    # Given o-1's OrderPlaced applied, and o-2's OrderPlaced published under the same event_id (another
    # writer broke the row contract)
    inbox_consumer = consumer.build(ordering=ordering, effect=OrderSummaryProjection(consumer.table))
    placed = order_events("o-1")[0]
    reused = dataclasses.replace(order_events("o-2")[0], event_id=placed.event_id)
    assert deliver(inbox_consumer, placed) is Outcome.APPLIED

    # When o-2's event arrives
    outcome = deliver(inbox_consumer, reused)

    # Then it is not taken for a duplicate and silently acknowledged: it is dead-lettered with the reason,
    # without its effect, while o-1's own redelivery is still a duplicate
    assert outcome is Outcome.DEAD_LETTERED
    [letter] = consumer.dead_letters()
    assert letter["MessageAttributes"]["inbox_reason"]["StringValue"].startswith("event_id_reused")
    assert summary(consumer, "o-2") is None
    assert deliver(inbox_consumer, placed) is Outcome.DUPLICATE


@pytest.mark.parametrize("ordering", [Ordering.STRICT, Ordering.LATEST])
def test_a_slot_another_writer_rewrote_after_it_was_applied_is_dead_lettered_not_taken_for_a_duplicate(
    consumer: Consumer, ordering: Ordering
) -> None:
    # Given o-1's OrderPlaced (seq 1) applied, then another event published for the same slot (another
    # writer rewrote the row, and an operator redrove it)
    inbox_consumer = consumer.build(ordering=ordering, effect=OrderSummaryProjection(consumer.table))
    placed = order_events("o-1")[0]
    assert deliver(inbox_consumer, placed) is Outcome.APPLIED
    rewritten = dataclasses.replace(placed, event_id=order_events("o-2")[0].event_id)

    # When it arrives
    outcome = deliver(inbox_consumer, rewritten)

    # Then it is dead-lettered with the reason, not acknowledged as a duplicate; the original's redelivery
    # still is one
    assert outcome is Outcome.DEAD_LETTERED
    [letter] = consumer.dead_letters()
    assert letter["MessageAttributes"]["inbox_reason"]["StringValue"].startswith("slot_rewritten")
    assert deliver(inbox_consumer, placed) is Outcome.DUPLICATE
