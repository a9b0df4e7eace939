"""Where an event's body lives when it is too large for its row, and the claim checks that point to it.

A writer with a payload store (outbox.payload_store) keeps an event's published envelope in S3 when the
envelope is larger than its threshold, and the row holds `payload_ref` (`s3://bucket/key`) and
`payload_bytes` (the envelope's size in UTF-8 bytes) instead of `payload` (docs/contracts.md, "Outbox row").
The object holds the envelope exactly as it is published, so a claim check points to it as is: on SNS in the
format of the AWS extended clients (the SNS Extended Client writes it, the SQS Extended Client and the
Payload Offloading library read it), on EventBridge as the envelope without its payload plus `payload_ref`
(docs/contracts.md, "Claim checks"). Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from outbox.errors import InvalidOutboxRowError

PAYLOAD_REF = "payload_ref"
PAYLOAD_BYTES = "payload_bytes"

DEFAULT_OFFLOAD_THRESHOLD_BYTES = 64 * 1024
"""Envelopes larger than this go to the payload store. Below it, the row is cheaper: a transactional write
costs 2 WRU per KB (64 KB: 128 WRU, $0.00008), an S3 PUT and GET together $0.0000054; above it, the row's
cost grows with its size and the S3 path's does not (docs/BENCHMARKS.md prices both)."""
MAX_OFFLOAD_THRESHOLD_BYTES = 384 * 1024
"""The highest threshold a writer takes: an envelope kept in its row must fit DynamoDB's 400 KB item with the
row's other attributes, so a higher one would let envelopes through that no row can hold."""
MAX_STORED_ENVELOPE_BYTES = 10 * 1024 * 1024
"""The largest envelope a writer stores (and a publisher or consumer reads back in one bounded GET): every
reader holds it in a Lambda's memory, so it is bounded well below what S3 holds."""

# The AWS extended clients' pointer (software.amazon.payloadoffloading.PayloadS3Pointer), and the message
# attribute holding the original body's size in bytes, which is how their readers recognise a pointer.
POINTER_CLASS = "software.amazon.payloadoffloading.PayloadS3Pointer"
LEGACY_POINTER_CLASS = "com.amazon.sqs.javamessaging.MessageS3Pointer"
SIZE_ATTRIBUTE = "ExtendedPayloadSize"
LEGACY_SIZE_ATTRIBUTE = "SQSLargePayloadSize"

# S3 bucket names (3-63 lowercase letters, digits, dots, hyphens) and a key of at most 1,024 bytes.
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_MAX_KEY_BYTES = 1024
_SCHEME = "s3://"
_POINTER_HEAD_CHARS = 64
"""Where a pointer's class name ends, with room for whitespace before it."""


class PayloadRef(NamedTuple):
    """One stored envelope: its bucket and key."""

    bucket: str
    key: str

    @property
    def uri(self) -> str:
        """As a row stores it: `s3://bucket/key`."""
        return f"{_SCHEME}{self.bucket}/{self.key}"

    @classmethod
    def parse(cls, text: str) -> PayloadRef:
        """The ref a row's `payload_ref` holds; InvalidOutboxRowError when it is not `s3://bucket/key`."""
        if isinstance(text, str) and text.startswith(_SCHEME):
            bucket, _, key = text[len(_SCHEME) :].partition("/")
            if _valid(bucket, key):
                return cls(bucket, key)
        raise InvalidOutboxRowError(f"{PAYLOAD_REF} is not s3://bucket/key", field=PAYLOAD_REF)

    def pointer(self) -> dict[str, str]:
        """The extended clients' pointer object."""
        return {"s3BucketName": self.bucket, "s3Key": self.key}

    @classmethod
    def of_pointer(cls, pointer: object) -> PayloadRef | None:
        """The ref a pointer object names, or None when it is no valid pointer."""
        if not isinstance(pointer, Mapping):
            return None
        bucket, key = pointer.get("s3BucketName"), pointer.get("s3Key")
        if not (isinstance(bucket, str) and isinstance(key, str) and _valid(bucket, key)):
            return None
        return cls(bucket, key)


