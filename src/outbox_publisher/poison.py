"""Poison: an event that can never be published, why, and the message the poison queue receives for it.

The message carries the WHOLE row as stored (DynamoDB JSON), so an operator can read, fix and redrive it
without another lookup, plus the reason, the error code and what was already delivered. Nothing in it
but the row holds payload data: `detail` ends up in logs and in the row's `last_error`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

from outbox.clock import format_timestamp
from outbox.model import PARTITION_KEY, SORT_KEY, string_attribute
from outbox_publisher.routing import Destination

if TYPE_CHECKING:  # candidates.py imports this module (Rejection)
    from outbox_publisher.candidates import Candidate


class PoisonReason(StrEnum):
    INVALID_ROW = "invalid_row"
    NO_ROUTE = "no_route"
    TOO_LARGE = "too_large"
    REJECTED = "rejected"
    """A destination refused the entry for a permanent reason."""
    GAVE_UP = "gave_up"
    """Transient failures outlasted the sweeper's limit (attempts or age): kept FAILED for an operator."""
    WRITER_CONTRACT = "writer_contract"
    """Another writer broke the row contract (outbox_publisher.writer_contract): FAILED, for an operator."""
    LATE_REPLICA = "late_replica"
    """On an outbox across regions: the row replicated after the region that took its origin over published a
    later event of its aggregate (outbox_publisher.regions.TakenVerdict): FAILED (code `LateReplica`), for an
    operator to redrive or skip; its aggregate holds."""

    @property
    def marked_at_once(self) -> bool:
        """Marked FAILED at once, whatever its predecessor, and never released past: the publishing path alone
        knows why (a rewritten slot, a late replica), and nothing after it may go first."""
        return self in _MARKED_AT_ONCE


_MARKED_AT_ONCE = frozenset({PoisonReason.WRITER_CONTRACT, PoisonReason.LATE_REPLICA})
LATE_REPLICA_CODE = "LateReplica"


class Rejection(NamedTuple):
    """Why an event can never be published."""

    reason: PoisonReason
    code: str
    detail: str
    """Free of payload data: it ends up in logs and in `last_error`."""


NO_SOURCE: Mapping[str, str] = MappingProxyType({})
"""An empty `source`, immutable: a NamedTuple's default is one object, shared by every record."""


class PoisonMessage(NamedTuple):
    """What the poison queue receives: the whole row, and why it can never be published."""

    reason: PoisonReason
    error_code: str
    detail: str
    attempts: int
    row: Mapping[str, Any]
    poisoned_at: datetime
    event_id: str | None = None
    aggregate_key: str | None = None
    seq: int | None = None
    delivered_to: tuple[Destination, ...] = ()
    """Destinations that did accept it before another refused it for good."""
    source: Mapping[str, str] = NO_SOURCE
    row_omitted: str | None = None
    """Set (and `row` cut down to its keys) only when the whole row cannot fit in a queue message."""
    replaced_row: Mapping[str, Any] | None = None
    """A rewritten slot's earlier row, as the stream showed it (outbox_publisher.writer_contract)."""
    replaced_row_omitted: str | None = None

    @classmethod
    def of(
        cls,
        candidate: Candidate,
        rejection: Rejection,
        *,
        attempts: int,
        delivered_to: tuple[Destination, ...],
        poisoned_at: datetime,
    ) -> PoisonMessage:
        """The message for `candidate`, refused for `rejection`: what identifies it, even in a bad row."""
        event, key = candidate.event, candidate.key
        return cls(
            reason=rejection.reason,
            error_code=rejection.code,
            detail=rejection.detail,
            attempts=attempts,
            row=candidate.row,
            poisoned_at=poisoned_at,
            event_id=event.event_id if event else string_attribute(candidate.row, "event_id"),
            aggregate_key=key.aggregate_key if key else None,
            seq=key.seq if key else None,
            delivered_to=delivered_to,
            source=candidate.source,
            replaced_row=candidate.replaced,
        )

    def without_row(self, why: str) -> PoisonMessage:
        """The same message with only the row's keys: the row itself stays in the table (FAILED, no TTL).
        A replaced row stays: the message is its only copy."""
        keys = {name: self.row[name] for name in (PARTITION_KEY, SORT_KEY) if name in self.row}
        return self._replace(row=keys, row_omitted=why)

    def without_replaced_row(self, why: str) -> PoisonMessage:
        return self._replace(replaced_row=None, replaced_row_omitted=why)

    def to_json(self) -> str:
        document: dict[str, Any] = {
            "reason": self.reason.value,
            "error_code": self.error_code,
            "detail": self.detail,
            "attempts": self.attempts,
            "event_id": self.event_id,
            "aggregate_key": self.aggregate_key,
            "seq": self.seq,
            "delivered_to": [destination.value for destination in self.delivered_to],
            "poisoned_at": format_timestamp(self.poisoned_at),
            "source": dict(self.source),
            "row": self.row,
        }
        if self.replaced_row is not None:
            document["replaced_row"] = self.replaced_row
        if self.replaced_row_omitted is not None:
            document["replaced_row_omitted"] = self.replaced_row_omitted
        if self.row_omitted is not None:
            document["row_omitted"] = self.row_omitted
        return json.dumps(document, separators=(",", ":"), ensure_ascii=False)
