"""The inbox: an event's effect and the record that it was applied, committed in one transaction.

For each event a consumer applies, one TransactWriteItems holds:
- the processed-event record (`{consumer}#event#{event_id}`), put only if absent: a second delivery of the
  same event cancels the transaction, so its effect is never applied twice;
- the aggregate's last applied `seq` (`{consumer}#aggregate#{aggregate_key}`), updated only if the event
  is the next one the ordering mode allows;
- the effect's own writes, which the consumer's `Effect` adds.

Either all of it commits or none of it does: a crash or a cancelled condition between "effect written" and
"event recorded" cannot happen. Which event is "next" is the consumer's choice (`Ordering`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Final, Protocol

from outbox.clock import Clock, format_timestamp, utc_now
from outbox.errors import ConditionFailedError, ConfigurationError
from outbox.limits import Item
from outbox.transaction import TableKeys, Transaction, TransactionExecutor
from outbox_inbox.envelope import Envelope

PARTITION_KEY: Final = "pk"
TTL_ATTRIBUTE: Final = "expires_at"
LAST_SEQ: Final = "last_seq"
SKIPPED_SEQS: Final = "skipped_seqs"
"""A number set, on an aggregate's inbox record: the seqs applying past a gap skipped (`GapTimeout.APPLY`)."""
MAX_SKIPPED_SEQS: Final = 1_000
"""A wider gap is not skipped (the record would grow towards the item size limit): it is dead-lettered."""
DEFAULT_DEDUPE_WINDOW_S: Final = 7 * 24 * 3600
DEFAULT_MAX_GAP_WAIT_S: Final = 15 * 60


class Ordering(StrEnum):
    """How a consumer orders an aggregate's events (docs/inbox.md)."""

    STRICT = "strict"
    """Every event of the aggregate, each exactly after its predecessor: a later one waits for a missing one.
    Only right for a consumer that receives every event of the aggregate (no event_type filter)."""
    LATEST = "latest"
    """State projections: apply an event only if its seq is above the last applied; older ones are stale.
    Right behind a filter, where gaps are by design."""
    UNORDERED = "unordered"
    """Deduplicate by event_id only."""


class GapTimeout(StrEnum):
    """What happens to an event still waiting for its predecessor when the consumer's wait is over."""

    DEAD_LETTER = "dead-letter"
    """To the consumer's dead-letter queue, with the reason (default): an operator decides."""
    APPLY = "apply"
    """Applied anyway; the skipped seqs are recorded on the aggregate's inbox record (`skipped_seqs`), so one
    that arrives later is told apart from a duplicate (`SKIPPED_LATE`) instead of being dropped as one."""


class Outcome(StrEnum):
    APPLIED = "applied"
    APPLIED_WITH_GAP = "applied_with_gap"
    DUPLICATE = "duplicate"
    """Seen before (its event_id, or a seq at or below the last applied): acknowledged, no effect."""
    STALE = "stale"
    """`latest` mode: an older seq than the last applied: acknowledged, no effect."""
    GAP = "gap"
    """`strict` mode: a seq above the next one: not applied, waits."""
    SKIPPED_LATE = "skipped_late"
    """A seq the consumer skipped (`GapTimeout.APPLY`) that arrived after all: not applied, dead-lettered."""
    EVENT_ID_REUSED = "event_id_reused"
    """Its event_id was applied for another aggregate or seq: another writer broke the row contract. Not
    applied (it is not a duplicate), dead-lettered."""
    SLOT_REWRITTEN = "slot_rewritten"
    """Its seq is the last applied, but under another event_id: another writer rewrote the slot. Not
    applied (it is not a duplicate), dead-lettered."""
    DEAD_LETTERED = "dead_lettered"


@dataclass(frozen=True, slots=True)
class Result:
    outcome: Outcome
    last_applied: int | None = None
    """The aggregate's last applied seq as the inbox saw it (for duplicates, stale events and gaps)."""


