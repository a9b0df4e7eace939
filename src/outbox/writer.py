"""Appends outbox rows to a caller's transaction, so they commit with the business change."""

from __future__ import annotations

from outbox.errors import DuplicateEventError, InvalidEventError
from outbox.limits import Item
from outbox.model import PARTITION_KEY, OutboxEvent, OutboxStatus, outbox_table
from outbox.offloading import Offloader
from outbox.payload_refs import DEFAULT_OFFLOAD_THRESHOLD_BYTES
from outbox.payload_store import PayloadStore
from outbox.transaction import Transaction


class OutboxWriter:
    """Adds each event as a conditional Put on the outbox table.

    The condition `attribute_not_exists(aggregate_key)` makes a (aggregate_key, seq) slot
    writable once: two writers that both computed the same next seq cannot both commit, so
    `seq` stays gap-free and unique per aggregate.
    """

    def __init__(
        self,
        table_name: str,
        *,
        payload_store: PayloadStore | None = None,
        offload_above_bytes: int = DEFAULT_OFFLOAD_THRESHOLD_BYTES,
    ) -> None:
        """`payload_store`: where envelopes larger than `offload_above_bytes` are kept (outbox.offloading),
        up to outbox.payload_refs.MAX_STORED_ENVELOPE_BYTES; without one, every row holds its payload and is
        limited by DynamoDB's 400 KB item size."""
        self.table = outbox_table(table_name)
        self._offloader = (
            Offloader(payload_store, threshold_bytes=offload_above_bytes)
            if payload_store is not None
            else None
        )

    def append(self, transaction: Transaction, *events: OutboxEvent) -> None:
        for event in events:
            if event.status is not OutboxStatus.PENDING:
                raise InvalidEventError("only PENDING events can be written to the outbox", field="status")
            transaction.put(
                self.table,
                event.to_item() if self._offloader is None else self._offloader.row_of(event),
                label=f"outbox {event.event_type} seq {event.seq}",
                condition=f"attribute_not_exists({PARTITION_KEY})",
                on_condition_failed=_duplicate_event,
            )


def _duplicate_event(label: str, index: int, _old: Item | None) -> DuplicateEventError:
    return DuplicateEventError(label, index=index)