def _valid(bucket: str, key: str) -> bool:
    return bool(_BUCKET.fullmatch(bucket)) and 0 < len(key.encode()) <= _MAX_KEY_BYTES


def object_key(event_id: str, write_id: str) -> str:
    """Where a writer stores an event's envelope: one object per write, named by the event's id and the
    write's (no payload data). Never the same for two writes: a write of the same event id whose transaction
    is then cancelled (a retried command, a slot already taken) must not replace the object a committed row
    names."""
    return f"{event_id}/{write_id}.json"


ENVELOPE_HEAD_FIELDS = (
    "event_id",
    "event_type",
    "schema_version",
    "aggregate_type",
    "aggregate_id",
    "seq",
    "occurred_at",
    "correlation_id",
)
"""The envelope's fields besides `payload` (and the trace) that name the event: a stored envelope must hold
the same as the row or claim that names it."""


def head_mismatch(document: Mapping[str, Any], expected: Mapping[str, Any]) -> str | None:
    """The first of `expected`'s head fields in which the stored envelope `document` differs (None: none)."""
    for name in ENVELOPE_HEAD_FIELDS:
        if name in expected and document.get(name) != expected[name]:
            return name
    return None


class StoredEnvelope(NamedTuple):
    """An event's envelope kept in the payload store, as its row names it; `text` once read."""

    ref: PayloadRef
    size: int
    """The envelope's size in UTF-8 bytes (the row's `payload_bytes`): what each destination would carry."""
    text: str | None = None

    @classmethod
    def of_item(cls, item: Mapping[str, Any]) -> StoredEnvelope | None:
        """The stored envelope a row names instead of `payload`; None when it holds its payload."""
        if "payload" in item or PAYLOAD_REF not in item:
            return None
        ref_value, size_value = item.get(PAYLOAD_REF), item.get(PAYLOAD_BYTES)
        ref_text = ref_value.get("S") if isinstance(ref_value, Mapping) else None
        size_text = size_value.get("N") if isinstance(size_value, Mapping) else None
        if not isinstance(ref_text, str):
            raise InvalidOutboxRowError(f"{PAYLOAD_REF} is not a String", field=PAYLOAD_REF)
        if not (isinstance(size_text, str) and size_text.isascii() and size_text.isdigit()):
            raise InvalidOutboxRowError(f"{PAYLOAD_BYTES} is not a whole Number", field=PAYLOAD_BYTES)
        size = int(size_text)
        if not 0 < size <= MAX_STORED_ENVELOPE_BYTES:
            raise InvalidOutboxRowError(
                f"{PAYLOAD_BYTES} is not between 1 and {MAX_STORED_ENVELOPE_BYTES}", field=PAYLOAD_BYTES
            )
        return cls(PayloadRef.parse(ref_text), size)

    def attributes(self) -> dict[str, dict[str, str]]:
        """The row's attributes naming it (instead of `payload`)."""
        return {PAYLOAD_REF: {"S": self.ref.uri}, PAYLOAD_BYTES: {"N": str(self.size)}}

    def envelope_text(self) -> str:
        if self.text is None:
            raise ValueError("the stored envelope has not been read")
        return self.text


def sns_pointer_message(ref: PayloadRef) -> str:
    """The SNS message of a claim check: what the SNS Extended Client publishes (a JSON array of the pointer's
    class and the pointer), spelled as its Python implementation spells it."""
    return json.dumps([POINTER_CLASS, ref.pointer()])


def sns_pointer_ref(text: str) -> PayloadRef | None:
    """The ref an SNS/SQS message body holds when it is a claim check of either extended-client format."""
    # Only text that opens as a pointer is parsed: any other body is the caller's to read (and refuse).
    head = text[:_POINTER_HEAD_CHARS]
    if not head.startswith("[") or (POINTER_CLASS not in head and LEGACY_POINTER_CLASS not in head):
        return None
    try:
        value: Any = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if isinstance(value, list) and len(value) == 2 and value[0] in (POINTER_CLASS, LEGACY_POINTER_CLASS):
        return PayloadRef.of_pointer(value[1])
    return None
