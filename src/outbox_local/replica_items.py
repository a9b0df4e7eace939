"""What the replicator of a global table's replicas knows (`outbox_local.replication`): when each write was
made and where, the version of an item each replica holds, the writes on their way, and the item digests and
conditions it compares and writes with. Plain data: a snapshot holds it as it is."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Delivery",
    "Echo",
    "ReplicatorState",
    "Version",
    "WriteTime",
    "canonical",
    "digest",
    "unchanged",
]


@dataclass(frozen=True, order=True)
class WriteTime:
    """When a write was made, and where: ordered by time, then by region (a tie resolved the same way in
    every replica)."""

    at: float
    region: str


@dataclass(frozen=True)
class Version:
    """What the replicator knows a replica's item to be: the write that made it, and a digest of its
    attributes (None: deleted)."""

    written: WriteTime
    digest: str | None


@dataclass(frozen=True)
class Delivery:
    """One write on its way to one replica."""

    id: int
    table: str
    key: str
    """The item's key attributes as canonical text (what versions are kept by)."""
    keys: Mapping[str, Any]
    image: Mapping[str, Any] | None
    """The item as written (DynamoDB JSON); None: a delete."""
    written: WriteTime
    target: str
    jitter: float = 0.0
    """Added to the lag for this delivery (drawn when it was queued)."""

    @property
    def source(self) -> str:
        return self.written.region


@dataclass(frozen=True)
class Echo:
    delivery_id: int
    digest: str | None
    written: WriteTime


@dataclass(frozen=True)
class ReplicatorState:
    """Everything the replicator holds, as plain data (a snapshot's part)."""

    tables: Mapping[str, tuple[str, ...]]
    positions: Mapping[tuple[str, str], str]
    """(region, table) -> the sequence number of the last stream record read."""
    versions: Mapping[tuple[str, str, str], Version]
    queue: tuple[Delivery, ...]
    echoes: Mapping[tuple[str, str, str], tuple[Echo, ...]]
    cut: frozenset[str]
    next_id: int


def unchanged(
    item: Mapping[str, Any] | None, keys: Mapping[str, Any], names: Iterable[str]
) -> dict[str, Any]:
    """A condition that holds only while the item is `item`: absent, or every attribute equal and no other
    attribute the table's streams ever carried."""
    if item is None:
        return {
            "ConditionExpression": "attribute_not_exists(#k)",
            "ExpressionAttributeNames": {"#k": next(iter(keys))},
        }
    clauses = []
    attribute_names: dict[str, str] = {}
    values: dict[str, Any] = {}
    for index, (name, value) in enumerate(sorted(item.items())):
        attribute_names[f"#a{index}"] = name
        values[f":a{index}"] = value
        clauses.append(f"#a{index} = :a{index}")
    for index, name in enumerate(sorted(set(names) - set(item))):
        attribute_names[f"#n{index}"] = name
        clauses.append(f"attribute_not_exists(#n{index})")
    return {
        "ConditionExpression": " AND ".join(clauses),
        "ExpressionAttributeNames": attribute_names,
        "ExpressionAttributeValues": values,
    }


def _plain(value: Any) -> Any:
    """DynamoDB JSON as canonical JSON: binary as base64 text, sets sorted."""
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _set_sorted(value: Any) -> Any:
    if isinstance(value, Mapping):
        out = {}
        for kind, inner in value.items():
            if kind in ("SS", "NS", "BS") and isinstance(inner, list):
                out[kind] = sorted(inner)
            else:
                out[kind] = _set_sorted(inner)
        return out
    if isinstance(value, list):
        return [_set_sorted(v) for v in value]
    return value


def canonical(value: Mapping[str, Any]) -> str:
    return json.dumps(_set_sorted(_plain(value)), sort_keys=True, separators=(",", ":"))


def digest(image: Mapping[str, Any] | None) -> str | None:
    if image is None:
        return None
    return hashlib.blake2b(canonical(image).encode(), digest_size=16).hexdigest()
