"""The consumer's event scope with a tracer: each event is a subsegment annotated with its request's trace id
and its event id (indexed: `annotation.trace_id = "1-…"` finds it), its log keys appended for its duration."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from outbox.trace_context import TraceContext
from outbox_inbox.envelope import envelope_of
from outbox_inbox.event_scope import powertools_scope
from tests.support.events import event
from tests.support.inbox import sqs_record

ROOT = "1-5759e988-bd862e3fe1be46a994272793"


class Recorded:
    """Stands in for Powertools' Logger and Tracer (their public methods the scope calls), recording them."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.provider = self

    @contextmanager
    def append_context_keys(self, **keys: Any) -> Iterator[None]:
        self.calls.append(("keys", keys))
        yield
        self.calls.append(("keys removed", sorted(keys)))

    @contextmanager
    def in_subsegment(self, name: str) -> Iterator[Any]:
        self.calls.append(("subsegment", name))
        yield self
        self.calls.append(("subsegment closed", name))

    def put_annotation(self, key: str, value: Any) -> None:
        self.calls.append(("annotation", (key, value)))


def test_each_event_is_an_annotated_subsegment_within_its_log_keys() -> None:
    traced = replace(event("o-1", 1), correlation_id="req-1", trace=TraceContext.given(f"Root={ROOT}"))
    envelope = envelope_of(sqs_record(traced.envelope_json()))
    logger, tracer = Recorded(), Recorded()
    with powertools_scope(logger, tracer)(envelope):
        tracer.calls.append(("work", None))
    assert logger.calls == [
        ("keys", {"correlation_id": "req-1", "trace_id": ROOT}),
        ("keys removed", ["correlation_id", "trace_id"]),
    ]
    assert tracer.calls == [
        ("subsegment", "## inbox OrderPlaced"),
        ("annotation", ("trace_id", ROOT)),
        ("annotation", ("event_id", traced.event_id)),
        ("work", None),
        ("subsegment closed", "## inbox OrderPlaced"),
    ]
