"""Appends outbox rows to a caller's transaction, so they commit with the business change."""

from __future__ import annotations

from typing import TYPE_CHECKING

from outbox.errors import DuplicateEventError, InvalidEventError
from outbox.limits import Item
from outbox.model import PARTITION_KEY, OutboxEvent, OutboxStatus, outbox_table
from outbox.transaction import Transaction

if TYPE_CHECKING:
    from outbox.schemas import SchemaRegistry


class OutboxWriter:
    """Adds each event as a conditional Put on the outbox table.

    The condition `attribute_not_exists(aggregate_key)` makes a (aggregate_key, seq) slot
    writable once: two writers that both computed the same next seq cannot both commit, so
    `seq` stays gap-free and unique per aggregate.
    """

    def __init__(self, table_name: str, *, schemas: SchemaRegistry | None = None) -> None:
        self.table = outbox_table(table_name)
        # Schemas: every event is checked against its (event_type, schema_version) schema before any of
        # them joins the transaction, so a refused payload leaves the transaction as it was.
        self.schemas = schemas

    def append(self, transaction: Transaction, *events: OutboxEvent) -> None:
        if self.schemas is not None:
            for event in events:
                self.schemas.check_json(event.event_type, event.schema_version, event.payload_json)
        for event in events:
            if event.status is not OutboxStatus.PENDING:
                raise InvalidEventError("only PENDING events can be written to the outbox", field="status")
            transaction.put(
                self.table,
                event.to_item(),
                label=f"outbox {event.event_type} seq {event.seq}",
                condition=f"attribute_not_exists({PARTITION_KEY})",
                on_condition_failed=_duplicate_event,
            )


def _duplicate_event(label: str, index: int, _old: Item | None) -> DuplicateEventError:
    return DuplicateEventError(label, index=index)
