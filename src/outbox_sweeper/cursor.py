"""The sweeper's saved position in its pass over the table, and the figures of that pass so far.

One item per scan segment in the outbox table itself, under a key no event can have (outbox.model,
`SWEEPER_CURSOR_KEY`, seq = the segment): read at the start of every run (GetItem, strongly consistent) and
written at its end (PutItem, 1 WCU). Its stream records invoke nothing: the mapping's filter passes no MODIFY
without a status, and the publisher skips the one INSERT.

A pass that ends within one run (the table holds little, as it should) reports its own figures. One that
spans runs (millions of rows after an outage) reports, figure by figure, the larger of the last complete
pass's and what the current pass has counted so far: an alarm on them neither misses a row it saw a minute ago
nor fires late on one it has not reached yet. A change in the number of segments starts a new pass.

Across regions (outbox.regions) each region's sweeper keeps its own cursor, `#sweeper#<region>`: the table is
replicated, and two regions writing one item would overwrite each other's position (last writer wins).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from outbox.clock import format_timestamp, parse_timestamp
from outbox.dynamodb import call
from outbox.model import PARTITION_KEY, SORT_KEY, SWEEPER_CURSOR_KEY
from outbox_sweeper.census import Figures

_FIGURES = Figures._fields
_DATES = frozenset({"oldest_pending", "oldest_unheld"})


class Cursor(NamedTuple):
    segments: int
    position: Mapping[str, Any] | None = None
    """Where the current pass goes on from; None: the next run starts a new pass."""
    so_far: Figures = Figures()
    """What the current pass counted before this run."""
    last: Figures | None = None
    """The last complete pass's figures."""


class CursorStore(Protocol):
    """Port: the saved cursor of a segment. Raises an OutboxError if DynamoDB did not answer."""

    def load(self, segment: int, segments: int) -> Cursor: ...

    def save(self, segment: int, cursor: Cursor) -> None: ...


class DynamoDBCursorStore:
    def __init__(self, client: Any, table_name: str, *, region: str | None = None) -> None:
        self._client = client
        self._table = table_name
        self._key = SWEEPER_CURSOR_KEY if region is None else f"{SWEEPER_CURSOR_KEY}#{region}"

    def load(self, segment: int, segments: int) -> Cursor:
        response = call(
            "GetItem",
            self._client.get_item,
            TableName=self._table,
            Key=_key(self._key, segment),
            ConsistentRead=True,
        )
        item = response.get("Item")
        if not item:
            return Cursor(segments)
        return decode(item, segments)

    def save(self, segment: int, cursor: Cursor) -> None:
        call(
            "PutItem",
            self._client.put_item,
            TableName=self._table,
            Item=_key(self._key, segment) | encode(cursor),
        )


def _key(partition: str, segment: int) -> dict[str, Any]:
    return {PARTITION_KEY: {"S": partition}, SORT_KEY: {"N": str(segment)}}


def encode(cursor: Cursor) -> dict[str, Any]:
    item: dict[str, Any] = {"segments": {"N": str(cursor.segments)}, "so_far": _figures(cursor.so_far)}
    if cursor.position is not None:
        item["position"] = {"M": dict(cursor.position)}
    if cursor.last is not None:
        item["last"] = _figures(cursor.last)
    return item


def decode(item: Mapping[str, Any], segments: int) -> Cursor:
    """The stored cursor; a fresh one when it was saved for another number of segments, or cannot be read."""
    try:
        if int(item["segments"]["N"]) != segments:
            return Cursor(segments, last=_read_figures(item.get("last")))
        position = item.get("position", {}).get("M")
        return Cursor(
            segments, position, _read_figures(item["so_far"]) or Figures(), _read_figures(item.get("last"))
        )
    except (KeyError, TypeError, ValueError):
        return Cursor(segments)


def _figures(figures: Figures) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for name, value in zip(_FIGURES, figures, strict=True):
        if isinstance(value, datetime):
            fields[name] = {"S": format_timestamp(value)}
        elif value is not None:
            fields[name] = {"N": str(value)}
    return {"M": fields}


def _read_figures(value: Mapping[str, Any] | None) -> Figures | None:
    if not value or "M" not in value:
        return None
    fields = value["M"]
    read: dict[str, Any] = {}
    for name in _FIGURES:
        if name not in fields:
            continue
        read[name] = parse_timestamp(fields[name]["S"]) if name in _DATES else int(fields[name]["N"])
    return Figures(**read)