@dataclass(frozen=True, slots=True)
class InboxSettings:
    table_name: str
    consumer: str
    """Names this consumer's records: consumers may share one inbox table."""
    ordering: Ordering = Ordering.STRICT
    dedupe_window_s: int = DEFAULT_DEDUPE_WINDOW_S
    """How long processed-event records are kept (TTL); ordered modes still refuse later duplicates by seq."""

    def __post_init__(self) -> None:
        if not self.table_name or not self.consumer:
            raise ConfigurationError("the inbox needs a table name and a consumer name")
        if "#" in self.consumer:
            raise ConfigurationError("the consumer name may not contain '#' (it prefixes the inbox keys)")
        if self.dedupe_window_s <= 0:
            raise ConfigurationError("the dedupe window must be positive")


Effect = Callable[[Envelope, Transaction], None]
"""Adds the DynamoDB writes of an event's effect to the transaction that records the event (at most 98)."""


def no_effect(_envelope: Envelope, _transaction: Transaction) -> None:
    """For events a consumer only records (external effects, events it ignores)."""


class InboxReader(Protocol):
    """Port: strongly consistent reads of the inbox's own records."""

    def get(self, table_name: str, key: Item) -> Item | None: ...


class _AlreadyProcessedError(ConditionFailedError):
    def __init__(self, action: str, *, index: int, record: Item | None) -> None:
        super().__init__(action, index=index)
        self.record = record


class _NotNextError(ConditionFailedError):
    def __init__(self, action: str, *, index: int, record: Item | None) -> None:
        super().__init__(action, index=index)
        self.record = record


