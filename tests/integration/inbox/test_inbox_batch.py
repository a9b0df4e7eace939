"""SQS batches, message by message: only failed and gapped messages are reported, FIFO groups stop at their
first failure, what can never be applied goes to the dead-letter queue instead of failing the batch."""

import json
import logging
from datetime import UTC, datetime
from typing import Any

import pytest

from order_consumers.projections import CancellationLedger, OrderSummaryProjection
from outbox.errors import ConfigurationError
from outbox.transaction import TableKeys, Transaction
from outbox_inbox.batch import MIN_TIME_PER_RECORD_MS, handle_sqs_batch
from outbox_inbox.envelope import Envelope
from outbox_inbox.errors import InvalidSqsEventError
from outbox_inbox.function import EventBridgeConsumerFunction
from tests.support.aws import scan_all
from tests.support.inbox import (
    FIFO_QUEUE_ARN,
    Consumer,
    cancelled,
    eventbridge_event,
    order_events,
    sqs_record,
)
from tests.support.lambda_context import FakeLambdaContext


def failures(response: dict[str, Any]) -> list[str]:
    return [entry["itemIdentifier"] for entry in response["batchItemFailures"]]


def test_the_batch_response_lists_only_the_failed_and_gapped_messages(consumer: Consumer) -> None:
    # Given a strict order-summary consumer whose effect fails for one order
    projection = OrderSummaryProjection(consumer.table)

    def effect(envelope: Envelope, transaction: Transaction) -> None:
        projection(envelope, transaction)
        if envelope.aggregate_id == "o-broken":
            transaction.condition_check(
                TableKeys(consumer.table, "pk"), {"pk": {"S": "absent"}}, "attribute_exists(pk)", label="x"
            )

    inbox_consumer = consumer.build(effect=effect)
    first = order_events("o-1")
    applied = sqs_record(first[0].envelope_json())
    duplicate = sqs_record(first[0].envelope_json())
    gap = sqs_record(order_events("o-2")[1].envelope_json())
    malformed = sqs_record("{not an envelope")
    broken = sqs_record(order_events("o-broken")[0].envelope_json())
    next_one = sqs_record(first[1].envelope_json())
    # When one batch carries them all
    response = handle_sqs_batch(
        {"Records": [applied, duplicate, gap, malformed, broken, next_one]},
        inbox_consumer,
        FakeLambdaContext(),
    )
    # Then only the gap and the failure are handed back; the malformed one went to the dead-letter queue
    assert failures(response) == [gap["messageId"], broken["messageId"]]
    [letter] = consumer.dead_letters()
    assert letter["Body"] == "{not an envelope"
    assert letter["MessageAttributes"]["inbox_reason"]["StringValue"] == (
        "malformed envelope: the SQS message body is not JSON"
    )
    summaries = [
        item for item in scan_all(consumer.dynamodb, consumer.table) if item["pk"]["S"] == "order#o-1"
    ]
    assert [item["status"]["S"] for item in summaries] == ["CONFIRMED"]


def test_a_batch_of_only_gaps_is_an_answer_not_an_invocation_error(consumer: Consumer) -> None:
    # Given a strict consumer and a batch in which every message waits for a predecessor
    inbox_consumer = consumer.build()
    records = [sqs_record(order_events(f"o-{n}")[1].envelope_json()) for n in range(3)]
    # When it is handled
    response = handle_sqs_batch({"Records": records}, inbox_consumer, FakeLambdaContext())
    # Then every message is reported (handed back), and the invocation did not raise
    assert failures(response) == [record["messageId"] for record in records]


