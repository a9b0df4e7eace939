"""One event's trace in the local runtime, request -> row -> publish -> consumer: what `outbox trace EVENT_ID`
prints (docs/local.md, "Following one event's trace"), so the link is visible without AWS.

The runtime gives every invocation its own X-Ray header (`_X_AMZN_TRACE_ID`, as Lambda does), and hands each
invocation it hosted to this journal (`FunctionHost`'s `on_invocation`). From the event's shape it keeps:
- an HTTP API request: its method, path and status, under its trace id (what a row saved by it carries);
- a stream batch (the publisher): each row's image as saved (its trace context and correlation id), and
  whether the publisher handed its record back;
- an SQS batch (a consumer): each message's event, the path it came by (topic or bus), the trace header its
  message attributes carried, whether it was handed back, and the consumer's log lines about the event.
Recent events only (the oldest are forgotten past `max_events`); ids and trace context only, never payloads.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from outbox.model import OutboxEvent
from outbox.trace_context import TraceContext, xray_header
from outbox_local.invocation import Outcome

MAX_EVENTS = 10_000
_LOG_KEYS = ("level", "message", "outcome", "correlation_id", "trace_id", "xray_trace_id")


class TraceJournal:
    def __init__(self, max_events: int = MAX_EVENTS, clock: Callable[[], float] = time.time) -> None:
        self._max_events = max_events
        self._clock = clock
        self._lock = threading.Lock()
        self._requests: OrderedDict[str, dict[str, Any]] = OrderedDict()
        """HTTP API invocations by their trace id."""
        self._events: OrderedDict[str, dict[str, Any]] = OrderedDict()
        """What was seen of each event, by event id."""

    def record(self, function: str, trace_header: str, event: Any, outcome: Outcome) -> None:
        """One hosted invocation (`FunctionHost`'s `on_invocation`)."""
        if not isinstance(event, Mapping):
            return
        at = datetime.fromtimestamp(self._clock(), UTC).isoformat(timespec="milliseconds")
        invocation = {"function": function, "at": at, "trace_id": _trace_id(trace_header)}
        payload = outcome.result.payload
        if isinstance(event.get("requestContext"), Mapping) and "http" in event["requestContext"]:
            http = event["requestContext"]["http"]
            status = payload.get("statusCode") if isinstance(payload, Mapping) else None
            request = invocation | {"method": http.get("method"), "path": http.get("path"), "status": status}
            with self._lock:
                _keep(self._requests, str(invocation["trace_id"]), request, self._max_events)
            return
        records = event.get("Records")
        if not isinstance(records, list):
            return
        handed_back = _handed_back(outcome)
        for record in records:
            if not isinstance(record, Mapping):
                continue
            if record.get("eventSource") == "aws:dynamodb":
                self._stream_record(record, invocation, handed_back)
            elif record.get("eventSource") == "aws:sqs":
                self._sqs_record(record, invocation, handed_back, outcome.output)

    def chain(self, event_id: str) -> dict[str, Any] | None:
        """What was seen of the event, request first; None if nothing was."""
        with self._lock:
            seen = self._events.get(event_id)
            if seen is None:
                return None
            chain: dict[str, Any] = json.loads(json.dumps(seen))  # a copy: the journal goes on changing
            row = chain.get("row")
            trace_id = TraceContext(row.get("trace_header"), row.get("traceparent")).trace_id if row else None
            request = self._requests.get(trace_id) if trace_id else None
        chain["trace_id"] = trace_id
        chain["request"] = request
        return chain

    def _stream_record(
        self, record: Mapping[str, Any], invocation: dict[str, Any], handed_back: set[str]
    ) -> None:
        change = record.get("dynamodb")
        image = change.get("NewImage") if isinstance(change, Mapping) else None
        if not isinstance(image, Mapping) or record.get("eventName") != "INSERT":
            return
        try:
            event = OutboxEvent.from_item(image)
        except Exception:  # a poison row: the publisher reports it; there is no event to follow
            return
        sequence_number = str(change.get("SequenceNumber", "")) if isinstance(change, Mapping) else ""
        publish = invocation | {"handed_back": sequence_number in handed_back}
        with self._lock:
            seen = self._seen(event.event_id)
            seen.setdefault(
                "row",
                {
                    "event_type": event.event_type,
                    "aggregate_key": event.aggregate_key,
                    "seq": event.seq,
                    "correlation_id": event.correlation_id,
                }
                | event.trace.envelope_fields(),
            )
            seen["publish"].append(publish)

    def _sqs_record(
        self, record: Mapping[str, Any], invocation: dict[str, Any], handed_back: set[str], output: str
    ) -> None:
        body = _document(record.get("body"))
        via, envelope = _envelope(body)
        event_id = envelope.get("event_id") if envelope is not None else None
        if not isinstance(event_id, str):
            return
        attributes = record.get("messageAttributes")
        carried = attributes.get("trace_header") if isinstance(attributes, Mapping) else None
        header = carried.get("stringValue") if isinstance(carried, Mapping) else None
        system = record.get("attributes")
        delivery = invocation | {
            "queue": str(record.get("eventSourceARN", "")).rpartition(":")[2],
            "via": via,
            "message_trace_header": header,
            "aws_trace_header": system.get("AWSTraceHeader") if isinstance(system, Mapping) else None,
            "handed_back": str(record.get("messageId")) in handed_back,
            "log": _log_lines(output, event_id),
        }
        with self._lock:
            self._seen(event_id)["consumers"].append(delivery)

    def _seen(self, event_id: str) -> dict[str, Any]:
        seen = self._events.get(event_id)
        if seen is None:
            seen = {"event_id": event_id, "publish": [], "consumers": []}
            _keep(self._events, event_id, seen, self._max_events)
        return seen


def _keep(entries: OrderedDict[str, dict[str, Any]], key: str, value: dict[str, Any], most: int) -> None:
    entries[key] = value
    while len(entries) > most:
        entries.popitem(last=False)


def _trace_id(trace_header: str) -> str | None:
    header = xray_header(trace_header)
    return TraceContext(header).trace_id if header else None


def _handed_back(outcome: Outcome) -> set[str]:
    """The records the invocation gave back: all of them if it failed (shown as one marker)."""
    payload = outcome.result.payload
    if outcome.result.failed:
        return _ALL
    failures = payload.get("batchItemFailures") if isinstance(payload, Mapping) else None
    if not isinstance(failures, list):
        return set()
    return {str(item.get("itemIdentifier")) for item in failures if isinstance(item, Mapping)}


class _Everything(set[str]):
    def __contains__(self, _item: object) -> bool:
        return True


_ALL = _Everything()


def _envelope(body: object) -> tuple[str, Mapping[str, Any] | None]:
    """The path a message came by, and the envelope it holds (the shapes `outbox_inbox.envelope` reads)."""
    if not isinstance(body, Mapping):
        return "unknown", None
    if body.get("Type") == "Notification":
        message = _document(body.get("Message"))
        return "SNS topic", message if isinstance(message, Mapping) else None
    if "detail-type" in body:
        detail = body.get("detail")
        return "EventBridge bus", detail if isinstance(detail, Mapping) else None
    return "SNS topic (raw delivery)", body


def _document(text: object) -> object:
    try:
        return json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None


def _log_lines(output: str, event_id: str) -> list[dict[str, Any]]:
    """The consumer's JSON log lines about the event (Powertools' format), their ids and trace keys only."""
    lines = []
    for text in output.splitlines():
        if not text.startswith("{") or event_id not in text:
            continue
        try:
            line = json.loads(text)
        except ValueError:
            continue
        if isinstance(line, dict) and line.get("event_id") == event_id:
            lines.append({key: line[key] for key in _LOG_KEYS if key in line})
    return lines
