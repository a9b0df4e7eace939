"""Effects outside DynamoDB, through Powertools' Idempotency utility keyed by event_id: made once, only
when the event is next in order, and not made again after a crash between the call and the record."""

import dataclasses
import json
import time
from typing import Any

import pytest
from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyAlreadyInProgressError

from outbox.errors import AwsUnavailableError, ConfigurationError, RetryableError
from outbox_inbox import ConsumerSettings, GapNotFilledError, GapTimeout, Ordering, Outcome
from outbox_inbox.batch import handle_sqs_batch
from outbox_inbox.envelope import Envelope
from outbox_inbox.errors import ExternalCallInProgressError
from outbox_inbox.external import IdempotentCall
from tests.support.aws import scan_all
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


@pytest.mark.parametrize(
    ("ordering", "on_gap_timeout", "message"),
    [
        (Ordering.LATEST, GapTimeout.DEAD_LETTER, "external effects need strict or unordered ordering"),
        (Ordering.STRICT, GapTimeout.APPLY, "external effects cannot apply past gaps"),
    ],
)
def test_external_effects_are_refused_where_a_later_call_could_overtake_an_earlier_one(
    consumer: Consumer, ordering: Ordering, on_gap_timeout: GapTimeout, message: str
) -> None:
    # Given an ordering under which a later event could pass the inbox's check while an earlier one's call is
    # made but not yet recorded
    # When a consumer with an external effect is built with it
    # Then it is refused at start-up, not discovered as reordered calls
    with pytest.raises(ConfigurationError, match=message):
        consumer.build(
            ordering=ordering,
            external=external(consumer, Mailer()),
            settings=ConsumerSettings(on_gap_timeout=on_gap_timeout),
            name="mailer",
        )


def test_an_idempotency_record_in_progress_elsewhere_is_a_typed_retryable_error(
    consumer: Consumer, monkeypatch: Any
) -> None:
    # Given an external call whose Powertools record is held by another delivery
    call = external(consumer, Mailer())

    def in_progress(**_: Any) -> None:
        raise IdempotencyAlreadyInProgressError("in progress")

    monkeypatch.setattr(call, "_once", in_progress)
    # When it is made
    # Then the error is the inbox's own, retryable (the message is handed back and comes again)
    with pytest.raises(ExternalCallInProgressError) as error:
        call(Envelope.from_document(json.loads(order_events()[0].envelope_json())))
    assert isinstance(error.value, RetryableError)


def test_an_external_call_is_not_made_for_an_event_id_applied_for_another_aggregate(
    consumer: Consumer,
) -> None:
    # Given o-1's OrderPlaced applied with its external call, and o-2's published under the same event_id
    mailer = Mailer()
    inbox_consumer = consumer.build(external=external(consumer, mailer), name="mailer")
    placed = order_events("o-1")[0]
    reused = dataclasses.replace(order_events("o-2")[0], event_id=placed.event_id)
    inbox_consumer.consume_sqs_record(sqs_record(placed.envelope_json()))

    # When o-2's event arrives
    outcome = inbox_consumer.consume_sqs_record(sqs_record(reused.envelope_json()))

    # Then it is dead-lettered with the reason and no call is made for it
    assert outcome is Outcome.DEAD_LETTERED
    assert mailer.sent == [(placed.event_id, 1)]
    [letter] = consumer.dead_letters()
    assert letter["MessageAttributes"]["inbox_reason"]["StringValue"].startswith("event_id_reused")


def test_the_batch_handler_bounds_an_in_progress_call_by_the_invocations_remaining_time(
    consumer: Consumer,
) -> None:
    # Given a consumer with an external call that has not been told of any invocation yet, and a call that
    # reads its own in-progress record while it runs
    seen: list[dict[str, Any]] = []

    def call(envelope: Envelope) -> None:
        records = scan_all(consumer.dynamodb, consumer.table)
        seen.extend(item for item in records if item["pk"]["S"].startswith("mailer#external"))

    external_call = IdempotentCall(
        call, table_name=consumer.table, consumer="mailer", dedupe_window_s=3600, client=consumer.dynamodb
    )
    inbox_consumer = consumer.build(external=external_call, name="mailer")
    record = sqs_record(order_events()[0].envelope_json())
    # When Lambda's batch handler runs it in an invocation with 42 s left
    started_ms = int(time.time() * 1000)
    response = handle_sqs_batch({"Records": [record]}, inbox_consumer, FakeLambdaContext(remaining_ms=42_000))
    ended_ms = int(time.time() * 1000)
    # Then the record in progress during the call expires with the invocation, not only with the dedupe
    # window: a crash mid-call blocks the event for the invocation's remaining time at most
    assert response == {"batchItemFailures": []}
    assert [item["status"]["S"] for item in seen] == ["INPROGRESS"]
    expiry_ms = int(seen[0]["in_progress_expiration"]["N"])
    assert started_ms + 42_000 <= expiry_ms <= ended_ms + 42_000
