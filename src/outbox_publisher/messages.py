"""What goes on the wire, and how big it is: pure functions shared by the engine, adapters and tests.

The envelope and attributes are the public contract (docs/contracts.md, "Published envelope"). Sizes follow
each service's own rules, measured here because moto does not enforce EventBridge's limit (docs/local.md,
"Where moto differs from AWS") and because a call
over the limit fails as a whole, which would hide which entry was at fault.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from decimal import Decimal
from typing import Any, NamedTuple

from outbox.model import OutboxEvent
from outbox.payload import decode_payload
from outbox.payload_refs import ENVELOPE_HEAD_FIELDS, SIZE_ATTRIBUTE, sns_pointer_message

# Both services cap a batch call at 10 entries.
MAX_ENTRIES_PER_CALL = 10
# SNS PublishBatch: each message and the whole batch (bodies plus attributes) within the topic's
# MaximumMessageSize: 256 KiB by default, 1,024 bytes to 1 MiB when set ("Publishing large messages with
# Amazon SNS"). The publisher is told the topic's size (outbox_publisher.config).
SNS_MAX_MESSAGE_BYTES = 262_144
SNS_MAX_BATCH_BYTES = 262_144
SNS_MIN_CONFIGURABLE_BYTES = 1_024
SNS_MAX_CONFIGURABLE_BYTES = 1_048_576
# EventBridge PutEvents: each entry and the whole request within 256 KB by the API reference, sized per
# "Calculating PutEvents event entry size" (Source, DetailType, Detail in UTF-8, 14 bytes for Time, each
# Resource). Newer material cites 1 MiB: the limit is configurable (outbox_publisher.config); this is the
# default.
EVENTBRIDGE_MAX_ENTRY_BYTES = 262_144
EVENTBRIDGE_MAX_BATCH_BYTES = 262_144
EVENTBRIDGE_MAX_CONFIGURABLE_BYTES = 1_048_576

# EventBridge PutEvents: JSON integers only within the signed 64-bit range ("Amazon EventBridge events",
# "Valid values"); SNS takes any text.
EVENTBRIDGE_MIN_INTEGER = -(2**63)
EVENTBRIDGE_MAX_INTEGER = 2**63 - 1
# A run of 19 or more digits and points: where a JSON number of 19 significant digits or more would be
# (2**63 has 19 digits). Its absence proves every integer is within EventBridge's range.
_LONG_MANTISSA = re.compile(r"[0-9.]{19,}")

# SQS's largest message (body plus attributes): the poison message's limit. The CDK construct gives the
# poison queue exactly this maximum.
SQS_MAX_MESSAGE_BYTES = 1_048_576

# Batch entry ids must be unique within a call and match this (SNS and SQS both document it).
ENTRY_ID = re.compile(r"^[A-Za-z0-9_-]{1,80}$")
# FIFO MessageGroupId (SNS and SQS alike): up to 128 ASCII letters, digits and punctuation.
GROUP_ID = re.compile(r"[A-Za-z0-9!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~]{1,128}")
_STRING = "String"
_NUMBER = "Number"


class Message(NamedTuple):
    """One event, ready to publish: the event and its envelope as JSON text (built once); build it
    with `of`, or `claim_check` for a stored envelope too large for a destination."""

    event: OutboxEvent
    body: str
    body_bytes: int
    """The body's size in UTF-8 bytes (what SNS and EventBridge count), measured once for both."""
    claim: bool = False
    """The body is a claim check (outbox.payload_refs) for the envelope the event's row names."""

    @classmethod
    def of(cls, event: OutboxEvent) -> Message:
        stored = event.stored
        if stored is not None and stored.text is None:
            # Not read (yet): sized from the row, so the plan can tell which destinations take it whole.
            return cls(event, "", stored.size)
        body = event.envelope_json()
        return cls(event, body, _utf8_bytes(body))

    @classmethod
    def claim_check(cls, event: OutboxEvent, *, sns: bool) -> Message:
        """The claim check of the event's stored envelope: the extended clients' pointer on SNS, the envelope
        without its payload plus `payload_ref` on EventBridge (docs/contracts.md, "Claim checks")."""
        if event.stored is None:
            raise ValueError("only an event whose envelope is stored has a claim check")
        body = sns_pointer_message(event.stored.ref) if sns else eventbridge_claim_detail(event)
        return cls(event, body, _utf8_bytes(body), claim=True)


def eventbridge_claim_detail(event: OutboxEvent) -> str:
    """The EventBridge claim check: the envelope's fields but `payload` (its trace fields included),
    `payload_ref` (the extended clients' pointer object) and `payload_bytes` (the stored envelope's size).
    Rules match on the same fields."""
    if event.stored is None:
        raise ValueError("only an event whose envelope is stored has a claim check")
    head = {
        **{name: getattr(event, name) for name in ENVELOPE_HEAD_FIELDS},
        **event.trace.envelope_fields(),
        "payload_ref": event.stored.ref.pointer(),
        "payload_bytes": event.stored.size,
    }
    return _CLAIM_ENCODER.encode(head)


_CLAIM_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def entry_id(position: int) -> str:
    return f"m{position}"


