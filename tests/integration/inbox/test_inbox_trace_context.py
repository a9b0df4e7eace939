"""A consumer function follows each event's trace (outbox_inbox.event_scope): every log line written while an
event is handled, the inbox's and the effect's, carries the event's correlation_id and the trace id of the
request that saved it; the next event's lines carry its own, or none."""

from __future__ import annotations

import contextlib
import io
import json
from dataclasses import replace
from typing import Any

import pytest

from outbox.trace_context import TraceContext
from outbox.transaction import Transaction
from outbox_inbox import config as inbox_config
from outbox_inbox.envelope import Envelope, envelope_of
from outbox_inbox.event_scope import log_keys
from outbox_inbox.function import SqsConsumerFunction
from outbox_inbox.inbox import Effect
from tests.support.events import event
from tests.support.inbox import Consumer, sqs_record
from tests.support.lambda_context import FakeLambdaContext

ROOT = "1-5759e988-bd862e3fe1be46a994272793"
HEADER = f"Root={ROOT};Parent=53995c3f42cd8ad8;Sampled=1"


def test_every_log_line_of_an_event_carries_its_correlation_id_and_trace_id(
    consumer: Consumer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a consumer function whose effect logs a line of its own for each event
    monkeypatch.setenv(inbox_config.TABLE_NAME, consumer.table)
    monkeypatch.setenv(inbox_config.DEAD_LETTER_QUEUE_URL, consumer.dead_letter_url)
    monkeypatch.setenv(inbox_config.CONSUMER, "traced")
    monkeypatch.setenv(inbox_config.ORDERING, "unordered")
    stdout = io.StringIO()

    def effect_for(_config: Any) -> Effect:
        def effect(_envelope: Envelope, _transaction: Transaction) -> None:
            consumer_function.logger.info("effect applied")

        return effect

    with contextlib.redirect_stdout(stdout):  # Powertools' handler writes to the stdout it was built with
        consumer_function = SqsConsumerFunction("trace-test", effect_for)
    # and two events: one saved in a traced request with a correlation id, one saved without either
    traced = replace(event("o-1", 1), correlation_id="req-1", trace=TraceContext.given(HEADER))
    untraced = event("o-2", 1)
    records = [sqs_record(traced.envelope_json()), sqs_record(untraced.envelope_json())]

    # When the function handles them as one SQS batch
    assert consumer_function.handler({"Records": records}, FakeLambdaContext()) == {"batchItemFailures": []}

    # Then each line written for the traced event (the effect's and the inbox's) carries its keys
    lines = [json.loads(line) for line in stdout.getvalue().splitlines() if line.startswith("{")]
    assert [line["message"] for line in lines] == ["effect applied", "inbox applied"] * 2
    first, second = lines[:2], lines[2:]
    assert all((line["trace_id"], line["correlation_id"]) == (ROOT, "req-1") for line in first)
    # And the next event's lines carry neither: the keys were the first event's alone
    assert all("trace_id" not in line and "correlation_id" not in line for line in second)
    assert second[1]["event_id"] == untraced.event_id


def test_the_keys_are_the_trace_id_of_the_x_ray_header_else_of_the_traceparent() -> None:
    traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    envelope = envelope_of(
        sqs_record(replace(event("o-1", 1), trace=TraceContext.given(HEADER, traceparent)).envelope_json())
    )
    assert log_keys(envelope) == {"trace_id": ROOT}
    only_w3c = envelope_of(
        sqs_record(replace(event("o-1", 1), trace=TraceContext.given(None, traceparent)).envelope_json())
    )
    assert log_keys(only_w3c) == {"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"}
    # A malformed header another producer sent is left out, not a malformed message
    document = json.loads(event("o-1", 1).envelope_json()) | {"trace_header": "junk", "traceparent": 7}
    assert envelope_of(sqs_record(json.dumps(document))).trace == TraceContext()
