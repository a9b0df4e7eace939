"""Keeping an envelope too large for its row in the payload store, before the transaction that saves the row.

The object is written first: if the transaction then commits, the row names an object that exists; if it is
cancelled (or never run), no row names the object and the bucket's lifecycle rule removes it
(docs/contracts.md, "Claim checks"). Nothing is published for an object no row names.
"""

from __future__ import annotations

import uuid

from outbox.model import OutboxEvent
from outbox.payload_refs import (
    DEFAULT_OFFLOAD_THRESHOLD_BYTES,
    MAX_OFFLOAD_THRESHOLD_BYTES,
    MAX_STORED_ENVELOPE_BYTES,
    StoredEnvelope,
    object_key,
)
from outbox.payload_store import PayloadStore, PayloadTooLargeError


class Offloader:
    """Stores the envelopes larger than `threshold_bytes` in `store`; the row then names the object."""

    def __init__(
        self, store: PayloadStore, *, threshold_bytes: int = DEFAULT_OFFLOAD_THRESHOLD_BYTES
    ) -> None:
        if not 0 <= threshold_bytes <= MAX_OFFLOAD_THRESHOLD_BYTES:
            raise ValueError(f"threshold_bytes must be between 0 and {MAX_OFFLOAD_THRESHOLD_BYTES}")
        self._store = store
        self._threshold = threshold_bytes

    def check(self, event: OutboxEvent) -> None:
        """Raises PayloadTooLargeError when the event's envelope is over the maximum the store keeps: checked
        for every event of a write before any envelope is stored."""
        _check_size(_utf8_size(event.envelope_json()))

    def row_of(self, event: OutboxEvent) -> dict[str, dict[str, str]]:
        """The event's row: as it is when its envelope fits the threshold, else naming the stored envelope.
        Raises PayloadTooLargeError over the maximum and PayloadUnavailableError when the store failed: in
        both cases nothing names the object, and the caller's transaction must not run."""
        item = event.to_item()
        envelope = event.envelope_json()
        size = _utf8_size(envelope)
        if size <= self._threshold:
            return item
        _check_size(size)
        ref = self._store.put(object_key(event.event_id, uuid.uuid4().hex), envelope)
        del item["payload"]
        item.update(StoredEnvelope(ref, size).attributes())
        return item


def _utf8_size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode())


def _check_size(size: int) -> None:
    if size > MAX_STORED_ENVELOPE_BYTES:
        raise PayloadTooLargeError(
            f"the event's envelope is {size} bytes, over the {MAX_STORED_ENVELOPE_BYTES}-byte maximum",
            field="payload",
        )
