"""What a consumer does around each event it handles, so the event's trace is followed from the request that
saved it (docs/inbox.md, "Tracing"): every log line written meanwhile (the inbox's, the effect's) carries
the event's `correlation_id` and `trace_id`, and, when tracing is on, the work is an X-Ray subsegment
annotated with that trace id.

Why an annotation and not a link: a Lambda consumer's segment is the one Lambda opened for the invocation,
which may hold several events of several requests; X-Ray's Python SDK can neither move it to another trace nor
add links to it (X-Ray links SQS -> Lambda traces itself, from the message's `AWSTraceHeader`, which names
whoever sent the message: the publisher, on the SNS path). An annotation is indexed: the filter expression
`annotation.trace_id = "1-…"` finds every consumer's work for a request.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from outbox_inbox.envelope import Envelope

EventScope = Callable[[Envelope], AbstractContextManager[None]]
TRACE_ID_KEY = "trace_id"
"""The log key and X-Ray annotation of the request's trace id (an X-Ray root `1-…`, else the W3C trace id).
Powertools' own `xray_trace_id` is the consumer invocation's."""


def log_keys(envelope: Envelope) -> dict[str, str]:
    """The keys every log line of the event carries: those it has."""
    keys = {}
    if envelope.correlation_id is not None:
        keys["correlation_id"] = envelope.correlation_id
    trace_id = envelope.trace.trace_id
    if trace_id is not None:
        keys[TRACE_ID_KEY] = trace_id
    return keys


def powertools_scope(logger: Any, tracer: Any = None) -> EventScope:
    """For a Powertools `Logger` (its keys reach the loggers it configured: the inbox's) and, when given, a
    Powertools `Tracer` (a disabled one records nothing)."""

    @contextmanager
    def scope(envelope: Envelope) -> Iterator[None]:
        keys = log_keys(envelope)
        with logger.append_context_keys(**keys):
            if tracer is None:
                yield
                return
            with tracer.provider.in_subsegment(f"## inbox {envelope.event_type}") as subsegment:
                if TRACE_ID_KEY in keys:
                    subsegment.put_annotation(TRACE_ID_KEY, keys[TRACE_ID_KEY])
                subsegment.put_annotation("event_id", envelope.event_id)
                yield

    return scope
