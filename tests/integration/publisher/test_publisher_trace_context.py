"""Trace context forwarded by the publisher on moto: the row's X-Ray header as each PutEvents entry's
`TraceHeader` (what EventBridge hands its targets), both headers as SNS message attributes, and both in the
envelope on each destination; an event saved without one is published without any."""

from __future__ import annotations

import json
from typing import Any

import pytest

from outbox.model import OutboxEvent
from outbox.trace_context import TraceContext
from tests.integration.publisher.publisher_world import World
from tests.support.events import event

HEADER = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_the_rows_trace_context_reaches_both_destinations_and_the_envelope(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an event saved by a writer in a traced invocation (X-Ray header and a caller's traceparent) and
    # another saved without trace context; and the PutEvents requests as they go on the wire
    sent: list[dict[str, Any]] = []
    world.events.meta.events.register(
        "before-send.events.PutEvents", lambda request, **_: sent.append(json.loads(request.body))
    )
    traced = OutboxEvent.new(
        aggregate_type="Order",
        aggregate_id="A",
        seq=1,
        event_type="OrderPlaced",
        payload={"n": 1},
        trace=TraceContext.given(HEADER, TRACEPARENT),
    )
    monkeypatch.delenv("_X_AMZN_TRACE_ID", raising=False)
    untraced = event("B", 1)
    world.write(traced, untraced)

    # When the publisher handles the stream batch
    assert world.invoke(world.publisher(), world.stream_event()) == {"batchItemFailures": []}

    # Then the PutEvents entry of the traced event carries its header as TraceHeader, the other none
    entries = {json.loads(entry["Detail"])["event_id"]: entry for call in sent for entry in call["Entries"]}
    assert entries[traced.event_id]["TraceHeader"] == HEADER
    assert "TraceHeader" not in entries[untraced.event_id]
    # And the topic's subscriber gets both headers as message attributes and in the envelope
    topic = {json.loads(message["Body"])["event_id"]: message for message in world.drain(world.topic_queue)}
    attributes = {
        name: value["StringValue"] for name, value in topic[traced.event_id]["MessageAttributes"].items()
    }
    assert attributes["trace_header"] == HEADER
    assert attributes["traceparent"] == TRACEPARENT
    assert json.loads(topic[traced.event_id]["Body"])["trace_header"] == HEADER
    assert not {"trace_header", "traceparent"} & set(topic[untraced.event_id]["MessageAttributes"])
    assert "trace_header" not in json.loads(topic[untraced.event_id]["Body"])
    # And the bus rule's queue gets them in the envelope (`detail`)
    bus = {envelope["event_id"]: envelope for envelope in world.bus_envelopes()}
    assert (bus[traced.event_id]["trace_header"], bus[traced.event_id]["traceparent"]) == (
        HEADER,
        TRACEPARENT,
    )
    assert "traceparent" not in bus[untraced.event_id]
