"""The trace context an event carries from the request that saved it to its consumers (docs/contracts.md,
"Outbox row" and "Published envelope"; docs/publisher.md, "Tracing").

Two optional row attributes, beside `correlation_id`:
- `trace_header`: the AWS X-Ray header active when the row was saved, as `Root=…;Parent=…;Sampled=…` (the
  Lambda runtime sets it per invocation in `_X_AMZN_TRACE_ID`). Only those three fields are kept: `Lineage`
  is Lambda's recursion counter for the invocation that saved the row, not something to hand downstream.
- `traceparent`: the W3C Trace Context header (`00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`),
  where one is active: an OpenTelemetry span the process already runs, or one a caller passes.

Capturing costs no import: OpenTelemetry is asked only when the process has already loaded its API.
Trace context is advisory: a value that is not well formed is never stored by the writer (a typed error)
and, read from another writer's row, is left out of what is published rather than making the event poison
(as X-Ray itself drops a header it cannot validate and still delivers the event).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Mapping
from typing import Any, NamedTuple

from outbox.errors import InvalidEventError

TRACE_HEADER = "trace_header"
TRACEPARENT = "traceparent"
LAMBDA_TRACE_VARIABLE = "_X_AMZN_TRACE_ID"
"""Where the Lambda runtime puts the invocation's X-Ray header (set anew for every invocation)."""

_ROOT = re.compile(r"1-[0-9a-f]{8}-[0-9a-f]{24}")
_PARENT = re.compile(r"[0-9a-f]{16}")
_SAMPLED = frozenset({"0", "1", "?"})
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
_MAX_HEADER = 256
"""Longer than any header of the three fields kept (about 80 characters): a bound on what is parsed."""


class TraceContext(NamedTuple):
    """The trace context of one event (each part None when there is none)."""

    trace_header: str | None = None
    traceparent: str | None = None

    @property
    def trace_id(self) -> str | None:
        """The trace's id: the X-Ray root (`1-…-…`), else the W3C trace id (32 hex digits)."""
        if self.trace_header is not None:
            return self.trace_header.split(";", 1)[0].removeprefix("Root=")
        if self.traceparent is not None:
            return self.traceparent[3:35]
        return None

    def __bool__(self) -> bool:
        return self.trace_header is not None or self.traceparent is not None

    def attributes(self) -> dict[str, dict[str, str]]:
        """The row's attributes (low-level item format), only those present."""
        item: dict[str, dict[str, str]] = {}
        if self.trace_header is not None:
            item[TRACE_HEADER] = {"S": self.trace_header}
        if self.traceparent is not None:
            item[TRACEPARENT] = {"S": self.traceparent}
        return item

    def envelope_fields(self) -> dict[str, str]:
        """The envelope's trace fields, only those present (docs/contracts.md, "Published envelope")."""
        return {name: value for name, value in zip(self._fields, self, strict=True) if value is not None}

    def envelope_json(self) -> str:
        """The same fields as JSON members, each followed by a comma (spliced into the envelope's text)."""
        return "".join(
            f"{json.dumps(name)}:{json.dumps(value)}," for name, value in self.envelope_fields().items()
        )

    @classmethod
    def given(cls, trace_header: str | None = None, traceparent: str | None = None) -> TraceContext:
        """A context passed explicitly: a value that is not well formed is an InvalidEventError naming it."""
        header = None
        if trace_header is not None:
            header = xray_header(trace_header)
            if header is None:
                raise InvalidEventError(
                    "trace_header must be an X-Ray header like Root=1-5759e988-bd862e3fe1be46a994272793;"
                    "Parent=53995c3f42cd8ad8;Sampled=1",
                    field=TRACE_HEADER,
                )
        if traceparent is not None and not is_traceparent(traceparent):
            raise InvalidEventError(
                "traceparent must be a W3C traceparent like 00-<32 hex>-<16 hex>-<2 hex>", field=TRACEPARENT
            )
        return cls(header, traceparent)

    @classmethod
    def of_item(cls, item: Mapping[str, Any]) -> TraceContext:
        """What a row (or a stream image) carries, well-formed parts only (see the module's docstring)."""
        return cls.received(_string(item.get(TRACE_HEADER)), _string(item.get(TRACEPARENT)))

    @classmethod
    def received(cls, trace_header: object, traceparent: object) -> TraceContext:
        """What another party sent (a row, an envelope), well-formed parts only: the others are left out."""
        header = xray_header(trace_header) if isinstance(trace_header, str) else None
        return cls(
            header, traceparent if isinstance(traceparent, str) and is_traceparent(traceparent) else None
        )


NO_TRACE = TraceContext()


def xray_header(text: str) -> str | None:
    """`Root=…;Parent=…;Sampled=…` of an X-Ray header (in that order, each present one), or None when it has
    no valid Root or a field kept is malformed."""
    if not isinstance(text, str) or len(text) > _MAX_HEADER:
        return None
    fields: dict[str, str] = {}
    for part in text.split(";"):
        name, _, value = part.strip().partition("=")
        fields.setdefault(name, value)
    root, parent, sampled = fields.get("Root"), fields.get("Parent"), fields.get("Sampled")
    if root is None or not _ROOT.fullmatch(root):
        return None
    if parent is not None and not _PARENT.fullmatch(parent):
        return None
    if sampled is not None and sampled not in _SAMPLED:
        return None
    header = f"Root={root}"
    if parent is not None:
        header += f";Parent={parent}"
    if sampled is not None:
        header += f";Sampled={sampled}"
    return header


def is_traceparent(text: str) -> bool:
    """A W3C traceparent of version 00 (or a later one, read as 00 reads it), ids not all zeros."""
    match = _TRACEPARENT.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        return False
    version, trace_id, parent_id, _flags = match.groups()
    return version != "ff" and trace_id != "0" * 32 and parent_id != "0" * 16


def active_trace_context(environ: Mapping[str, str] = os.environ) -> TraceContext:
    """The context active now: the Lambda invocation's X-Ray header, and the current OpenTelemetry span's
    traceparent when the process runs OpenTelemetry (its API already imported: never imported here)."""
    variable = environ.get(LAMBDA_TRACE_VARIABLE)
    return TraceContext(xray_header(variable) if variable else None, _opentelemetry_traceparent())


def _opentelemetry_traceparent() -> str | None:
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None
    try:
        context = trace.get_current_span().get_span_context()
        if not context.is_valid:
            return None
        return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"
    except Exception:  # tracing never fails a write: without its context the event is still saved
        return None


def _string(value: object) -> str | None:
    if isinstance(value, Mapping) and isinstance(value.get("S"), str):
        return str(value["S"])
    return None
