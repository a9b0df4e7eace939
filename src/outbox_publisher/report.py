"""What a publishing run did: one outcome per candidate, where it stopped, and how marking went."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from outbox.clock import parse_timestamp
from outbox.marking import MarkingReport
from outbox_publisher.candidates import Candidate
from outbox_publisher.routing import Destination


class Status(StrEnum):
    PUBLISHED = "published"
    POISONED = "poisoned"
    FAILED = "failed"
    """Transient failure that outlasted the retries: where the engine stopped."""
    NOT_ATTEMPTED = "not_attempted"
    """After the stop: not (fully) published, handed back."""


@dataclass(frozen=True, slots=True)
class EventOutcome:
    candidate: Candidate
    status: Status
    attempts: int = 0
    code: str | None = None
    detail: str | None = None
    published_at: datetime | None = None
    delivered_to: tuple[Destination, ...] = ()

    @property
    def latency_ms(self) -> float | None:
        """occurred_at to published, for PublishLatencyMs."""
        if self.published_at is None or self.candidate.event is None:
            return None
        occurred = parse_timestamp(self.candidate.event.occurred_at)
        return (self.published_at - occurred).total_seconds() * 1000


@dataclass(slots=True)
class PublishReport:
    outcomes: list[EventOutcome]
    """One per candidate, in input order."""
    stopped_at: int | None
    """Index of the first candidate that was not done; it and every later one must be retried."""
    marking: MarkingReport
    calls: int = 0

    @property
    def retry(self) -> list[EventOutcome]:
        return [] if self.stopped_at is None else self.outcomes[self.stopped_at :]

    def count(self, status: Status) -> int:
        return sum(1 for outcome in self.outcomes if outcome.status is status)
