"""What a publishing engine is fed: outbox rows, as the caller (stream or sweeper) found them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from outbox.errors import InvalidOutboxRowError
from outbox.generation import stored_generation
from outbox.model import DELIVERED_TO, OutboxEvent, RowKey, string_attribute
from outbox_publisher.leases import Lease
from outbox_publisher.poison import NO_SOURCE, PoisonReason, Rejection
from outbox_publisher.predecessors import PredecessorState


class Candidate(NamedTuple):
    """One outbox row to publish, as the caller found it."""

    ref: str
    """The caller's identifier (a stream SequenceNumber; a sweeper's own key). Returned, never interpreted."""
    row: Mapping[str, Any]
    """The row as stored (DynamoDB low-level JSON): what the poison queue receives."""
    key: RowKey | None
    event: OutboxEvent | None
    rejection: Rejection | None = None
    source: Mapping[str, str] = NO_SOURCE
    """Where the row came from (stream ARN, sequence number...), for the poison message."""
    lease: Lease | None = None
    """Held by the caller (outbox_publisher.leases): the row is marked only under it."""
    predecessor: PredecessorState | None = None
    """The state of event `seq - 1`, when the caller already read it: the gate does not read it again."""
    last_chance: bool = False
    """The sweeper's cutoff: a transient failure now makes the event poison instead of a retry."""
    replaced: Mapping[str, Any] | None = None
    """The row this one replaced in its slot, breaking the writer contract (outbox_publisher.writer_contract):
    the poison queue receives it too."""

    @property
    def delivered_to(self) -> frozenset[str]:
        """The destinations that already accepted the event, as its row records them (`delivered_to`)."""
        stored = self.row.get(DELIVERED_TO)
        names = stored.get("SS") if isinstance(stored, Mapping) else None
        if not isinstance(names, list):
            return frozenset()
        return frozenset(name for name in names if isinstance(name, str))

    @property
    def generation(self) -> Mapping[str, Any] | None:
        """The row's `generation` as stored (`stored_generation`): what its updates compare."""
        return stored_generation(self.row)

    @property
    def event_id(self) -> str | None:
        """The row's `event_id`, read or not (an unreadable row may still hold one)."""
        return self.event.event_id if self.event is not None else string_attribute(self.row, "event_id")

    def but(self, **changes: Any) -> Candidate:
        return self._replace(**changes)

    @classmethod
    def from_row(
        cls,
        ref: str,
        row: Mapping[str, Any],
        *,
        keys: Mapping[str, Any] | None = None,
        source: Mapping[str, str] | None = None,
    ) -> Candidate:
        key = RowKey.of(keys if keys is not None else row)
        try:
            event = OutboxEvent.from_item(row)
        except InvalidOutboxRowError as error:
            code = "InvalidPayload" if error.field == "payload" else "InvalidOutboxRow"
            rejection = Rejection(PoisonReason.INVALID_ROW, code, str(error))
            return cls(ref, row, key, None, rejection, dict(source or {}))
        return cls(ref, row, key, event, None, dict(source or {}))

    @classmethod
    def rejected(
        cls,
        ref: str,
        row: Mapping[str, Any],
        rejection: Rejection,
        *,
        keys: Mapping[str, Any] | None = None,
        source: Mapping[str, str] | None = None,
    ) -> Candidate:
        return cls(
            ref, row, RowKey.of(keys if keys is not None else row), None, rejection, dict(source or {})
        )
