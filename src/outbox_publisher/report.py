"""What a publishing run did: one outcome per candidate, where it stopped, and how its rows were updated."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import NamedTuple

from outbox.clock import parse_timestamp
from outbox_publisher.candidates import Candidate
from outbox_publisher.poison import PoisonReason
from outbox_publisher.routing import Destination
from outbox_publisher.row_updates import RowUpdatesReport


class Status(StrEnum):
    PUBLISHED = "published"
    """Out on every destination of its route: its row is settled (deleted)."""
    POISONED = "poisoned"
    HELD = "held"
    """The order gate kept it back (its code says why): left PENDING, done for this run."""
    UNDELIVERED = "undelivered"
    """A destination did not take it, for a transient reason that outlasted the retries (its code says which):
    left PENDING for the sweeper, with the destinations that did take it recorded. Done for this run."""
    NOT_ATTEMPTED = "not_attempted"
    """Not tried: the run stopped before it (no time left, the gate could not read): handed back."""


class EventOutcome(NamedTuple):
    """How one candidate fared in a run."""

    candidate: Candidate
    status: Status
    attempts: int = 0
    code: str | None = None
    detail: str | None = None
    published_at: datetime | None = None
    delivered_to: tuple[Destination, ...] = ()
    """The destinations that took it in this run."""
    poison_reason: PoisonReason | None = None
    """POISONED only: why."""
    tried: bool = True
    """UNDELIVERED only: False when the destinations that did not take it were never tried (no time was left,
    or its stored envelope could not be read): nothing failed, so the sweeper does not count it against the
    row."""
    envelope_unavailable: bool = False
    """UNDELIVERED only: its stored envelope could not be read (its code says why): the sweeper records the
    reason and waits before the next try, without counting it against the row."""

    @property
    def done(self) -> bool:
        """Nothing is left to do for it in this run: published, poisoned, held or undelivered."""
        return self.status is not Status.NOT_ATTEMPTED

    @property
    def delivered_so_far(self) -> frozenset[str]:
        """Every destination that has taken the event: those its row recorded, and this run's."""
        return self.candidate.delivered_to | {destination.value for destination in self.delivered_to}

    @property
    def latency_ms(self) -> float | None:
        """occurred_at to published, for PublishLatencyMs."""
        if self.published_at is None or self.candidate.event is None:
            return None
        occurred = parse_timestamp(self.candidate.event.occurred_at)
        return (self.published_at - occurred).total_seconds() * 1000


class PublishReport:
    """What a run did."""

    __slots__ = ("calls", "gate_reads", "outcomes", "rows", "stopped_at")

    def __init__(
        self,
        outcomes: list[EventOutcome],
        stopped_at: int | None,
        rows: RowUpdatesReport,
        calls: int = 0,
        gate_reads: int = 0,
    ) -> None:
        self.outcomes = outcomes
        """One per candidate, in input order."""
        self.stopped_at = stopped_at
        """Index of the candidate the run stopped at (no time left, the gate could not read); None if it did
        not stop."""
        self.rows = rows
        """How the run's settles and FAILED marks went."""
        self.calls = calls
        """Publish calls (SNS, EventBridge)."""
        self.gate_reads = gate_reads
        """Reads of predecessors' states the order gate made."""

    @property
    def first_not_done(self) -> int | None:
        """Index of the first candidate, in input order, that is not done (not attempted)."""
        return next((index for index, outcome in enumerate(self.outcomes) if not outcome.done), None)

    @property
    def retry(self) -> list[EventOutcome]:
        """What a stream hands back: the first candidate not done and every later one (some may be out:
        unless this process remembers settling them, they are published again, the at-least-once
        duplicate)."""
        first = self.first_not_done
        return [] if first is None else self.outcomes[first:]

    def count(self, status: Status) -> int:
        return sum(1 for outcome in self.outcomes if outcome.status is status)

    @property
    def contract_breaks(self) -> int:
        """Rows poisoned because another writer broke the row contract (outbox_publisher.writer_contract)."""
        return sum(1 for outcome in self.outcomes if outcome.poison_reason is PoisonReason.WRITER_CONTRACT)
