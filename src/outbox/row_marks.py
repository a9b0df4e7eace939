"""What marking a row means, apart from how it is written: the marks (PUBLISHED, FAILED, a deleted row
restored FAILED), what a marker reports, and the marker's port. outbox.marking writes them to DynamoDB."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple, Protocol

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


# The marks are NamedTuples, as the publisher's per-event records: immutable, and the cheapest to define at a
# cold start and to build per row.
class PublishedMark(NamedTuple):
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


class FailedMark(NamedTuple):
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


class RestoredMark(NamedTuple):
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


class MarkingReport:
    """What a marker did. A plain class, not a dataclass: it is only filled in and read, and a dataclass would
    cost every handler's cold start its generated methods (docs/BENCHMARKS.md, "Cold start")."""

    __slots__ = ("already_moved", "calls", "failed", "fallbacks", "marked")

    def __init__(
        self,
        marked: list[RowKey] | None = None,
        already_moved: list[RowKey] | None = None,
        failed: dict[RowKey, str] | None = None,
        calls: int = 0,
        fallbacks: int = 0,
    ) -> None:
        self.marked: list[RowKey] = [] if marked is None else marked
        self.already_moved: list[RowKey] = [] if already_moved is None else already_moved
        """Rows that were no longer PENDING (someone else moved them on): not an error."""
        self.failed: dict[RowKey, str] = {} if failed is None else failed
        """Rows left PENDING because DynamoDB refused or did not answer: the sweeper reconciles them."""
        self.calls = calls
        self.fallbacks = fallbacks
        """Rows marked with UpdateItem because DynamoDB refused the PartiQL form (the handlers' metric
        MarkingFallbacks: any datum means the statement needs a look)."""


class RowMarker(Protocol):
    """Port: marks rows, never raises for a row it could not mark (it reports it instead)."""

    def mark(self, marks: Sequence[Mark], deadline: Deadline | None = None) -> MarkingReport: ...
