"""A row's `generation`: the redrive counter its conditional writes compare, so that a stale stream record of
the row's earlier life can never settle or mark the row an operator redrove since (outbox.model.GENERATION).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from outbox.model import GENERATION


def stored_generation(row: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The row's `generation` attribute exactly as stored (None when it has none): what a conditional write
    compares, so that a row stays addressable even with a value the outbox cannot read (another writer's).
    A value no table stores (`{}`, two types, a made-up record's) is none: AWS refuses it in a condition. A
    stream image spells a Binary in base64, which botocore would encode again: it is compared as its bytes."""
    return _as_sent(row.get(GENERATION))


def _as_sent(value: object) -> dict[str, Any] | None:
    """An attribute value as boto3 sends it (Binaries as bytes, at any depth), or None if it is none."""
    if not (isinstance(value, Mapping) and len(value) == 1):
        return None
    ((kind, held),) = value.items()
    try:
        return {kind: _held(kind, held)}
    except ValueError:
        return None


def _held(kind: object, held: object) -> object:
    if kind == "B":
        return _bytes(held)
    if kind == "BS" and isinstance(held, list):
        return [_bytes(each) for each in held]
    if kind == "M" and isinstance(held, Mapping):
        return {name: _member(each) for name, each in held.items()}
    if kind == "L" and isinstance(held, list):
        return [_member(each) for each in held]
    expected = _ATTRIBUTE_TYPES.get(kind) if isinstance(kind, str) else None
    if expected is None or not isinstance(held, expected):
        raise ValueError("not an attribute value")
    return held


def _member(value: object) -> dict[str, Any]:
    sent = _as_sent(value)
    if sent is None:
        raise ValueError("not an attribute value")
    return sent


_ATTRIBUTE_TYPES: dict[str, type] = {"S": str, "N": str, "BOOL": bool, "NULL": bool, "SS": list, "NS": list}


def _bytes(held: object) -> bytes:
    if isinstance(held, bytes):
        return held
    if isinstance(held, str):
        return base64.b64decode(held, validate=True)  # binascii.Error is a ValueError
    raise ValueError("not a Binary")


def generation_of(row: Mapping[str, Any]) -> int:
    """The row's redrive generation (0 until its first redrive; an unreadable one counts as 0)."""
    if GENERATION not in row:
        return 0  # every row until its first redrive: without raising and catching a KeyError
    try:
        return int(str(row[GENERATION]["N"]))
    except (KeyError, TypeError, ValueError):
        return 0
