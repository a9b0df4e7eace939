"""Bad messages at the inbox consumers' Lambda handlers (the sample's order summary, strict, and cancellations
ledger, latest), in SQS events as Lambda delivers them: bodies that are no envelope, envelopes with fields
missing, of the wrong type or extra, payloads that break their event type's schema, in every wrapper a
consumer receives (raw, SNS notification, EventBridge event), and records with odd attributes.

Each message is applied (or acknowledged: a duplicate, a stale event), dead-lettered with its reason, or
handed back by a typed error (a gap waiting for its predecessor); never an untyped exception. Nothing partial:
an event's effect is written exactly with its inbox records, and a message not applied writes nothing. No
payload value or key name shows in the logs, the metrics or a dead letter's reason.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from hypothesis import given
from hypothesis import strategies as st

from order_consumers import cancellations_handler, summary_handler
from outbox.aws import invocation_client
from outbox.errors import OutboxError
from outbox_inbox import config as inbox_config
from outbox_inbox.adapters import REASON_ATTRIBUTE, SOURCE_MESSAGE_ATTRIBUTE
from outbox_inbox.function import SqsConsumerFunction
from outbox_local.queues import receive_all
from tests.hardening.checks import TableState, captured, judge, key_of, leaks_in, marker, restore
from tests.hardening.profiles import examples
from tests.hardening.strategies import (
    hostile_text,
    json_text,
    json_values,
    mutated,
    raw_json_texts,
    unmarked_json_values,
    unmarked_text,
)
from tests.hardening.tally import Outcome, Source
from tests.support.aws import REGION
from tests.support.inbox import (
    FIFO_QUEUE_ARN,
    cancelled,
    create_inbox_table,
    eventbridge_event,
    order_events,
    sns_notification,
    sqs_record,
)
from tests.support.lambda_context import FakeLambdaContext

CATEGORY = "consumer-messages"
INBOX_KEY = ("pk",)


def _typed_error_names() -> frozenset[str]:
    """Every error type of the library's own hierarchy: what a handed-back message may be handed back for."""
    names, pending = set(), [OutboxError]
    while pending:
        kind = pending.pop()
        names.add(kind.__name__)
        pending.extend(kind.__subclasses__())
    return frozenset(names)


@dataclass
class Consumers:
    """Both sample consumers, as deployed, on one moto inbox table and dead-letter queue."""

    dynamodb: Any
    sqs: Any
    table: str
    dead_letter_url: str
    functions: dict[str, SqsConsumerFunction]
    baseline: TableState


@pytest.fixture(scope="module")
def consumers(dynamodb: Any) -> Iterator[Consumers]:
    sqs = boto3.client("sqs", region_name=REGION)
    table = create_inbox_table(dynamodb, "consumers")
    dead_letter_url = sqs.create_queue(QueueName="consumers-dlq")["QueueUrl"]
    functions = {
        "order-summary": summary_handler.function,
        "order-cancellations": cancellations_handler.function,
    }
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(inbox_config.TABLE_NAME, table)
        patch.setenv(inbox_config.DEAD_LETTER_QUEUE_URL, dead_letter_url)
        for function in functions.values():
            patch.setattr(function, "_consumer", None)  # built on first use, from this environment
        invocation_client.cache_clear()  # clients of an earlier moto world would not reach this one
        yield Consumers(
            dynamodb, sqs, table, dead_letter_url, functions, TableState.read(dynamodb, table, INBOX_KEY)
        )
    invocation_client.cache_clear()


def consume(consumers: Consumers, name: str, records: list[dict[str, Any]], *, source: Source) -> None:
    """Hands the records to the consumer's handler as one SQS event; judges each record's fate, the table,
    the dead letters and the log; puts the table and the queue back."""
    function = consumers.functions[name]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(inbox_config.CONSUMER, name)
        patch.setenv(inbox_config.ORDERING, "strict" if name == "order-summary" else "latest")
        with captured() as output:
            response = function.handler({"Records": records}, FakeLambdaContext())
    after = TableState.read(consumers.dynamodb, consumers.table, INBOX_KEY)
    letters = receive_all(consumers.sqs, consumers.dead_letter_url, MessageAttributeNames=["All"])
    try:
        handed_back = {item["itemIdentifier"] for item in response["batchItemFailures"]}
        reasons = {
            letter["MessageAttributes"][SOURCE_MESSAGE_ATTRIBUTE]["StringValue"]: letter["MessageAttributes"][
                REASON_ATTRIBUTE
            ]["StringValue"]
            for letter in letters
            if SOURCE_MESSAGE_ATTRIBUTE in letter.get("MessageAttributes", {})
        }
        failures = {
            str(extras.get("message_id")): str(extras.get("error"))
            for message, extras in output.events
            if message == "inbox message failed; handed back"
        }
        for failed, error in failures.items():
            assert error in _typed_error_names(), f"message {failed} handed back for an untyped {error}"
        for record in records:
            message_id = record.get("messageId")
            if message_id in handed_back:
                outcome = Outcome.REJECTED
            elif message_id in reasons:
                outcome = Outcome.POISONED
                assert reasons[message_id], "dead-lettered without a reason"
            else:
                outcome = Outcome.ACCEPTED
            judge(
                CATEGORY,
                outcome,
                source=source,
                partial_writes=partial_writes(name, consumers.baseline, after),
                leaks=leaks_in({**output.places, **{f"reason of {k}": v for k, v in reasons.items()}}),
            )
    finally:
        restore(consumers.dynamodb, consumers.baseline, after)