def sns_attributes(event: OutboxEvent, *, claim: bool = False) -> dict[str, dict[str, str]]:
    """For subscription filter policies, and the event's trace context when it has one (docs/contracts.md,
    "Published envelope"): SNS takes no trace header per message (a PublishBatch entry has no system
    attributes, and the request's HTTP header is one for the whole batch), so it travels as message attributes
    named as the envelope's fields, which SNS hands to SQS subscribers (as SQS message attributes with raw
    delivery). A claim check also carries the stored envelope's size, by which the extended clients
    recognise it."""
    attributes = {
        "event_type": {"DataType": _STRING, "StringValue": event.event_type},
        "aggregate_type": {"DataType": _STRING, "StringValue": event.aggregate_type},
        "event_id": {"DataType": _STRING, "StringValue": event.event_id},
    }
    if event.trace:
        for name, value in event.trace.envelope_fields().items():
            attributes[name] = {"DataType": _STRING, "StringValue": value}
    if claim and event.stored is not None:
        attributes[SIZE_ATTRIBUTE] = {"DataType": _NUMBER, "StringValue": str(event.stored.size)}
    return attributes


def sns_entry(message: Message, position: int, *, fifo: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "Id": entry_id(position),
        "Message": message.body,
        "MessageAttributes": sns_attributes(message.event, claim=message.claim),
    }
    if fifo:
        # Order is kept per group: one group per aggregate. Dedup by event_id covers redeliveries
        # within SNS's 5-minute window; consumers still deduplicate beyond it.
        entry["MessageGroupId"] = message_group_id(message.event.aggregate_key)
        entry["MessageDeduplicationId"] = message.event.event_id
    return entry


def sns_size(message: Message) -> int:
    """Body plus each attribute's name, data type and value, in UTF-8 bytes."""
    event = message.event
    values = _utf8_bytes(event.event_type) + _utf8_bytes(event.aggregate_type) + _utf8_bytes(event.event_id)
    if event.trace:
        values += sum(
            len(name) + len(_STRING) + len(value) for name, value in event.trace.envelope_fields().items()
        )
    size = message.body_bytes + _SNS_ATTRIBUTE_NAMES_AND_TYPES_BYTES + values
    if message.claim and event.stored is not None:
        size += len(SIZE_ATTRIBUTE) + len(_NUMBER) + len(str(event.stored.size))
    return size


def _utf8_bytes(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode())


# What the attributes' names and data types weigh: the same for every message (sns_attributes).
_SNS_ATTRIBUTE_NAMES_AND_TYPES_BYTES = sum(
    len(name.encode()) + len(_STRING.encode()) for name in ("event_type", "aggregate_type", "event_id")
)


def is_fifo(arn_or_url: str) -> bool:
    """SNS topics and SQS queues are FIFO exactly when their name ends in `.fifo`."""
    return arn_or_url.endswith(".fifo")


def message_group_id(aggregate_key: str) -> str:
    """The FIFO group of an aggregate: its key, when the key is a valid group id.

    The row contract allows an aggregate_id of 256 characters of any kind, a group id only 128 ASCII
    ones: such a key would make every event of the aggregate poison. Those keys get a digest instead,
    the same for every event of the aggregate, so order per aggregate still holds.
    """
    if GROUP_ID.fullmatch(aggregate_key):
        return aggregate_key
    return "sha256:" + hashlib.sha256(aggregate_key.encode()).hexdigest()


def eventbridge_entry(message: Message, *, source: str, event_bus_name: str) -> dict[str, Any]:
    entry = {
        "Source": source,
        "DetailType": message.event.event_type,
        "Detail": message.body,
        "EventBusName": event_bus_name,
    }
    header = message.event.trace.trace_header
    if header is not None:
        # The entry's own X-Ray header: EventBridge passes it on to the rule's targets (an SQS target's
        # AWSTraceHeader, a function's trace), where one call's HTTP header would name the publisher's trace.
        entry["TraceHeader"] = header
    return entry


def eventbridge_size(message: Message, *, source: str) -> int:
    # No Time and no Resources are sent, so only these three count (a TraceHeader does not count either).
    return len(source.encode()) + len(message.event.event_type.encode()) + message.body_bytes


def eventbridge_refusal(event: OutboxEvent, text: str | None = None) -> str | None:
    """Why EventBridge would refuse the event's Detail for good, found before the call (None: it would not).
    Names no value: the reason reaches logs and `last_error`.

    `text`, when given, is JSON text holding the payload's literals (its `payload_json`, or the envelope): an
    integer outside the range needs 19 digits or more in its literal's mantissa (digits and at most one point,
    contiguous), so text with no such run holds none, and the payload is not walked."""
    if text is not None and not _LONG_MANTISSA.search(text):
        return None
    # A stored envelope is walked whole, from its text (the event read from its row holds no payload).
    value = decode_payload(text) if event.stored is not None and text is not None else event.payload
    for number in _integers(value):
        if not EVENTBRIDGE_MIN_INTEGER <= number <= EVENTBRIDGE_MAX_INTEGER:
            return "the payload holds an integer outside EventBridge's signed 64-bit range"
    return None


def _integers(value: Any) -> Iterator[int | Decimal]:
    """Every integer literal of a payload (a stored one reads them as exponent-0 Decimals)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif _is_integer(item):
            yield item


def _is_integer(item: Any) -> bool:
    if isinstance(item, Decimal):
        return item.is_finite() and item.as_tuple().exponent == 0
    return isinstance(item, int) and not isinstance(item, bool)
