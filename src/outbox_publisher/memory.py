"""What this process did to rows lately: the rows it settled, and the destinations that took the events of the
rows it parked.

A settled row is out for good, so the order gate needs no read to know its successor may go, and a stream
record of it delivered again (a batch handed back, a retry) needs no publishing. A parked row's event was
taken by some destinations and not others: a record of it delivered again goes only to the others, as the row
says (`delivered_to`) though the record's image does not. A row is remembered with its `event_id`: a record of
another event in the same slot (another writer's break of the contract) is not taken for it. Bounded: the
oldest entries go first.
"""

from __future__ import annotations

from collections import OrderedDict

from outbox.model import RowKey

DEFAULT_CAPACITY = 10_000
"""Rows remembered (about 1 MB): a hundred batches of 100 records."""

_SETTLED = None
"""What a settled row's entry holds instead of the destinations that took its event: it is out everywhere."""


class RowMemory:
    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 0:
            raise ValueError("capacity must not be negative")
        self._capacity = capacity
        self._rows: OrderedDict[RowKey, tuple[str | None, frozenset[str] | None]] = OrderedDict()

    def settled_row(self, key: RowKey, event_id: str | None) -> None:
        """This process deleted the row: its event is out everywhere."""
        self._remember(key, event_id, _SETTLED)

    def parked_row(self, key: RowKey, event_id: str | None, delivered_to: frozenset[str]) -> None:
        """This process recorded on the row that these destinations took its event."""
        self._remember(key, event_id, delivered_to)

    def __contains__(self, key: object) -> bool:
        """The row at `key` was settled by this process."""
        entry = self._rows.get(key)  # type: ignore[call-overload]  # any object may be asked
        return entry is not None and entry[1] is _SETTLED

    def settled(self, key: RowKey, event_id: str | None) -> bool:
        """This very event (`key` and `event_id`) was settled by this process."""
        entry = self._rows.get(key)
        return event_id is not None and entry is not None and entry == (event_id, _SETTLED)

    def delivered_to(self, key: RowKey, event_id: str | None) -> frozenset[str]:
        """The destinations this process recorded as having taken this very event (none if it parked none)."""
        entry = self._rows.get(key)
        if event_id is None or entry is None or entry[0] != event_id or entry[1] is _SETTLED:
            return frozenset()
        return entry[1]

    def _remember(self, key: RowKey, event_id: str | None, delivered_to: frozenset[str] | None) -> None:
        if not self._capacity:
            return
        self._rows[key] = (event_id, delivered_to)
        self._rows.move_to_end(key)
        while len(self._rows) > self._capacity:
            self._rows.popitem(last=False)
