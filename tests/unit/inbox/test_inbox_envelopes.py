"""Every shape a consumer receives an outbox event in, and the typed error for what is not one."""

import json
from decimal import Decimal
from typing import Any

import pytest

from outbox_inbox import Envelope, MalformedEnvelopeError, envelope_of
from tests.support.events import event
from tests.support.inbox import FIFO_QUEUE_ARN, eventbridge_event, sns_notification, sqs_record

PUBLISHED = event("o-1", 3, payload={"total": "19.98", "weight": 0.1, "big": 12345678901234567890})
ENVELOPE_JSON = PUBLISHED.envelope_json()
ENVELOPE = json.loads(ENVELOPE_JSON)


def expected() -> Envelope:
    return Envelope(
        event_id=PUBLISHED.event_id,
        event_type="OrderPlaced",
        schema_version=1,
        aggregate_type="Order",
        aggregate_id="o-1",
        seq=3,
        occurred_at=PUBLISHED.occurred_at,
        correlation_id=None,
        payload={"total": "19.98", "weight": Decimal("0.1"), "big": 12345678901234567890},
    )


@pytest.mark.parametrize(
    "message",
    [
        pytest.param(sqs_record(ENVELOPE_JSON), id="sqs-from-sns-raw"),
        pytest.param(sqs_record(sns_notification(ENVELOPE_JSON)), id="sqs-from-sns-wrapped"),
        pytest.param(sqs_record(json.dumps(eventbridge_event(ENVELOPE))), id="sqs-from-eventbridge-rule"),
        pytest.param(eventbridge_event(ENVELOPE), id="eventbridge-invoking-the-function"),
        pytest.param(
            sqs_record(ENVELOPE_JSON, queue_arn=FIFO_QUEUE_ARN, group_id="Order#o-1"), id="sqs-fifo"
        ),
    ],
)
def test_each_delivery_shape_gives_the_published_envelope(message: dict[str, Any]) -> None:
    # Given an event as the publisher publishes it, delivered in one of the shapes AWS gives consumers
    # When the envelope is read from it
    envelope = envelope_of(message)
    # Then it is the published envelope, numbers exact
    assert envelope == expected()
    assert envelope.aggregate_key == "Order#o-1"


def with_field(name: str, value: object) -> str:
    return json.dumps({**ENVELOPE, name: value})


def without_field(name: str) -> str:
    return json.dumps({key: value for key, value in ENVELOPE.items() if key != name})


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("not json", "the SQS message body is not JSON"),
        ("[1, 2]", "the envelope is not a JSON object"),
        (with_field("event_id", "42"), "event_id is not a UUID"),
        (without_field("event_type"), "event_type is not a non-empty string"),
        (with_field("aggregate_id", ""), "aggregate_id is not a non-empty string"),
        (with_field("seq", 0), "seq is not a positive whole number"),
        (with_field("seq", 1.5), "seq is not a positive whole number"),
        (with_field("seq", "2"), "seq is not a positive whole number"),
        (with_field("seq", True), "seq is not a positive whole number"),
        (without_field("schema_version"), "schema_version is not a positive whole number"),
        (with_field("correlation_id", 7), "correlation_id is neither a string nor null"),
        (with_field("payload", "{}"), "payload is not a JSON object"),
        (json.dumps({"Type": "Notification", "Message": 5}), "the SNS notification's Message is not text"),
        (json.dumps({"Type": "Notification", "Message": "{"}), "the SNS notification's Message is not JSON"),
        ("[" * 100_000, "the SQS message body is not JSON"),
    ],
)
def test_a_malformed_message_is_a_typed_error_naming_the_field_not_its_value(body: str, reason: str) -> None:
    # Given an SQS record whose body is not an envelope
    # When the envelope is read
    # Then a MalformedEnvelopeError names what is wrong, and never repeats the message's data
    with pytest.raises(MalformedEnvelopeError) as error:
        envelope_of(sqs_record(body))
    assert str(error.value) == reason


@pytest.mark.parametrize("message", [{}, {"Records": []}, "text", {"eventSource": "aws:sqs", "body": None}])
def test_something_that_is_neither_an_sqs_record_nor_an_eventbridge_event_is_a_typed_error(
    message: object,
) -> None:
    with pytest.raises(MalformedEnvelopeError):
        envelope_of(message)


@pytest.mark.parametrize("name", ["seq", "schema_version"])
def test_a_seq_or_schema_version_of_more_digits_than_dynamodb_keeps_is_malformed(name: str) -> None:
    # Given 39 digits: the inbox stores both as DynamoDB numbers, which keep 38
    # When / Then a typed error the consumer dead-letters, not a refused write handed back forever
    with pytest.raises(MalformedEnvelopeError, match=f"^{name} is not a positive whole number$"):
        envelope_of(sqs_record(with_field(name, 10**38)))
    assert getattr(envelope_of(sqs_record(with_field(name, 10**38 - 1))), name) == 10**38 - 1
