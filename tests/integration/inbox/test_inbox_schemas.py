"""A consumer that validates on receipt with the producer's schema files: a mismatch is a dead letter with
its reason, before the inbox records anything; never a silent drop."""

from __future__ import annotations

import json
from typing import Any

import pytest

from order_consumers.projections import OrderSummaryProjection
from orders.event_schemas import load_schemas
from outbox_inbox import GapNotFilledError, Ordering, Outcome
from tests.support.aws import scan_all
from tests.support.inbox import Consumer, order_events, sqs_record


def reasons(harness: Consumer) -> list[str]:
    return [letter["MessageAttributes"]["inbox_reason"]["StringValue"] for letter in harness.dead_letters()]


def test_a_payload_its_schema_refuses_is_dead_lettered_with_its_reason_and_nothing_is_written(
    consumer: Consumer,
) -> None:
    # Given a strict consumer validating with the Orders schemas, and an OrderPlaced whose quantity is text
    placed, confirmed, *_ = order_events()
    envelope: dict[str, Any] = json.loads(placed.envelope_json())
    envelope["payload"]["lines"][0]["quantity"] = "two"
    inbox_consumer = consumer.build(effect=OrderSummaryProjection(consumer.table), schemas=load_schemas())
    # When it is consumed
    outcome = inbox_consumer.consume_sqs_record(sqs_record(json.dumps(envelope)))
    # Then it goes to the dead-letter queue, whole, with the type, version, path and rule (not the value)
    assert outcome is Outcome.DEAD_LETTERED
    [letter] = consumer.dead_letters()
    assert letter["MessageAttributes"]["inbox_reason"]["StringValue"] == (
        "schema: OrderPlaced v1 payload does not match its schema at $.lines[0].quantity (type)"
    )
    assert json.loads(letter["Body"]) == envelope
    # and nothing was written: neither the read model nor the inbox's record of the event
    assert scan_all(consumer.dynamodb, consumer.table) == []
    # and its successor waits for it (handed back), as for any event not applied: nothing skips past it
    with pytest.raises(GapNotFilledError):
        inbox_consumer.consume_sqs_record(sqs_record(confirmed.envelope_json()))


def test_events_that_match_apply_and_an_unknown_type_is_refused_the_same_way(consumer: Consumer) -> None:
    # Given the same consumer and an order's events: placed and confirmed (described), then OrderNoted (not)
    placed, confirmed, noted, *_ = order_events()
    inbox_consumer = consumer.build(effect=OrderSummaryProjection(consumer.table), schemas=load_schemas())
    # When they arrive in order
    outcomes = [
        inbox_consumer.consume_sqs_record(sqs_record(e.envelope_json())) for e in (placed, confirmed, noted)
    ]
    # Then the described ones apply, and the one no schema describes is dead-lettered, saying so
    assert outcomes == [Outcome.APPLIED, Outcome.APPLIED, Outcome.DEAD_LETTERED]
    assert reasons(consumer) == [
        "schema: no schema for OrderNoted v1: add its file or fix the event's type or version"
    ]


def test_without_schemas_the_consumer_does_not_validate(consumer: Consumer) -> None:
    # Given the default consumer (validation is off) and an event no schema describes
    *_, noted = order_events()
    # Then it is applied as before
    unordered = consumer.build(ordering=Ordering.UNORDERED)
    assert unordered.consume_sqs_record(sqs_record(noted.envelope_json())) is Outcome.APPLIED
    assert consumer.dead_letters() == []
