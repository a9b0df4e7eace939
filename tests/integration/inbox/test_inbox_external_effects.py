"""Effects outside DynamoDB, through Powertools' Idempotency utility keyed by event_id: made once, only
when the event is next in order, and not made again after a crash between the call and the record."""

import dataclasses
import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyAlreadyInProgressError

from outbox.errors import AwsUnavailableError, ConfigurationError, RetryableError
from outbox.model import OutboxEvent
from outbox_inbox import ConsumerSettings, GapNotFilledError, GapTimeout, Ordering, Outcome
from outbox_inbox.batch import handle_sqs_batch
from outbox_inbox.envelope import Envelope
from outbox_inbox.errors import ExternalCallInProgressError
from outbox_inbox.external import IdempotentCall
from outbox_inbox.function import EventBridgeConsumerFunction
from tests.support.aws import scan_all
from tests.support.inbox import Consumer, eventbridge_event, order_events, sqs_record
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


class InProgressWatcher:
    """An external call that reads, while it runs, the expiry of its own in-progress record."""

    def __init__(self, consumer: Consumer, name: str) -> None:
        self._consumer = consumer
        self._prefix = f"{name}#external"
        self.expiries_ms: list[int] = []

    def __call__(self, envelope: Envelope) -> None:
        [record] = [
            item
            for item in scan_all(self._consumer.dynamodb, self._consumer.table)
            if item["pk"]["S"].startswith(self._prefix) and item["status"]["S"] == "INPROGRESS"
        ]
        self.expiries_ms.append(int(record["in_progress_expiration"]["N"]))


def invocations_bound_the_call(
    invoke: Callable[[OutboxEvent, FakeLambdaContext], None], watcher: InProgressWatcher
) -> None:
    """Two invocations of one warm consumer, with 42 s and then 17 s left: each call's in-progress record
    expires with its own invocation (not the first one's, nor the dedupe window's)."""
    placed, confirmed, *_ = order_events()
    for event, remaining_ms in ((placed, 42_000), (confirmed, 17_000)):
        started_ms = int(time.time() * 1000)
        invoke(event, FakeLambdaContext(remaining_ms=remaining_ms))
        ended_ms = int(time.time() * 1000)
        assert started_ms + remaining_ms <= watcher.expiries_ms[-1] <= ended_ms + remaining_ms
    assert len(watcher.expiries_ms) == 2


def test_the_batch_handler_bounds_an_in_progress_call_by_each_invocations_remaining_time(
    consumer: Consumer,
) -> None:
    # Given a strict consumer with an external call, never told of an invocation but by the batch handler
    watcher = InProgressWatcher(consumer, "mailer")
    call = IdempotentCall(
        watcher, table_name=consumer.table, consumer="mailer", dedupe_window_s=3600, client=consumer.dynamodb
    )
    inbox_consumer = consumer.build(external=call, name="mailer")

    def invoke(event: OutboxEvent, context: FakeLambdaContext) -> None:
        response = handle_sqs_batch({"Records": [sqs_record(event.envelope_json())]}, inbox_consumer, context)
        assert response == {"batchItemFailures": []}

    # When SQS batches invoke it twice, then each call's record in progress expires with its invocation
    invocations_bound_the_call(invoke, watcher)


def test_the_eventbridge_entry_point_bounds_an_in_progress_call_by_each_invocations_remaining_time(
    consumer: Consumer,
) -> None:
    # Given the EventBridge entry point of an unordered consumer with an external call
    watcher = InProgressWatcher(consumer, "mailer")
    function = EventBridgeConsumerFunction(
        "mailer",
        external_for=lambda _config: watcher,
        env={
            "INBOX_TABLE_NAME": consumer.table,
            "INBOX_CONSUMER": "mailer",
            "INBOX_ORDERING": "unordered",
            "INBOX_DEAD_LETTER_QUEUE_URL": consumer.dead_letter_url,
            "POWERTOOLS_METRICS_NAMESPACE": "OutboxTests",
        },
    )

    def invoke(event: OutboxEvent, context: FakeLambdaContext) -> None:
        answer = function.handler(eventbridge_event(json.loads(event.envelope_json())), context)
        assert answer == {"outcome": "applied"}

    # When a rule invokes it twice, then each call's record in progress expires with its invocation
    invocations_bound_the_call(invoke, watcher)