def test_a_fifo_batch_stops_at_the_first_failure_of_each_message_group(consumer: Consumer) -> None:
    # Given a strict consumer on a FIFO queue, and two message groups (one per order)
    inbox_consumer = consumer.build()
    a, b = order_events("o-a"), order_events("o-b")
    a2 = sqs_record(a[1].envelope_json(), queue_arn=FIFO_QUEUE_ARN, group_id="Order#o-a")
    a3 = sqs_record(a[2].envelope_json(), queue_arn=FIFO_QUEUE_ARN, group_id="Order#o-a")
    b1 = sqs_record(b[0].envelope_json(), queue_arn=FIFO_QUEUE_ARN, group_id="Order#o-b")
    b2 = sqs_record(b[1].envelope_json(), queue_arn=FIFO_QUEUE_ARN, group_id="Order#o-b")
    # When group a's first message waits for its predecessor
    response = handle_sqs_batch({"Records": [a2, b1, a3, b2]}, inbox_consumer, FakeLambdaContext())
    # Then the rest of group a is reported without being tried, and group b is applied
    assert failures(response) == [a2["messageId"], a3["messageId"]]
    records = {item["pk"]["S"] for item in scan_all(consumer.dynamodb, consumer.table)}
    assert "summary#aggregate#Order#o-b" in records
    assert "summary#aggregate#Order#o-a" not in records


def test_a_fifo_group_past_its_failure_is_handed_back_without_being_tried(consumer: Consumer) -> None:
    # Given a consumer on a FIFO queue whose effect fails for order o-a, and sees every event it is given
    tried: list[tuple[str, int]] = []

    def effect(envelope: Envelope, transaction: Transaction) -> None:
        tried.append((envelope.aggregate_id, envelope.seq))
        if envelope.aggregate_id == "o-a":
            raise RuntimeError("the effect failed")

    inbox_consumer = consumer.build(effect=effect)
    a, b = order_events("o-a"), order_events("o-b")
    a1, a2, b1 = (
        sqs_record(event.envelope_json(), queue_arn=FIFO_QUEUE_ARN, group_id=f"Order#{event.aggregate_id}")
        for event in (a[0], a[1], b[0])
    )
    # When group a's first message fails, with its next message later in the batch than group b's
    response = handle_sqs_batch({"Records": [a1, b1, a2]}, inbox_consumer, FakeLambdaContext())
    # Then group a's next message is handed back untried, and group b goes on
    assert failures(response) == [a1["messageId"], a2["messageId"]]
    assert tried == [("o-a", 1), ("o-b", 1)]


def test_a_message_the_dead_letter_queue_refuses_is_handed_back_not_lost(consumer: Consumer) -> None:
    # Given a consumer whose dead-letter queue does not exist
    consumer.sqs.delete_queue(QueueUrl=consumer.dead_letter_url)
    inbox_consumer = consumer.build()
    malformed = sqs_record("[]")
    # When a malformed message arrives
    response = handle_sqs_batch({"Records": [malformed]}, inbox_consumer, FakeLambdaContext())
    # Then it is reported as failed: it comes again instead of vanishing
    assert failures(response) == [malformed["messageId"]]


def test_records_after_the_first_are_not_started_without_time_left_for_their_calls(
    consumer: Consumer,
) -> None:
    # Given an invocation with less time left than one record's calls can take
    inbox_consumer = consumer.build()
    events = order_events()[:3]
    records = [sqs_record(event.envelope_json()) for event in events]
    context = FakeLambdaContext(remaining_ms=MIN_TIME_PER_RECORD_MS - 1)
    # When the batch is handled
    response = handle_sqs_batch({"Records": records}, inbox_consumer, context)
    # Then the first record still runs (a timeout in it would write nothing), so the queue always moves on,
    # and the others are handed back untouched
    assert failures(response) == [record["messageId"] for record in records[1:]]
    written = {item["pk"]["S"] for item in scan_all(consumer.dynamodb, consumer.table)}
    assert written == {"summary#aggregate#Order#o-1", f"summary#event#{events[0].event_id}"}