class Inbox:
    def __init__(
        self,
        settings: InboxSettings,
        executor: TransactionExecutor,
        reader: InboxReader,
        *,
        clock: Clock = utc_now,
    ) -> None:
        self.settings = settings
        self._executor = executor
        self._reader = reader
        self._clock = clock
        self._table = TableKeys(settings.table_name, PARTITION_KEY)

    def apply(self, envelope: Envelope, effect: Effect, *, skip_after: int | None = None) -> Result:
        """Commit the effect with the inbox records, or say why not. Raises what the transaction raises
        otherwise (the effect's own conditions, throttling): nothing of it was written.

        `skip_after` (strict mode, once a gap has waited long enough): apply the event although the seqs
        after `skip_after` (the last applied, as a GAP result said) are missing, and record them as skipped.
        """
        now = self._clock()
        transaction = Transaction()
        self._record_event(transaction, envelope, now)
        if self.settings.ordering is not Ordering.UNORDERED:
            self._advance_aggregate(transaction, envelope, now, skip_after=skip_after)
        effect(envelope, transaction)
        try:
            self._executor.execute(transaction)
        except _AlreadyProcessedError as refused:
            return _seen(envelope, refused.record)
        except _NotNextError as refused:
            return self._refusal(envelope, refused.record)
        if skip_after is not None and skip_after < envelope.seq - 1:
            return Result(Outcome.APPLIED_WITH_GAP, skip_after)
        return Result(Outcome.APPLIED)

    def check(self, envelope: Envelope, *, skip_after: int | None = None) -> Result | None:
        """What `apply` would answer if it could not apply the event now, from two consistent reads; None
        when it would apply it. For effects outside DynamoDB, which must not start for a refused event."""
        processed = self._reader.get(self._table.table_name, self._event_key(envelope))
        if processed is not None:
            return _seen(envelope, processed)
        if self.settings.ordering is Ordering.UNORDERED:
            return None
        record = self._reader.get(self._table.table_name, self._aggregate_key(envelope))
        last_applied = _last_applied(record)
        if self.settings.ordering is Ordering.LATEST:
            next_allowed = last_applied < envelope.seq
        else:
            next_allowed = last_applied == _expected(envelope, skip_after)
        return None if next_allowed else self._refusal(envelope, record)

    def _refusal(self, envelope: Envelope, record: Item | None) -> Result:
        last_applied = _last_applied(record)
        if str(envelope.seq) in (record or {}).get(SKIPPED_SEQS, {}).get("NS", ()):
            return Result(Outcome.SKIPPED_LATE, last_applied)
        if envelope.seq == last_applied and (record or {}).get("last_event_id") not in (
            None,
            {"S": envelope.event_id},
        ):
            return Result(Outcome.SLOT_REWRITTEN, last_applied)
        if envelope.seq <= last_applied:
            stale = self.settings.ordering is Ordering.LATEST and envelope.seq < last_applied
            return Result(Outcome.STALE if stale else Outcome.DUPLICATE, last_applied)
        return Result(Outcome.GAP, last_applied)

    def _event_key(self, envelope: Envelope) -> Item:
        return {PARTITION_KEY: {"S": f"{self.settings.consumer}#event#{envelope.event_id}"}}

    def _aggregate_key(self, envelope: Envelope) -> Item:
        return {PARTITION_KEY: {"S": f"{self.settings.consumer}#aggregate#{envelope.aggregate_key}"}}

    def _record_event(self, transaction: Transaction, envelope: Envelope, now: datetime) -> None:
        transaction.put(
            self._table,
            {
                **self._event_key(envelope),
                "kind": {"S": "event"},
                "aggregate_key": {"S": envelope.aggregate_key},
                "seq": {"N": str(envelope.seq)},
                "event_type": {"S": envelope.event_type},
                "applied_at": {"S": format_timestamp(now)},
                TTL_ATTRIBUTE: {"N": str(int(now.timestamp()) + self.settings.dedupe_window_s)},
            },
            label="inbox event record",
            condition="attribute_not_exists(#pk)",
            names={"#pk": PARTITION_KEY},
            on_condition_failed=lambda label, index, old: _AlreadyProcessedError(
                label, index=index, record=old
            ),
        )

    def _advance_aggregate(
        self, transaction: Transaction, envelope: Envelope, now: datetime, *, skip_after: int | None
    ) -> None:
        names = {"#last": LAST_SEQ, "#event": "last_event_id", "#at": "updated_at", "#kind": "kind"}
        values: dict[str, Any] = {
            ":seq": {"N": str(envelope.seq)},
            ":event": {"S": envelope.event_id},
            ":at": {"S": format_timestamp(now)},
            ":kind": {"S": "aggregate"},
        }
        update = "SET #last = :seq, #event = :event, #at = :at, #kind = :kind"
        expected = _expected(envelope, skip_after)
        if self.settings.ordering is Ordering.LATEST:
            condition = "attribute_not_exists(#last) OR #last < :seq"
        elif expected == 0:
            condition = "attribute_not_exists(#last)"
        else:
            # Exactly the predecessor (or, skipping, the last applied the gap was measured from): an event
            # that arrived meanwhile makes this fail and the event is judged again.
            condition = "#last = :expected"
            values[":expected"] = {"N": str(expected)}
        if expected < envelope.seq - 1:
            # Every skipped seq, not just the last range: one that arrives later must be recognised.
            names["#skipped"] = SKIPPED_SEQS
            values[":skipped"] = {"NS": [str(seq) for seq in range(expected + 1, envelope.seq)]}
            update = f"{update} ADD #skipped :skipped"
        transaction.update(
            self._table,
            self._aggregate_key(envelope),
            update,
            label="inbox aggregate record",
            condition=condition,
            names=names,
            values=values,
            on_condition_failed=lambda label, index, old: _NotNextError(label, index=index, record=old),
        )


def _seen(envelope: Envelope, processed: Item | None) -> Result:
    """A duplicate, unless the processed record under its event_id is another event's."""
    if processed is not None and (
        processed.get("aggregate_key") != {"S": envelope.aggregate_key}
        or processed.get("seq") != {"N": str(envelope.seq)}
    ):
        return Result(Outcome.EVENT_ID_REUSED)
    return Result(Outcome.DUPLICATE)


def _expected(envelope: Envelope, skip_after: int | None) -> int:
    """The last applied seq the aggregate must be at for the event to apply (strict mode)."""
    if skip_after is None or not 0 <= skip_after < envelope.seq - 1:
        return envelope.seq - 1
    return skip_after


def _last_applied(record: Item | None) -> int:
    if not record or LAST_SEQ not in record:
        return 0
    return int(record[LAST_SEQ]["N"])
