"""What a scan of the outbox table finds, row by row: counts, the oldest pending row, held aggregates, and the
rows that are due. Pure: outbox_sweeper.scan reads the table, the sweeper and `outbox status` feed this.

The table holds exactly the events that are not out yet, and a scan returns an aggregate's rows together in
`seq` order, so an aggregate's first row in the scan has its predecessor out: no read needed. From there:
a FAILED row that is not released holds the rest of its aggregate (HELD, for an operator); a PENDING row is
due when not backing off, not leased, and older than the grace or with an `occurred_at` unreadable or more
than a grace ahead (a writer's bad clock must not strand it); a PENDING row not due holds the rows after it
back; a PUBLISHED row (kept by earlier releases) or a released FAILED one is out.

A run that resumes from a saved position may start in the middle of an aggregate: its first row there is not
known to be the lowest, so the order gate reads its predecessor.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from outbox.clock import parse_timestamp
from outbox.model import (
    FAILED_INDEX_PARTITION_KEY,
    FAILED_INDEX_SORT_KEY,
    LEASE_UNTIL,
    NEXT_ATTEMPT_AT,
    ORIGIN,
    RELEASED_AT,
    OutboxStatus,
    RowKey,
    is_own_item,
    string_attribute,
)

SCANNED_ATTRIBUTES = (
    "status",
    "occurred_at",
    NEXT_ATTEMPT_AT,
    LEASE_UNTIL,
    RELEASED_AT,
    FAILED_INDEX_PARTITION_KEY,
    FAILED_INDEX_SORT_KEY,
    ORIGIN,
)
"""What a scan reads of each row besides its key: the rest comes with the claim."""
HELD_LISTED = 1_000
"""Held aggregates a census names (it counts them all)."""
UNINDEXED_LISTED = 100
"""FAILED rows missing from the failed index a census names, for the sweeper to add (it counts them all)."""


class DueRow(NamedTuple):
    key: RowKey
    predecessor_out: bool
    """Its aggregate has no row below it that is not out: its predecessor is out, without a read."""
    occurred_at: datetime | None = None
    """When it occurred, if that is a date not in the future: its age counts until it is out."""
    origin: str | None = None
    """Its `origin`, as stored (an outbox across regions)."""


class HeldAggregate(NamedTuple):
    aggregate_key: str
    waiting_seq: str
    """The first PENDING event that waits (as stored)."""
    failed_seq: str
    """The FAILED event it waits behind (as stored)."""


class Figures(NamedTuple):
    """What a pass (or part of one) counted. Dates are `occurred_at`s; a row dated in the future adds none."""

    pending: int = 0
    oldest_pending: datetime | None = None
    oldest_unheld: datetime | None = None
    """The oldest PENDING row no FAILED row holds back: it should be going out by itself."""
    held_aggregates: int = 0
    failed: int = 0
    """FAILED rows that hold their aggregate."""
    failed_released: int = 0
    """FAILED rows whose route lets later events go on past them."""
    backing_off: int = 0
    unindexed_failed: int = 0

    def plus(self, other: Figures) -> Figures:
        """Two parts of one pass together."""
        return Figures(
            self.pending + other.pending,
            _earliest(self.oldest_pending, other.oldest_pending),
            _earliest(self.oldest_unheld, other.oldest_unheld),
            self.held_aggregates + other.held_aggregates,
            self.failed + other.failed,
            self.failed_released + other.failed_released,
            self.backing_off + other.backing_off,
            self.unindexed_failed + other.unindexed_failed,
        )

    def at_least(self, other: Figures) -> Figures:
        """The larger of two estimates of one table, figure by figure (the older of two oldest dates)."""
        return Figures(
            max(self.pending, other.pending),
            _earliest(self.oldest_pending, other.oldest_pending),
            _earliest(self.oldest_unheld, other.oldest_unheld),
            max(self.held_aggregates, other.held_aggregates),
            max(self.failed, other.failed),
            max(self.failed_released, other.failed_released),
            max(self.backing_off, other.backing_off),
            max(self.unindexed_failed, other.unindexed_failed),
        )


class Census:
    """Takes rows in scan order, one per run."""

    def __init__(
        self,
        *,
        now: datetime,
        grace: timedelta,
        due_limit: int,
        resumed_after: RowKey | None = None,
        owns: Callable[[Mapping[str, Any]], bool] | None = None,
    ) -> None:
        """`owns`: on an outbox across regions (outbox.regions.Ownership.owns), whether this region publishes
        a row; a PENDING row it does not own is not due here, and holds the rows after it back."""
        self._owns = owns
        self._now = now
        self._now_epoch = now.timestamp()
        self._due_before = now - grace
        self._future_after = now + grace
        self._due_limit = due_limit
        self._resumed_after = resumed_after
        self.due: list[DueRow] = []
        self.held: list[HeldAggregate] = []
        self.unindexed: list[RowKey] = []
        self.rows = 0
        """Rows of events read (the outbox's own items are not counted)."""
        self._pending = self._held = self._failed = self._released = self._backing_off = self._unindexed = 0
        self._oldest: datetime | None = None
        self._oldest_unheld: datetime | None = None
        # The aggregate the scan is in: its key, whether every row of it so far is out, the FAILED row that
        # holds it, whether a PENDING row that is not due holds it back, whether it was counted held.
        self._aggregate: str | None = None
        self._all_out = False
        self._failed_seq: str | None = None
        self._waiting = False
        self._counted_held = False

    @property
    def full(self) -> bool:
        """As many due rows as a run takes: the scan stops after the row that filled it. A census that keeps
        no due rows (`due_limit` 0: `outbox status`) is never full."""
        return 0 < self._due_limit <= len(self.due)

    def figures(self, out: Collection[RowKey] = ()) -> Figures:
        """The figures of what was read, less the due rows that are `out` by now (the run published them)."""
        left = [due for due in self.due if due.key not in out]
        oldest_left = min((due.occurred_at for due in left if due.occurred_at is not None), default=None)
        return Figures(
            self._pending - (len(self.due) - len(left)),
            _earliest(self._oldest, oldest_left),
            _earliest(self._oldest_unheld, oldest_left),
            self._held,
            self._failed,
            self._released,
            self._backing_off,
            self._unindexed,
        )

    def add(self, item: Mapping[str, Any]) -> None:
        """One item of the scan, in scan order."""
        key = RowKey.stored(item)
        if key is None or is_own_item(item):
            return  # the outbox's own items (audit records, the cursor); an unreadable key is no row
        self.rows += 1
        if key.aggregate_key != self._aggregate:
            self._enter(key)
        status = string_attribute(item, "status")
        if status is None or status == OutboxStatus.PENDING:
            self._pending_row(key, item)
        elif status == OutboxStatus.PUBLISHED:
            return  # kept by an earlier release until its TTL: out
        else:
            if RELEASED_AT in item:
                self._released += 1  # FAILED, but its route lets the events after it go
            else:
                # FAILED, or a status this library does not know: either way it holds its aggregate, visibly.
                self._failed += 1
                if self._failed_seq is None:
                    self._failed_seq = key.seq_text
                self._all_out = False
            # Released or not, an operator finds a FAILED row through the index.
            indexed = FAILED_INDEX_PARTITION_KEY in item and FAILED_INDEX_SORT_KEY in item
            if status == OutboxStatus.FAILED and not indexed:
                self._unindexed += 1
                # Across regions, only the row's owner writes it (two regions writing one row race under
                # last-writer-wins).
                ours = self._owns is None or self._owns(item)
                if ours and len(self.unindexed) < UNINDEXED_LISTED:
                    self.unindexed.append(key)

    def _enter(self, key: RowKey) -> None:
        # The first aggregate after a saved position may have rows before it: its lowest is not known.
        resumed = self._resumed_after
        first = self._aggregate is None
        self._all_out = not (first and resumed is not None and resumed.aggregate_key == key.aggregate_key)
        self._aggregate = key.aggregate_key
        self._failed_seq = None
        self._waiting = False
        self._counted_held = False

    def _pending_row(self, key: RowKey, item: Mapping[str, Any]) -> None:
        self._pending += 1
        occurred_at = _timestamp(item)
        next_attempt = _number(item, NEXT_ATTEMPT_AT)
        backing_off = next_attempt is not None and next_attempt > self._now_epoch
        if backing_off:
            self._backing_off += 1
        dated = occurred_at if occurred_at is not None and occurred_at <= self._now else None
        if self._failed_seq is not None:
            self._oldest = _earliest(self._oldest, dated)
            if not self._counted_held:
                self._counted_held = True
                self._held += 1
                if len(self.held) < HELD_LISTED:
                    self.held.append(HeldAggregate(key.aggregate_key, key.seq_text, self._failed_seq))
            return
        lease_until = _number(item, LEASE_UNTIL)
        leased = lease_until is not None and lease_until >= self._now_epoch
        old_enough = (
            occurred_at is None or occurred_at <= self._due_before or occurred_at > self._future_after
        )
        not_ours = self._owns is not None and not self._owns(item)
        if self._waiting or backing_off or leased or not old_enough or not_ours:
            self._waiting = True  # the rows after it must not go first
        elif len(self.due) < self._due_limit:
            # Its age counts until it is out.
            self.due.append(DueRow(key, self._all_out, dated, string_attribute(item, ORIGIN)))
            self._all_out = False
            return
        self._all_out = False
        self._oldest = _earliest(self._oldest, dated)
        self._oldest_unheld = _earliest(self._oldest_unheld, dated)


def _earliest(first: datetime | None, second: datetime | None) -> datetime | None:
    if first is None:
        return second
    if second is None:
        return first
    return min(first, second)


def _timestamp(item: Mapping[str, Any]) -> datetime | None:
    try:
        return parse_timestamp(str(item["occurred_at"]["S"]))
    except (KeyError, TypeError, ValueError):
        return None


def _number(item: Mapping[str, Any], name: str) -> float | None:
    try:
        return float(item[name]["N"])
    except (KeyError, TypeError, ValueError):
        return None
