"""What every outbox event holds, field by field (docs/contracts.md, "Outbox row"): the rules `OutboxEvent`
applies on write and the publishing paths apply to every row they read; the first one broken names its
field."""

from __future__ import annotations

import re
import uuid
from typing import TYPE_CHECKING

from outbox.clock import parse_timestamp
from outbox.trace_context import TraceContext

if TYPE_CHECKING:
    from outbox.model import OutboxEvent

_AGGREGATE_TYPE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")
_EVENT_TYPE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,127}$")
_MAX_ID_LENGTH = 256
REGION_NAME = re.compile(r"[a-z]{2}(-[a-z]+)+-[0-9]{1,2}")
"""An AWS region's name (`us-east-1`, `us-gov-west-1`): what `origin` holds, and every region setting."""
_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def broken_rule(event: OutboxEvent) -> tuple[str, str] | None:  # noqa: PLR0911 - a return per rule, in order
    """The first rule of what every event holds that `event` breaks, as (field, message); None if it breaks
    none. Checked in this order, so the first rule broken names the field, with constant messages, so the
    checks cost no formatting while they pass. Text fields are checked to be text first: a list or a number
    would pass a length check, or make a pattern raise TypeError, and then fail when the envelope is written.
    Plain checks in one function, not a table of one callable per rule: this runs for every row the publisher
    reads, and a call per rule cost about a twentieth of reading a row. The last rule, that a PENDING row has
    no TTL, is the model's own (it knows the statuses)."""
    if not (isinstance(event.aggregate_type, str) and _AGGREGATE_TYPE.fullmatch(event.aggregate_type)):
        return "aggregate_type", "aggregate_type must be 1-64 letters, digits, '_', '.', '-' (no '#')"
    if not (isinstance(event.aggregate_id, str) and 0 < len(event.aggregate_id) <= _MAX_ID_LENGTH):
        return "aggregate_id", _AGGREGATE_ID_RULE
    if not (_is_int(event.seq) and event.seq >= 1):
        return "seq", "seq must be an integer >= 1"
    if not (isinstance(event.event_type, str) and _EVENT_TYPE.fullmatch(event.event_type)):
        return "event_type", "event_type must be 1-128 letters, digits, '_', '.', '-'"
    if not (_is_int(event.schema_version) and event.schema_version >= 1):
        return "schema_version", "schema_version must be an integer >= 1"
    if not _is_uuid(event.event_id):
        return "event_id", "event_id must be a UUID"
    if not _is_timestamp(event.occurred_at):
        return "occurred_at", "occurred_at must be ISO-8601 UTC like 2026-11-29T12:00:00.123Z"
    correlation_id = event.correlation_id
    if correlation_id is not None and not (
        isinstance(correlation_id, str) and 0 < len(correlation_id) <= _MAX_ID_LENGTH
    ):
        return "correlation_id", _CORRELATION_ID_RULE
    if event.trace and event.trace != TraceContext.of_item(event.trace.attributes()):
        return "trace", "trace must hold a well-formed X-Ray header and W3C traceparent (TraceContext.given)"
    if not (_is_int(event.attempts) and event.attempts >= 0):
        return "attempts", "attempts must be >= 0"
    origin = event.origin
    if origin is not None and not (isinstance(origin, str) and is_region_name(origin)):
        return "origin", "origin must be an AWS region's name like us-east-1"
    return None


def is_region_name(text: str) -> bool:
    """Whether `text` has the shape of an AWS region's name (at most 32 characters)."""
    return len(text) <= _MAX_REGION_LENGTH and REGION_NAME.fullmatch(text) is not None


_MAX_REGION_LENGTH = 32


_AGGREGATE_ID_RULE = f"aggregate_id must be 1-{_MAX_ID_LENGTH} characters"
_CORRELATION_ID_RULE = f"correlation_id must be 1-{_MAX_ID_LENGTH} characters"


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_uuid(value: str) -> bool:
    if isinstance(value, str) and _CANONICAL_UUID.fullmatch(value):
        return True  # the form every writer of this library uses, without building a UUID
    try:
        return str(uuid.UUID(value)) == value.lower()
    except (ValueError, AttributeError, TypeError):
        return False


def _is_timestamp(value: str) -> bool:
    try:
        parse_timestamp(value)
    except (ValueError, TypeError):
        return False
    return True
