"""Claim checks as a consumer receives them (docs/contracts.md, "Claim checks"), resolved to the envelope they
point to with one bounded GET, so a consumer sees the same envelope whatever the event's size.

Two shapes: the AWS extended clients' pointer (an SNS message, delivered raw or inside a notification) and the
EventBridge claim (the envelope without `payload`, with `payload_ref`). An object that is not there, or is not
the event the claim names, is a malformed envelope (dead-lettered with its reason); a read that failed raises
PayloadUnavailableError, which hands the message back for another try.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from outbox.errors import ConfigurationError
from outbox.payload_refs import MAX_STORED_ENVELOPE_BYTES, PayloadRef, head_mismatch, sns_pointer_ref
from outbox.payload_store import PayloadMissingError, PayloadStore
from outbox_inbox.errors import MalformedEnvelopeError

_DECODER = json.JSONDecoder(parse_float=Decimal)


def pointer_in(text: str) -> PayloadRef | None:
    """The ref an SNS message (or raw SQS body) holds when it is an extended-client claim check."""
    return sns_pointer_ref(text)


def eventbridge_claim(detail: object) -> PayloadRef | None:
    """The ref an EventBridge detail holds when it is the outbox's claim check (no `payload`)."""
    if not isinstance(detail, Mapping) or "payload" in detail or "payload_ref" not in detail:
        return None
    ref = PayloadRef.of_pointer(detail["payload_ref"])
    if ref is None:
        raise MalformedEnvelopeError("payload_ref is not an S3 pointer")
    return ref


def resolve(ref: PayloadRef, store: PayloadStore | None, *, claim: Mapping[str, Any] | None = None) -> object:
    """The envelope document stored at `ref`; the envelope head fields the claim holds (an EventBridge claim
    holds them all), when it holds any, must be its event's."""
    if store is None:
        raise ConfigurationError("a claim check arrived and the consumer has no payload store to read it")
    try:
        text = store.read(ref, max_bytes=MAX_STORED_ENVELOPE_BYTES)
    except PayloadMissingError as error:
        raise MalformedEnvelopeError(f"the claim check's envelope cannot be read ({error.code})") from None
    try:
        document = _DECODER.decode(text)
    except (ValueError, RecursionError):
        raise MalformedEnvelopeError("the claim check's stored envelope is not JSON") from None
    if not isinstance(document, Mapping):
        raise MalformedEnvelopeError("the claim check's stored envelope is not a JSON object")
    differs = head_mismatch(document, claim or {})
    if differs is not None:
        raise MalformedEnvelopeError(f"the claim check's stored envelope has another {differs}")
    return document