def partial_writes(consumer: str, before: TableState, after: TableState) -> list[str]:
    """An effect (a read-model item) changes only with the event recorded as processed; a processed event
    moves its aggregate's record along with it; and nothing else is written."""
    changed = before.changed_keys(after)
    processed = [key for key in changed if f'"{consumer}#event#' in key and key in after.items]
    expected = {key for key in changed if key in processed}
    for key in processed:
        aggregate_key = after.items[key]["aggregate_key"]["S"]
        expected.add(key_of({"pk": {"S": f"{consumer}#aggregate#{aggregate_key}"}}, INBOX_KEY))
    effects = {key for key in changed if '"order#' in key or '"cancellation#' in key}
    problems = [f"{key} changed" for key in sorted(changed - expected - effects)]
    problems += [f"{key}: processed, its aggregate record not moved" for key in sorted(expected - changed)]
    if len(effects) > len(processed):
        problems.append(f"effects {sorted(effects)} written for {len(processed)} processed event(s)")
    return problems


# --- Listed ---------------------------------------------------------------------------------------------

placed, confirmed = order_events("o-listed")[:2]
PLACED = placed.envelope()


def _body(**changes: Any) -> str:
    return json.dumps(PLACED | changes)


LISTED_BODIES: list[tuple[str, str]] = [
    ("not-json", f"{{not json {marker(1)}"),
    ("empty", ""),
    ("json-array", json.dumps([PLACED])),
    ("json-string", json.dumps(marker(2))),
    ("event-id-missing", json.dumps({k: v for k, v in PLACED.items() if k != "event_id"})),
    ("event-id-not-uuid", _body(event_id="not-a-uuid")),
    ("seq-zero", _body(seq=0)),
    ("seq-1.5", _body(seq=1.5)),
    ("seq-string", _body(seq="1")),
    ("seq-1e400", _body()[:-1] + ', "seq": 1e400}'),
    (
        "seq-5000-digits",
        json.dumps({k: v for k, v in PLACED.items() if k != "seq"})[:-1] + ', "seq": ' + "9" * 5000 + "}",
    ),
    ("seq-bool", _body(seq=True)),
    ("seq-39-digits", _body(seq=10**38)),
    ("schema-version-negative", _body(schema_version=-1)),
    ("aggregate-id-empty", _body(aggregate_id="")),
    ("payload-not-object", _body(payload=[marker(3)])),
    ("payload-missing-field", _body(payload={"order_id": "o-listed", marker(4): marker(5)})),
    ("payload-wrong-type", _body(payload=PLACED["payload"] | {"lines": marker(6)})),
    ("payload-quantity-string", _body(payload=PLACED["payload"] | {"lines": [{"quantity": marker(7)}]})),
    ("payload-1e400", _body()[:-2] + f', "{marker(8)}": 1e400}}}}'),
    ("payload-lone-surrogate", _body()[:-2] + f', "\\ud800{marker(9)}": "\\udfff"}}}}'),
    ("payload-duplicate-key", _body()[:-2] + f', "customer_id": "{marker(10)}"}}}}'),
    ("sns-message-not-json", sns_notification(f"{{{marker(11)}")),
    ("sns-message-not-text", json.dumps(json.loads(sns_notification("{}")) | {"Message": {marker(12): 1}})),
    ("eventbridge-detail-not-object", json.dumps(eventbridge_event(PLACED) | {"detail": marker(13)})),
    ("correlation-id-number", _body(correlation_id=5)),
    ("unknown-fields", _body(**{marker(14): marker(15)})),
    ("deep-nesting", _body()[:-2] + ', "deep": ' + "[" * 5000 + "]" * 5000 + "}}"),
    ("marker-customer-applied", _body(payload=PLACED["payload"] | {"customer_id": marker(16)})),
]


@pytest.mark.parametrize("body", [b for _, b in LISTED_BODIES], ids=[i for i, _ in LISTED_BODIES])
@pytest.mark.parametrize("consumer", ["order-summary", "order-cancellations"])
def test_listed_bodies_are_applied_dead_lettered_or_handed_back(
    consumers: Consumers, consumer: str, body: str
) -> None:
    # Given / When a listed message body reaches the consumer / Then its fate, nothing partial, nothing logged
    consume(consumers, consumer, [sqs_record(body)], source=Source.LISTED)


