"""What a publishing run writes to the rows it published, poisoned or could not finish, apart from how it is
written (outbox_publisher.dynamodb_rows writes it to DynamoDB).

- `Settle`: the event is out on every destination of its route: its row leaves the table (a delete).
- `MarkFailed`: the event is poison: the row becomes FAILED, kept for an operator.
- `Park`: some destinations accepted the event and another did not (yet): the row stays PENDING and records
  which accepted it (`delivered_to`), so no path sends it to them again. Written only on that partial path.

Each is conditional on the row being the one the run published: still PENDING, the same `event_id` (a slot
another writer rewrote meanwhile is left alone) and the same `generation` (a row an operator redrove since is
left alone); a FAILED mark or a park of a row the run claimed also requires the run's lease.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from outbox.model import RowKey
from outbox_publisher.deadline import Deadline

Generation = Mapping[str, Any] | None
"""A row's `generation` attribute exactly as stored, None when it has none (0 redrives): compared as it is, so
an update still finds a row whose value the outbox cannot read."""


class Settle(NamedTuple):
    key: RowKey
    event_id: str | None
    """The row's `event_id` as the run read it: None only for a row it could not read (never settled)."""
    generation: Generation = None
    """The row's `generation` as the run read it, as stored (outbox.generation.stored_generation)."""


class MarkFailed(NamedTuple):
    key: RowKey
    error: str
    """A reason and an error code only: it is stored as `last_error`, so never payload data."""
    attempts: int
    failed_at: datetime
    lease_owner: str | None = None
    """Set when the run claimed the row: only that lease's owner may mark it."""
    release_reason: str | None = None
    """Set when the aggregate's later events may go on past this one (its route continues past poison)."""
    generation: Generation = None
    event_id: str | None = None
    delivered_to: frozenset[str] = frozenset()
    """Destinations that accepted the event before another refused it: kept on the row for a redrive."""


class Park(NamedTuple):
    key: RowKey
    event_id: str | None
    generation: Generation
    delivered_to: frozenset[str]
    """Every destination that has accepted the event so far (added to what the row holds)."""
    error: str
    """Why the others did not: a destination and an error code, stored as `last_error`."""
    lease_owner: str | None = None
    """Set when the run claimed the row: the park also drops the lease."""


RowUpdate = Settle | MarkFailed | Park


class RowUpdatesReport:
    """What an updater did."""

    __slots__ = ("already_moved", "calls", "done", "failed")

    def __init__(self) -> None:
        self.done: list[RowKey] = []
        self.already_moved: list[RowKey] = []
        """Rows whose condition did not hold (settled, failed, redriven or rewritten by someone else since the
        run read them): not an error."""
        self.failed: dict[RowKey, str] = {}
        """Rows DynamoDB did not update (throttled, no answer, no time left): left as they were, PENDING for
        the sweeper, by error name."""
        self.calls = 0

    def add(self, other: RowUpdatesReport) -> None:
        self.done.extend(other.done)
        self.already_moved.extend(other.already_moved)
        self.failed.update(other.failed)
        self.calls += other.calls


class RowUpdater(Protocol):
    """Port: writes row updates; never raises for a row it could not update (it reports it instead)."""

    def apply(self, updates: Sequence[RowUpdate], deadline: Deadline | None = None) -> RowUpdatesReport: ...
