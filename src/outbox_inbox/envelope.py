"""The published envelope as a consumer receives it, in each shape AWS delivers it.

The publisher sends one JSON envelope (docs/contracts.md, "Published envelope"). What reaches a consumer
depends on the path: SQS from SNS with raw delivery (the envelope is the body), SQS from SNS without it (the
body is an SNS notification whose `Message` is the envelope), SQS from an EventBridge rule (the body is an
EventBridge event whose `detail` is the envelope), EventBridge invoking a function (the event itself),
and SQS FIFO (as raw SNS, in message groups). `envelope_of` finds the envelope in any of them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from outbox.limits import MAX_WHOLE_NUMBER
from outbox.model import aggregate_key
from outbox.payload_store import PayloadStore
from outbox.trace_context import TraceContext
from outbox_inbox import claim_checks
from outbox_inbox.errors import MalformedEnvelopeError

_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_STRING_FIELDS = ("event_type", "aggregate_type", "aggregate_id", "occurred_at")


@dataclass(frozen=True, slots=True)
class Envelope:
    """One published event. `payload` numbers are `Decimal` (exact, and what boto3 writes to DynamoDB)."""

    event_id: str
    event_type: str
    schema_version: int
    aggregate_type: str
    aggregate_id: str
    seq: int
    occurred_at: str
    correlation_id: str | None
    payload: Mapping[str, Any]
    # --- Trace context (outbox.trace_context): the request that saved the event; None when not sent (or not
    # well formed: trace context is advisory, it never makes a message malformed).
    trace_header: str | None = None
    traceparent: str | None = None
    # ---

    @property
    def trace(self) -> TraceContext:
        return TraceContext(self.trace_header, self.traceparent)

    @property
    def aggregate_key(self) -> str:
        return aggregate_key(self.aggregate_type, self.aggregate_id)

    @classmethod
    def from_document(cls, document: object) -> Envelope:
        """The envelope a decoded JSON document holds, or MalformedEnvelopeError naming the field."""
        if not isinstance(document, Mapping):
            raise MalformedEnvelopeError("the envelope is not a JSON object")
        event_id = document.get("event_id")
        if not isinstance(event_id, str) or not _UUID.fullmatch(event_id):
            raise MalformedEnvelopeError("event_id is not a UUID")
        texts = {}
        for name in _STRING_FIELDS:
            value = document.get(name)
            if not isinstance(value, str) or not value:
                raise MalformedEnvelopeError(f"{name} is not a non-empty string")
            texts[name] = value
        correlation_id = document.get("correlation_id")
        if correlation_id is not None and not isinstance(correlation_id, str):
            raise MalformedEnvelopeError("correlation_id is neither a string nor null")
        payload = document.get("payload")
        if not isinstance(payload, Mapping):
            raise MalformedEnvelopeError("payload is not a JSON object")
        trace = TraceContext.received(document.get("trace_header"), document.get("traceparent"))
        return cls(
            event_id=event_id,
            schema_version=_whole(document.get("schema_version"), "schema_version"),
            seq=_whole(document.get("seq"), "seq"),
            correlation_id=correlation_id,
            payload=payload,
            trace_header=trace.trace_header,
            traceparent=trace.traceparent,
            **texts,
        )


def envelope_of(message: object, *, payloads: PayloadStore | None = None) -> Envelope:
    """The envelope in an SQS record (any body shape above) or an EventBridge event given to a function. A
    claim check (outbox_inbox.claim_checks) is resolved through `payloads`: one bounded read."""
    if isinstance(message, Mapping) and message.get("eventSource") == "aws:sqs":
        body = message.get("body")
        if not isinstance(body, str):
            raise MalformedEnvelopeError("the SQS record has no text body")
        ref = claim_checks.pointer_in(body)
        if ref is not None:
            # Raw delivery: the event_id message attribute the publisher set names the event.
            attributes = message.get("messageAttributes")
            event_id = _attribute(attributes, "stringValue")
            return Envelope.from_document(claim_checks.resolve(ref, payloads, claim=event_id))
        return _from_body(_decode(body, "the SQS message body"), payloads)
    if isinstance(message, Mapping) and _is_eventbridge_event(message):
        # Lambda's runtime decoded this event before the handler got it, floats as floats.
        return _from_detail(_decimal_floats(message["detail"]), payloads)
    raise MalformedEnvelopeError("neither an SQS record nor an EventBridge event")


def _from_body(document: object, payloads: PayloadStore | None) -> Envelope:
    if isinstance(document, Mapping) and document.get("Type") == "Notification" and "Message" in document:
        message = document["Message"]
        if not isinstance(message, str):
            raise MalformedEnvelopeError("the SNS notification's Message is not text")
        ref = claim_checks.pointer_in(message)
        if ref is not None:
            event_id = _attribute(document.get("MessageAttributes"), "Value")
            return Envelope.from_document(claim_checks.resolve(ref, payloads, claim=event_id))
        return Envelope.from_document(_decode(message, "the SNS notification's Message"))
    if isinstance(document, Mapping) and _is_eventbridge_event(document):
        return _from_detail(document["detail"], payloads)
    return Envelope.from_document(document)


def _from_detail(detail: object, payloads: PayloadStore | None) -> Envelope:
    ref = claim_checks.eventbridge_claim(detail)
    if ref is None:
        return Envelope.from_document(detail)
    claim = detail if isinstance(detail, Mapping) else None
    return Envelope.from_document(claim_checks.resolve(ref, payloads, claim=claim))


def _attribute(attributes: object, value_key: str) -> dict[str, str] | None:
    """The `event_id` message attribute, as SQS (`stringValue`) or an SNS notification (`Value`) spells it."""
    entry = attributes.get("event_id") if isinstance(attributes, Mapping) else None
    value = entry.get(value_key) if isinstance(entry, Mapping) else None
    return {"event_id": value} if isinstance(value, str) else None


def _is_eventbridge_event(document: Mapping[str, Any]) -> bool:
    return "detail-type" in document and "detail" in document and "source" in document


# Built once: `json.loads` with an option builds a new decoder per call (every message).
_DECODER = json.JSONDecoder(parse_float=Decimal)


def _decode(text: str, what: str) -> object:
    try:
        # Decimal keeps every number exactly as published (a float would round 0.1 and large integers).
        return _DECODER.decode(text)
    except (ValueError, RecursionError):
        raise MalformedEnvelopeError(f"{what} is not JSON") from None


def _decimal_floats(value: object) -> object:
    """Floats as the Decimal of their shortest text: the number as published for any that a float holds
    exactly enough to print back (up to 17 significant digits); payloads that need more should send text."""
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, Mapping):
        return {key: _decimal_floats(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_decimal_floats(item) for item in value]
    return value


def _whole(value: object, name: str) -> int:
    # Bounded: the inbox stores it as a DynamoDB number, which refuses more digits.
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_WHOLE_NUMBER:
        raise MalformedEnvelopeError(f"{name} is not a positive whole number")
    return value
