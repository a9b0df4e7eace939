"""What marking a row means, apart from how it is written: the marks (PUBLISHED, FAILED, a deleted row
restored FAILED), what a marker reports, and the marker's port. outbox.marking writes them to DynamoDB."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from outbox.deadline import Deadline
from outbox.model import (
    FAILED_INDEX_PARTITION_KEY,
    LEASE_OWNER,
    LEASE_UNTIL,
    NEXT_ATTEMPT_AT,
    PARTITION_KEY,
    PENDING_INDEX_PARTITION_KEY,
    SORT_KEY,
    TTL_ATTRIBUTE,
    RowKey,
)


@dataclass(frozen=True, slots=True)
class PublishedMark:
    key: RowKey
    published_at: datetime
    attempts: int
    lease_owner: str | None = None
    """Set when the row was claimed: only that lease's owner may mark it."""
    generation: int = 0
    """The row's `generation` as the caller read it (outbox.model.generation_of)."""
    event_id: str | None = None
    """The row's `event_id` as the caller read it: a slot another writer rewrote meanwhile is not marked."""
    attempts_stored: bool = True
    """Whether the row as the caller read it holds `attempts` (a writer may leave it out): the statement adds
    to it, or sets it."""


@dataclass(frozen=True, slots=True)
class FailedMark:
    key: RowKey
    error: str
    """A reason and an error code only: it is stored as `last_error`, so never payload data."""
    attempts: int
    failed_at: datetime
    lease_owner: str | None = None
    release_reason: str | None = None
    """Set when the aggregate's later events may go on past this one (its route continues past poison)."""
    generation: int = 0
    event_id: str | None = None
    attempts_stored: bool = True
    first_released_stored: bool = False
    """Whether the row as the caller read it holds `first_released_at` (kept through redrives): a releasing
    statement sets it only when it was absent, and requires what was read."""


@dataclass(frozen=True, slots=True)
class RestoredMark:
    """A PENDING row another writer deleted, written back FAILED from its last image (the stream's), unless
    its slot was written again meanwhile. UpdateItem creates the item: no PutItem permission is needed."""

    key: RowKey
    image: Mapping[str, Any]
    error: str
    failed_at: datetime
    attempts: int = 0


Mark = PublishedMark | FailedMark | RestoredMark
# What a restored row does not take back from its image: what only a PENDING row carries, and the status.
NOT_RESTORED = frozenset(
    {
        PARTITION_KEY,
        SORT_KEY,
        "status",
        PENDING_INDEX_PARTITION_KEY,
        LEASE_OWNER,
        LEASE_UNTIL,
        NEXT_ATTEMPT_AT,
    }
    | {TTL_ATTRIBUTE, "published_at", "last_error", "failed_at", FAILED_INDEX_PARTITION_KEY}
)


@dataclass(slots=True)
class MarkingReport:
    marked: list[RowKey] = field(default_factory=list)
    already_moved: list[RowKey] = field(default_factory=list)
    """Rows that were no longer PENDING (someone else moved them on): not an error."""
    failed: dict[RowKey, str] = field(default_factory=dict)
    """Rows left PENDING because DynamoDB refused or did not answer: the sweeper reconciles them."""
    calls: int = 0
    fallbacks: int = 0
    """Rows marked with UpdateItem because DynamoDB refused the PartiQL form (the handlers' metric
    MarkingFallbacks: any datum means the statement needs a look)."""


class RowMarker(Protocol):
    """Port: marks rows, never raises for a row it could not mark (it reports it instead)."""

    def mark(self, marks: Sequence[Mark], deadline: Deadline | None = None) -> MarkingReport: ...