def test_a_message_failing_for_another_reason_than_a_gap_is_logged_with_its_id_and_error_type(
    consumer: Consumer, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a consumer whose effect's own condition fails
    def refused(envelope: Envelope, transaction: Transaction) -> None:
        transaction.condition_check(
            TableKeys(consumer.table, "pk"), {"pk": {"S": "absent"}}, "attribute_exists(pk)", label="x"
        )

    inbox_consumer = consumer.build(effect=refused)
    record = sqs_record(order_events()[0].envelope_json())
    # When its batch is handled
    with caplog.at_level(logging.WARNING, logger="outbox_inbox"):
        response = handle_sqs_batch({"Records": [record]}, inbox_consumer, FakeLambdaContext())
    # Then it is handed back, and a warning names the message and the error's type (never its data)
    assert failures(response) == [record["messageId"]]
    [warning] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.message_id == record["messageId"]  # type: ignore[attr-defined]
    assert warning.error == "ConditionFailedError"  # type: ignore[attr-defined]


def test_the_sample_consumers_handlers_answer_with_partial_batch_responses(
    consumer: Consumer, monkeypatch: Any
) -> None:
    # Given the order-summary function's handler, configured as the stack configures it
    from order_consumers import summary_handler

    environment = {
        "INBOX_TABLE_NAME": consumer.table,
        "INBOX_CONSUMER": "order-summary",
        "INBOX_DEAD_LETTER_QUEUE_URL": consumer.dead_letter_url,
        "POWERTOOLS_METRICS_NAMESPACE": "OutboxTests",
    }
    monkeypatch.setattr(summary_handler.function, "_env", environment)
    monkeypatch.setattr(summary_handler.function, "_consumer", None)
    events = order_events("o-7")
    # (the function runs on the real clock: the messages were first received just now)
    now = datetime.now(UTC)
    placed = sqs_record(events[0].envelope_json(), first_received=now)
    gap = sqs_record(events[2].envelope_json(), first_received=now)
    # When it gets a batch with an applicable event and one whose predecessor is missing
    response = summary_handler.handler({"Records": [placed, gap]}, FakeLambdaContext())
    # Then only the gapped message is reported, and the summary exists
    assert failures(response) == [gap["messageId"]]
    item = consumer.dynamodb.get_item(TableName=consumer.table, Key={"pk": {"S": "order#o-7"}})["Item"]
    assert json.loads(json.dumps(item["status"])) == {"S": "PLACED"}


def test_the_cancellations_handler_applies_a_cancel_without_its_predecessors_and_reports_only_failures(
    consumer: Consumer, monkeypatch: Any
) -> None:
    # Given the cancellations function's handler (latest ordering), configured as the stack configures it
    from order_consumers import cancellations_handler

    environment = {
        "INBOX_TABLE_NAME": consumer.table,
        "INBOX_CONSUMER": "order-cancellations",
        "INBOX_ORDERING": "latest",
        "INBOX_DEAD_LETTER_QUEUE_URL": consumer.dead_letter_url,
        "POWERTOOLS_METRICS_NAMESPACE": "OutboxTests",
    }
    monkeypatch.setattr(cancellations_handler.function, "_env", environment)
    monkeypatch.setattr(cancellations_handler.function, "_consumer", None)
    cancel = sqs_record(json.dumps(eventbridge_event(json.loads(cancelled("o-8", 3).envelope_json()))))
    broken = json.loads(cancelled("o-9", 2).envelope_json())
    del broken["payload"]["previous_status"]
    malformed_payload = sqs_record(json.dumps(eventbridge_event(broken)))
    # When a batch brings OrderCancelled at seq 3 (seqs 1 and 2 never sent to it), the same again, and one
    # whose payload breaks its schema
    response = cancellations_handler.handler(
        {"Records": [cancel, sqs_record(cancel["body"]), malformed_payload]}, FakeLambdaContext()
    )
    # Then nothing is reported: the cancel applied once, the broken one went to the dead-letter queue
    assert failures(response) == []
    item = consumer.dynamodb.get_item(TableName=consumer.table, Key={"pk": {"S": "cancellation#o-8"}})["Item"]
    assert item["seq"] == {"N": "3"}
    [letter] = consumer.dead_letters()
    assert letter["MessageAttributes"]["inbox_reason"]["StringValue"] == (
        "malformed payload: payload field previous_status is not a str"
    )


def test_a_strict_consumer_refuses_events_given_by_eventbridge_directly(consumer: Consumer) -> None:
    # Given a strict consumer (it must be able to hand an early event back, which a direct invocation cannot)
    inbox_consumer = consumer.build()
    # When EventBridge invokes it with an event
    # Then it fails loudly as misconfigured, instead of losing gaps to Lambda's two asynchronous retries
    with pytest.raises(ConfigurationError, match="must read from an SQS queue"):
        inbox_consumer.consume_eventbridge_event(
            eventbridge_event(json.loads(cancelled("o-1", 3).envelope_json()))
        )


def test_a_latest_consumer_invoked_by_eventbridge_directly_applies_and_dead_letters_malformed_events(
    consumer: Consumer, monkeypatch: Any
) -> None:
    # Given the EventBridge entry point of a latest-mode cancellations consumer
    function = EventBridgeConsumerFunction(
        "cancellations",
        lambda config: CancellationLedger(config.inbox.table_name),
        env={
            "INBOX_TABLE_NAME": consumer.table,
            "INBOX_CONSUMER": "cancellations",
            "INBOX_ORDERING": "latest",
            "INBOX_DEAD_LETTER_QUEUE_URL": consumer.dead_letter_url,
            "POWERTOOLS_METRICS_NAMESPACE": "OutboxTests",
        },
    )
    envelope = json.loads(cancelled("o-3", 3).envelope_json())
    # When a rule invokes it with an OrderCancelled, the same again, and something that is no envelope
    outcomes = [
        function.handler(eventbridge_event(envelope), FakeLambdaContext())["outcome"],
        function.handler(eventbridge_event(envelope), FakeLambdaContext())["outcome"],
        function.handler({**eventbridge_event(envelope), "detail": {"seq": 1}}, FakeLambdaContext())[
            "outcome"
        ],
    ]
    # Then the cancel applied once and the malformed event is in the dead-letter queue with its reason
    assert outcomes == ["applied", "duplicate", "dead_lettered"]
    [letter] = consumer.dead_letters()
    assert (
        letter["MessageAttributes"]["inbox_reason"]["StringValue"]
        == "malformed envelope: event_id is not a UUID"
    )


@pytest.mark.parametrize(
    "event",
    [
        {},
        {"Records": []},
        {"Records": None},
        {"Records": {"0": {"messageId": "m-1"}}},
        eventbridge_event(json.loads(cancelled("o-1", 3).envelope_json())),
    ],
    ids=["no-records", "empty", "null", "records-not-a-list", "an-eventbridge-event"],
)
def test_an_event_that_is_no_sqs_batch_fails_the_invocation_instead_of_answering_nothing_failed(
    consumer: Consumer, event: dict[str, Any]
) -> None:
    # Given a consumer fed by an SQS queue, invoked with no batch of records (a bus rule targeting it directly
    # by mistake, say)
    inbox_consumer = consumer.build()
    # When it is handled
    # Then the invocation fails (as Powertools' batch processing did: UnexpectedBatchTypeError), so the event
    # is retried and reaches the function's on-failure destination instead of being acknowledged unapplied
    with pytest.raises(InvalidSqsEventError, match="no Records"):
        handle_sqs_batch(event, inbox_consumer, FakeLambdaContext())


def test_a_gap_is_handed_back_without_being_logged_as_a_failure(
    consumer: Consumer, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a strict consumer and a message whose predecessor was never applied
    inbox_consumer = consumer.build()
    gap = sqs_record(order_events("o-1")[1].envelope_json())
    # When its batch is handled
    with caplog.at_level(logging.WARNING, logger="outbox_inbox"):
        response = handle_sqs_batch({"Records": [gap]}, inbox_consumer, FakeLambdaContext())
    # Then it is handed back, not also warned about as a failure (the consumer logs and counts gaps itself)
    assert failures(response) == [gap["messageId"]]
    assert not [r for r in caplog.records if r.getMessage() == "inbox message failed; handed back"]


@pytest.mark.parametrize("remaining_ms", [None, MIN_TIME_PER_RECORD_MS], ids=["no-context", "just-enough"])
def test_records_are_started_without_a_context_or_with_just_enough_time_left(
    consumer: Consumer, remaining_ms: int | None
) -> None:
    # Given a batch, and no Lambda context (a test or a script) or one with exactly a record's time left
    inbox_consumer = consumer.build()
    records = [sqs_record(event.envelope_json()) for event in order_events()[:3]]
    context = None if remaining_ms is None else FakeLambdaContext(remaining_ms=remaining_ms)
    # When the batch is handled / Then every record is applied
    assert failures(handle_sqs_batch({"Records": records}, inbox_consumer, context)) == []
