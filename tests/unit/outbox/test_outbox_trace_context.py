"""Trace context on the row and in the envelope (outbox.trace_context): captured by the writer from the active
context without an argument, passed explicitly, refused when malformed, dropped when another writer's row
holds a malformed one."""

from __future__ import annotations

import json
import sys
import types
from typing import Any

import pytest

from outbox.errors import InvalidEventError
from outbox.model import OutboxEvent
from outbox.trace_context import NO_TRACE, TraceContext, active_trace_context, xray_header
from outbox.transaction import Transaction
from outbox.writer import OutboxWriter
from tests.support.events import event

ROOT = "1-5759e988-bd862e3fe1be46a994272793"
HEADER = f"Root={ROOT};Parent=53995c3f42cd8ad8;Sampled=1"
LAMBDA_HEADER = f"{HEADER};Lineage=a87bd80c:0"
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def written_item(writer: OutboxWriter, *events: OutboxEvent) -> list[dict[str, Any]]:
    transaction = Transaction()
    writer.append(transaction, *events)
    return [action["Put"]["Item"] for action in transaction.transact_items()]


def test_the_writer_captures_the_lambda_invocations_header_without_an_argument(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a Lambda invocation's header (with Lambda's own Lineage field) and no OpenTelemetry loaded
    monkeypatch.setenv("_X_AMZN_TRACE_ID", LAMBDA_HEADER)
    monkeypatch.delitem(sys.modules, "opentelemetry.trace", raising=False)
    # When two events are appended by a writer built with the table's name alone
    items = written_item(OutboxWriter("outbox"), event("o-1", 1), event("o-1", 2))
    # Then each row holds the header's Root, Parent and Sampled, and no traceparent
    assert [item["trace_header"] for item in items] == [{"S": HEADER}] * 2
    assert all("traceparent" not in item for item in items)
    # And read back, the envelope carries it beside correlation_id
    read = OutboxEvent.from_item(items[0])
    assert read.trace == TraceContext(HEADER, None)
    assert json.loads(read.envelope_json())["trace_header"] == HEADER
    assert read.envelope()["trace_header"] == HEADER


def test_without_an_active_context_the_row_and_envelope_have_no_trace_fields(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("_X_AMZN_TRACE_ID", raising=False)
    monkeypatch.delitem(sys.modules, "opentelemetry.trace", raising=False)
    (item,) = written_item(OutboxWriter("outbox"), event("o-1", 1))
    assert "trace_header" not in item
    assert "traceparent" not in item
    envelope = json.loads(OutboxEvent.from_item(item).envelope_json())
    assert "trace_header" not in envelope
    assert "traceparent" not in envelope


def test_a_current_opentelemetry_span_is_captured_only_when_its_api_is_loaded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a process whose OpenTelemetry API is loaded, with a current span (the API's shape, stood in for:
    # the project does not depend on OpenTelemetry)
    class SpanContext:
        trace_id, span_id, trace_flags, is_valid = (
            0x4BF92F3577B34DA6A3CE929D0E0E4736,
            0x00F067AA0BA902B7,
            1,
            True,
        )

    class Span:
        def get_span_context(self) -> SpanContext:
            return SpanContext()

    api = types.ModuleType("opentelemetry.trace")
    api.get_current_span = Span  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "opentelemetry.trace", api)
    # When the active context is read outside Lambda, then it is the span's traceparent
    assert active_trace_context({}) == TraceContext(None, TRACEPARENT)
    # And an invalid span (none current) gives none
    SpanContext.is_valid = False
    assert active_trace_context({}) == NO_TRACE


def test_a_context_can_be_passed_explicitly_per_writer_or_per_event(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("_X_AMZN_TRACE_ID", HEADER)
    # Given a writer told to take a caller's traceparent (an HTTP request's header, say)
    writer = OutboxWriter("outbox", trace_context=lambda: TraceContext.given(traceparent=TRACEPARENT))
    own = TraceContext.given(trace_header="Root=1-00000001-000000000000000000000001")
    items = written_item(writer, event("o-1", 1), OutboxEvent.new(**_fields(2), trace=own))
    # Then the writer's context goes on events without one, and an event's own context is kept
    assert items[0]["traceparent"] == {"S": TRACEPARENT}
    assert "trace_header" not in items[0]
    assert items[1]["trace_header"] == {"S": "Root=1-00000001-000000000000000000000001"}
    assert "traceparent" not in items[1]
    # And a writer told to save none saves none
    (item,) = written_item(OutboxWriter("outbox", trace_context=lambda: NO_TRACE), event("o-1", 1))
    assert "trace_header" not in item


@pytest.mark.parametrize(
    ("given", "field"),
    [
        ({"trace_header": "Root=1-zz;Sampled=1"}, "trace_header"),
        ({"trace_header": "Parent=53995c3f42cd8ad8"}, "trace_header"),
        ({"trace_header": f"Root={ROOT};Sampled=yes"}, "trace_header"),
        ({"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"}, "traceparent"),
        ({"traceparent": "00-00000000000000000000000000000000-00f067aa0ba902b7-01"}, "traceparent"),
    ],
)
def test_a_malformed_context_is_a_typed_error_and_nothing_is_appended(
    given: dict[str, str], field: str
) -> None:
    with pytest.raises(InvalidEventError) as raised:
        TraceContext.given(**given)
    assert raised.value.field == field
    # A writer whose context is malformed appends nothing
    writer = OutboxWriter("outbox", trace_context=lambda: TraceContext(**given))
    transaction = Transaction()
    with pytest.raises(InvalidEventError):
        writer.append(transaction, event("o-1", 1))
    assert len(transaction) == 0
    # And an event cannot be built holding one
    with pytest.raises(InvalidEventError) as built:
        OutboxEvent.new(**_fields(1), trace=TraceContext(**given))
    assert built.value.field == "trace"


def test_another_writers_malformed_context_is_left_out_not_poison() -> None:
    # Given rows another service wrote, with trace attributes that are not well formed (or not Strings)
    row = event("o-1", 1).to_item()
    for bad in ({"trace_header": {"S": "not a header"}}, {"traceparent": {"N": "1"}}):
        # When the row is read, then the event reads, without trace context, and its envelope has none
        read = OutboxEvent.from_item(row | bad)
        assert read.trace == NO_TRACE
        assert "trace" not in read.envelope_json()


def test_the_header_keeps_root_parent_and_sampled_in_order_and_nothing_else() -> None:
    assert xray_header(f"Sampled=0;Lineage=1:2;Parent=53995c3f42cd8ad8;Root={ROOT}") == (
        f"Root={ROOT};Parent=53995c3f42cd8ad8;Sampled=0"
    )
    assert xray_header(f"Root={ROOT}") == f"Root={ROOT}"
    assert xray_header("Root=" + "1" * 300) is None
    assert TraceContext(HEADER, TRACEPARENT).trace_id == ROOT
    assert TraceContext(None, TRACEPARENT).trace_id == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert NO_TRACE.trace_id is None


def _fields(seq: int) -> dict[str, Any]:
    return {
        "aggregate_type": "Order",
        "aggregate_id": "o-1",
        "seq": seq,
        "event_type": "OrderPlaced",
        "payload": {"n": 1},
    }
