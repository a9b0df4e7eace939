"""Reading the envelopes that rows name instead of holding their payload (outbox.payload_refs), before an
event is planned: read whole when a destination takes it inline, only checked to exist when every
destination gets a claim check. A read that failed is retried later (the event is left PENDING, never
poison); an object that is not there, or is not the envelope the row names, is poison with its reason."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import NamedTuple

from outbox.errors import InvalidPayloadError
from outbox.model import OutboxEvent
from outbox.payload import decode_payload
from outbox.payload_refs import ENVELOPE_HEAD_FIELDS, MAX_STORED_ENVELOPE_BYTES, head_mismatch
from outbox.payload_store import PayloadMissingError, PayloadStore, PayloadUnavailableError
from outbox_publisher.candidates import Candidate
from outbox_publisher.messages import Message
from outbox_publisher.poison import PoisonReason, Rejection
from outbox_publisher.ports import DestinationPort
from outbox_publisher.routing import Destination, Router

NO_TIME_TO_READ = "DeadlineExceeded"
"""The invocation had no time left for the read: the event is handed back like any the run did not get to."""


class EnvelopeUnavailable(NamedTuple):
    """The stored envelope could not be read now: the event waits for a later attempt."""

    code: str
    detail: str


def resolve(
    candidate: Candidate,
    router: Router,
    ports: Mapping[Destination, DestinationPort],
    store: PayloadStore | None,
    *,
    may_read: Callable[[], bool] = lambda: True,
) -> Candidate | EnvelopeUnavailable:
    """The candidate with its stored envelope read (or checked); rejected when the object is missing.
    `may_read`: whether the invocation has time left for the read (one bounded S3 call); if not, the event
    waits for a later attempt like one whose read failed."""
    event = candidate.event
    stored = event.stored if event is not None else None
    if event is None or stored is None or stored.text is not None or candidate.rejection is not None:
        return candidate
    readable = _store_to_read(store, may_read)
    if isinstance(readable, EnvelopeUnavailable):
        return readable
    message = Message.of(event)
    routed = router.destinations_for(event.aggregate_type, event.event_type)
    delivered = candidate.delivered_to
    inline = any(
        ports[destination].size_of(message) <= ports[destination].max_entry_bytes
        for destination in routed
        if destination.value not in delivered and destination in ports
    )
    try:
        if inline:
            text = readable.read(stored.ref, max_bytes=MAX_STORED_ENVELOPE_BYTES)
            size = len(text.encode())
        else:
            text, size = None, readable.size(stored.ref)
    except PayloadMissingError as error:
        return candidate.but(rejection=Rejection(PoisonReason.INVALID_ROW, "PayloadMissing", str(error)))
    except PayloadUnavailableError as error:
        return EnvelopeUnavailable(f"Payload{error.code}", str(error))
    mismatch = _mismatch(text, size, stored.size, event)
    if mismatch is not None:
        return candidate.but(rejection=Rejection(PoisonReason.INVALID_ROW, "PayloadMismatch", mismatch))
    return candidate.but(
        event=replace(event, stored=stored._replace(text=text)) if text is not None else event
    )


def _store_to_read(
    store: PayloadStore | None, may_read: Callable[[], bool]
) -> PayloadStore | EnvelopeUnavailable:
    if store is None:
        return EnvelopeUnavailable("NoPayloadStore", "the row names a stored envelope and no store is wired")
    if not may_read():
        return EnvelopeUnavailable(NO_TIME_TO_READ, "too little time left to read its stored envelope")
    return store


def _mismatch(text: str | None, size: int, expected_size: int, event: OutboxEvent) -> str | None:
    """Why the stored object is not the envelope the row names (None: it is). Read whole, it is forwarded as
    is, so it must be this event's JSON envelope: consumers parse what they get."""
    if size != expected_size:
        return f"the stored envelope is {size} bytes, the row's payload_bytes says {expected_size}"
    if text is None:
        return None
    try:
        document = decode_payload(text)  # duplicate keys refused, as for a row's payload
    except InvalidPayloadError:
        return "the stored envelope is not a JSON object"
    if not isinstance(document.get("payload"), dict):
        return "the stored envelope has no payload object"
    differs = head_mismatch(document, {name: getattr(event, name) for name in ENVELOPE_HEAD_FIELDS})
    if differs is not None:
        return f"the stored envelope's {differs} is not the row's"
    return None
