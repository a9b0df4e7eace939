"""Effects outside DynamoDB, through Powertools' Idempotency utility keyed by event_id: made once, only
when the event is next in order, and not made again after a crash between the call and the record."""

from typing import Any

import pytest

from outbox.errors import AwsUnavailableError
from outbox_inbox import GapNotFilledError, Outcome
from outbox_inbox.envelope import Envelope
from outbox_inbox.external import IdempotentCall
from tests.support.inbox import Consumer, order_events, sqs_record
from tests.support.lambda_context import FakeLambdaContext


class Mailer:
    """The external side: records each call with the idempotency key it was given."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int]] = []

    def __call__(self, envelope: Envelope) -> None:
        self.sent.append((envelope.event_id, envelope.seq))


def external(consumer: Consumer, mailer: Mailer) -> IdempotentCall:
    call = IdempotentCall(
        mailer, table_name=consumer.table, consumer="mailer", dedupe_window_s=3600, client=consumer.dynamodb
    )
    call.register_lambda_context(FakeLambdaContext())
    return call


def test_an_external_call_is_made_once_however_often_the_event_arrives(consumer: Consumer) -> None:
    # Given a consumer whose effect is an external call
    mailer = Mailer()
    inbox_consumer = consumer.build(external=external(consumer, mailer), name="mailer")
    placed = order_events()[0]
    record = sqs_record(placed.envelope_json())
    # When the event arrives three times
    outcomes = [inbox_consumer.consume_sqs_record(record) for _ in range(3)]
    # Then the call was made once, keyed by the event's id
    assert outcomes == [Outcome.APPLIED, Outcome.DUPLICATE, Outcome.DUPLICATE]
    assert mailer.sent == [(placed.event_id, 1)]


def test_an_external_call_waits_for_its_predecessor_like_any_effect(consumer: Consumer) -> None:
    # Given a strict consumer with an external effect
    mailer = Mailer()
    inbox_consumer = consumer.build(external=external(consumer, mailer), name="mailer")
    placed, confirmed, *_ = order_events()
    # When seq 2 arrives before seq 1
    with pytest.raises(GapNotFilledError):
        inbox_consumer.consume_sqs_record(sqs_record(confirmed.envelope_json()))
    # Then no call was made for it; once seq 1 is applied, seq 2's call follows
    assert mailer.sent == []
    inbox_consumer.consume_sqs_record(sqs_record(placed.envelope_json()))
    inbox_consumer.consume_sqs_record(sqs_record(confirmed.envelope_json()))
    assert mailer.sent == [(placed.event_id, 1), (confirmed.event_id, 2)]


def test_a_crash_between_the_call_and_the_record_does_not_repeat_the_call(
    consumer: Consumer, monkeypatch: Any
) -> None:
    # Given a consumer whose inbox record fails once, after the external call was made
    mailer = Mailer()
    inbox_consumer = consumer.build(external=external(consumer, mailer), name="mailer")
    placed = order_events()[0]
    record = sqs_record(placed.envelope_json())
    real_apply = inbox_consumer.inbox.apply
    failures = iter([AwsUnavailableError("DynamoDB did not answer")])

    def flaky_apply(*args: Any, **kwargs: Any) -> Any:
        failure = next(failures, None)
        if failure is not None:
            raise failure
        return real_apply(*args, **kwargs)

    monkeypatch.setattr(inbox_consumer.inbox, "apply", flaky_apply)
    # When the message fails, and comes again
    with pytest.raises(AwsUnavailableError):
        inbox_consumer.consume_sqs_record(record)
    outcome = inbox_consumer.consume_sqs_record(record)
    # Then the call was made once only, and the event is recorded as applied
    assert outcome is Outcome.APPLIED
    assert mailer.sent == [(placed.event_id, 1)]
    assert inbox_consumer.consume_sqs_record(record) is Outcome.DUPLICATE
