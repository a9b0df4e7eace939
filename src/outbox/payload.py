"""An event's payload: a JSON object, stored as text exactly as the writer encoded it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from outbox.errors import InvalidPayloadError

JsonObject = Mapping[str, Any]


def encode_payload(payload: JsonObject) -> str:
    """Compact JSON text of a payload; rejects anything that is not a plain JSON object. A payload read back
    from a row keeps the text it was stored as."""
    if isinstance(payload, StoredPayload):
        return payload.text
    if not isinstance(payload, Mapping):
        raise InvalidPayloadError("payload must be a JSON object", field="payload")
    try:
        return _ENCODER.encode(dict(payload))
    except (TypeError, ValueError) as error:
        # The message names the Python type only, never the value (it may be sensitive).
        raise InvalidPayloadError(f"payload is not JSON-serialisable: {type(error).__name__}") from None


class StoredPayload(dict[str, Any]):
    """A payload read back from its stored text, which it keeps (`text`): the text is what is forwarded, byte
    for byte. Its numbers are `Decimal`, exactly as written: `1e400` or a 5,000-digit integer is valid JSON
    that no float or bounded int conversion may reject or round. Read-only: a change would not reach the
    text that is published."""

    text: str

    def _read_only(self, *_: Any, **__: Any) -> Any:
        raise TypeError("a stored payload is read-only: build a new event to change it")

    __setitem__ = __delitem__ = _read_only
    clear = pop = popitem = setdefault = update = __ior__ = _read_only


def decode_payload(text: str) -> StoredPayload:
    try:
        value = _compact(text)
        if value is _NOT_COMPACT:
            value = _DECODER.decode(text)  # called here, not deeper: a nesting depth reads as it always did
    except _DuplicateKeyError:
        # Parsers disagree on which duplicate wins: forwarding such text would let consumers disagree.
        raise InvalidPayloadError("payload has duplicate keys", field="payload") from None
    except (ValueError, RecursionError):
        raise InvalidPayloadError("payload is not valid JSON", field="payload") from None
    if not isinstance(value, dict):
        raise InvalidPayloadError("payload must be a JSON object", field="payload")
    stored = StoredPayload(value)
    stored.text = text
    return stored


def _compact(text: str) -> Any:
    """The value of compact text, as every writer of this library stores it, read by `raw_decode` alone
    (without the two whitespace matches `decode` adds around it); `_NOT_COMPACT` for any other text
    (whitespace around the value, trailing data, invalid JSON), which `decode` reads, or refuses, itself."""
    try:
        value, end = _DECODER.raw_decode(text)
    except ValueError:
        return _NOT_COMPACT
    return value if end == len(text) else _NOT_COMPACT


_NOT_COMPACT: Any = object()


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


class _DuplicateKeyError(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        raise _DuplicateKeyError
    return value


# One encoder and one decoder for every payload: `json.dumps` and `json.loads` with these options would build
# a new one per call (every event written, every row read).
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
_DECODER = json.JSONDecoder(
    parse_constant=_reject_constant,
    parse_float=Decimal,
    parse_int=Decimal,
    object_pairs_hook=_unique_keys,
)
