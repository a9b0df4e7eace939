"""Appends outbox rows to a caller's transaction, so they commit with the business change."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from outbox.errors import ConfigurationError, DuplicateEventError, InvalidEventError
from outbox.event_rules import is_region_name
from outbox.limits import Item
from outbox.model import PARTITION_KEY, OutboxEvent, OutboxStatus, outbox_table
from outbox.offloading import Offloader
from outbox.payload_refs import DEFAULT_OFFLOAD_THRESHOLD_BYTES
from outbox.payload_store import PayloadStore
from outbox.trace_context import TraceContext, active_trace_context
from outbox.transaction import Transaction

if TYPE_CHECKING:
    from outbox.schemas import SchemaRegistry


class OutboxWriter:
    """Adds each event as a conditional Put on the outbox table.

    The condition `attribute_not_exists(aggregate_key)` makes a (aggregate_key, seq) slot
    writable once: two writers that both computed the same next seq cannot both commit, so
    `seq` stays gap-free and unique per aggregate.

    Each row carries the trace context active when it is appended (docs/publisher.md, "Tracing"): an event
    built with a `trace` of its own keeps it; the others get `trace_context()`'s, which by default reads the
    Lambda invocation's X-Ray header and the current OpenTelemetry span (`outbox.trace_context`). Pass
    `trace_context=lambda: TraceContext.given(traceparent=...)` to take a caller's header instead, or
    `lambda: NO_TRACE` to save none.

    On an outbox that spans regions (DynamoDB global tables, docs/multi-region.md), `origin` is the region
    this writer saves in: each row carries it (`origin`), so that region's publisher announces it and another
    region takes it over only if that region is lost. `outbox.region_settings.writer_origin(os.environ)`
    reads it from `OUTBOX_ORIGIN`, which the construct's `writer_environment` sets. Without it, rows belong
    to the home region.
    """

    def __init__(
        self,
        table_name: str,
        *,
        schemas: SchemaRegistry | None = None,
        trace_context: Callable[[], TraceContext] = active_trace_context,
        payload_store: PayloadStore | None = None,
        offload_above_bytes: int = DEFAULT_OFFLOAD_THRESHOLD_BYTES,
        origin: str | None = None,
    ) -> None:
        """`payload_store`: where envelopes larger than `offload_above_bytes` are kept (outbox.offloading),
        up to outbox.payload_refs.MAX_STORED_ENVELOPE_BYTES; without one, every row holds its payload and is
        limited by DynamoDB's 400 KB item size."""
        self.table = outbox_table(table_name)
        if origin is not None and not (isinstance(origin, str) and is_region_name(origin)):
            raise ConfigurationError(f"origin must be an AWS region's name like us-east-1, got {origin!r}")
        self.origin = origin
        # Schemas: every event is checked against its (event_type, schema_version) schema before any of
        # them joins the transaction (and before any envelope is stored), so a refused payload leaves the
        # transaction as it was and stores nothing.
        self.schemas = schemas
        self._trace_context = trace_context
        self._offloader = (
            Offloader(payload_store, threshold_bytes=offload_above_bytes)
            if payload_store is not None
            else None
        )

    def append(self, transaction: Transaction, *events: OutboxEvent) -> None:
        """Adds one conditional Put per event, all or none: every event is checked first (status, schema,
        trace context, an envelope within the store's maximum), then each envelope too large for its row is
        stored, then the rows join the transaction together. A failure after an envelope was stored (the
        store, or the transaction refusing a row: a slot twice, over its limits) leaves the transaction as it
        was, and the stored envelopes unnamed by any row, for the bucket's lifecycle rule to delete
        (docs/contracts.md, "Claim checks")."""
        for event in events:
            if event.status is not OutboxStatus.PENDING:
                raise InvalidEventError("only PENDING events can be written to the outbox", field="status")
        if self.schemas is not None:
            for event in events:
                self.schemas.check_json(event.event_type, event.schema_version, event.payload_json)
        # Checked as an explicit context is: a malformed one is refused with nothing added.
        active = TraceContext.given(*self._trace_context()) if any(not e.trace for e in events) else None
        # The trace on the event itself, so that an envelope kept in the payload store carries it too.
        traced = [replace(e, trace=active) if active is not None and not e.trace else e for e in events]
        if self.origin is not None:
            traced = [e if e.origin is not None else replace(e, origin=self.origin) for e in traced]
        if self._offloader is not None:
            for event in traced:
                self._offloader.check(event)
        rows = [e.to_item() if self._offloader is None else self._offloader.row_of(e) for e in traced]
        with transaction.all_or_nothing():
            for event, item in zip(traced, rows, strict=True):
                transaction.put(
                    self.table,
                    item,
                    label=f"outbox {event.event_type} seq {event.seq}",
                    condition=f"attribute_not_exists({PARTITION_KEY})",
                    on_condition_failed=_duplicate_event,
                )


def _duplicate_event(label: str, index: int, _old: Item | None) -> DuplicateEventError:
    return DuplicateEventError(label, index=index)