def _record(**changes: Any) -> dict[str, Any]:
    record = sqs_record(json.dumps(cancelled("o-listed", 3).envelope()))
    for name, value in changes.items():
        if value is None:
            record.pop(name, None)
        else:
            record[name] = value
    return record


LISTED_RECORDS: list[tuple[str, list[dict[str, Any]]]] = [
    ("no-body", [_record(body=None)]),
    ("body-not-text", [_record(body={marker(17): 1})]),
    ("no-message-id", [_record(messageId=None)]),
    ("no-attributes", [_record(attributes=None)]),
    ("attributes-not-a-map", [_record(attributes=1)]),
    ("odd-first-receive", [_record(attributes={"ApproximateFirstReceiveTimestamp": marker(18)})]),
    ("event-source-unknown", [_record(eventSource="aws:kinesis")]),
    ("fifo-no-group", [_record(eventSourceARN=FIFO_QUEUE_ARN)]),
    ("same-message-twice", [sqs_record(_body(), message_id="m-1"), sqs_record(_body(), message_id="m-1")]),
    ("seq-2-before-1", [sqs_record(confirmed.envelope_json()), sqs_record(placed.envelope_json())]),
    ("waiting-for-a-gap", [sqs_record(confirmed.envelope_json(), first_received=datetime.now(UTC))]),
]


@pytest.mark.parametrize("records", [r for _, r in LISTED_RECORDS], ids=[i for i, _ in LISTED_RECORDS])
@pytest.mark.parametrize("consumer", ["order-summary", "order-cancellations"])
def test_listed_records_are_applied_dead_lettered_or_handed_back(
    consumers: Consumers, consumer: str, records: list[dict[str, Any]]
) -> None:
    # Given / When a listed record reaches the consumer / Then its fate, nothing partial, nothing logged
    consume(consumers, consumer, json.loads(json.dumps(records)), source=Source.LISTED)


# --- Generated ------------------------------------------------------------------------------------------


def _sqs_text(text: str) -> bool:
    """Only what SQS carries (its allowed characters, under its size limit): a consumer never gets more."""
    allowed = all(
        char in "\t\n\r" or " " <= char <= "\ud7ff" or "\ue000" <= char <= "\ufffd" or char >= "\U00010000"
        for char in text
    )
    return allowed and len(text.encode()) <= 256 * 1024


@st.composite
def envelopes(draw: Callable[..., Any]) -> dict[str, Any]:
    """One of an order's events (placed, confirmed, cancelled), its payload and fields changed."""
    order = draw(st.sampled_from(("o-1", "o-2")))
    base = draw(st.sampled_from((*order_events(order)[:2], cancelled(order, 3)))).envelope()
    base["payload"] = draw(st.one_of(st.just(base["payload"]), mutated(base["payload"]), json_values))
    envelope: dict[str, Any] = draw(st.one_of(st.just(base), mutated(base, values=unmarked_json_values)))
    return envelope


bodies = st.one_of(
    envelopes().map(json_text),
    envelopes().map(lambda envelope: sns_notification(json_text(envelope))),
    envelopes().map(lambda envelope: json_text(eventbridge_event(PLACED) | {"detail": envelope})),
    raw_json_texts(),
    hostile_text,
).filter(_sqs_text)


@st.composite
def records(draw: Callable[..., Any]) -> dict[str, Any]:
    received = draw(st.sampled_from((datetime.now(UTC), datetime.now(UTC) - timedelta(hours=1))))
    record = sqs_record(draw(bodies), first_received=received)
    if draw(st.integers(0, 9)) == 0:
        record = sqs_record(
            record["body"], queue_arn=FIFO_QUEUE_ARN, group_id=draw(st.sampled_from(("o-1", "o-2")))
        )
    # The record keeps the shape Lambda gives it (maps where maps go); what is in them varies. Shapes that are
    # no SQS record at all are listed above.
    if draw(st.booleans()):
        record["attributes"] |= draw(
            st.dictionaries(
                st.sampled_from(
                    ("ApproximateFirstReceiveTimestamp", "ApproximateReceiveCount", "MessageGroupId")
                ),
                unmarked_text,
                max_size=2,
            )
        )
    for name in draw(st.lists(st.sampled_from(("md5OfBody", "awsRegion", "receiptHandle")), max_size=1)):
        record[name] = draw(unmarked_text)
    return record


@examples(2)
@given(
    consumer=st.sampled_from(("order-summary", "order-cancellations")),
    batch=st.lists(records(), min_size=1, max_size=3),
)
def test_generated_messages_are_applied_dead_lettered_or_handed_back(
    consumers: Consumers, consumer: str, batch: list[dict[str, Any]]
) -> None:
    # Given / When a generated batch reaches the consumer / Then each message's fate, nothing partial, no leak
    consume(consumers, consumer, batch, source=Source.GENERATED)
