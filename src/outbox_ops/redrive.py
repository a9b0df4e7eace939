"""Redrive and skip, as an operator runs them: choose the rows, check each, act (or only say what would be
done), then remove the queue messages the action settled.

The row changes themselves are outbox_ops.release's: one transaction each, with its audit entry, the same
`event_id`. A redriven row is PENDING again; the sweeper publishes it through the publishing engine and its
order gate, then the events it held (within a sweep or two: its schedule). A skipped row leaves the table.

- Failed rows are chosen through the `failed` index (outbox_ops.failed), by event id, aggregate, event type
  or error text.
- On-failure messages are mapped back to their rows through the stream (outbox_ops.on_failure): FAILED rows
  are redriven, PENDING ones are left to the sweeper (which finds every row in the table), and rows no longer
  in the table need nothing (their events are out, or were skipped). A message is deleted only once every row
  behind it is settled.
- A dry run reads what the real run reads to decide each row, and the queues' messages it would remove
  (each handed back at once), and changes nothing: it says what the real run would do, queues included.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from outbox.errors import OutboxError
from outbox.model import OutboxStatus, RowKey, string_attribute
from outbox_ops.clients import OpsClients
from outbox_ops.errors import OperationError, RowNotFoundError
from outbox_ops.failed import FailedFilter, FailedRow, FailedRows
from outbox_ops.on_failure import DiscardedBatch, StreamRangeTrimmedError, keys_in
from outbox_ops.queues import (
    DEFAULT_MAX_MESSAGES,
    QueueMessage,
    QueueReader,
    Settled,
    poison_generation,
    poison_key,
)
from outbox_ops.release import ReleaseError, out_of_order_risk, redrive, skip
from outbox_ops.resources import OutboxResources


class Outcome(StrEnum):
    REDRIVEN = "redriven"
    WOULD_REDRIVE = "would_redrive"
    SKIPPED = "skipped"
    WOULD_SKIP = "would_skip"
    REFUSED = "refused"
    PENDING = "pending"
    """Not FAILED: still PENDING, so the sweeper publishes it; nothing to do."""
    OUT = "out"
    """No longer in the table: its event is out (or an operator skipped it); nothing to do."""
    NOT_FOUND = "not_found"
    """Asked for by event id, but no FAILED row has it."""
    ERROR = "error"
    """AWS did not let the action finish: the row is as it was; run the command again."""


@dataclass(frozen=True)
class RowResult:
    key: RowKey | None
    """None for an event id that matched no row."""
    event_id: str | None
    outcome: Outcome
    detail: str = ""
    generation: int | None = None
    """The row's generation when the command acted on it: poison messages of that life are settled."""

    def to_json(self) -> dict[str, Any]:
        return {
            "aggregate_key": self.key.aggregate_key if self.key else None,
            "seq": self.key.seq if self.key else None,
            "event_id": self.event_id,
            "outcome": self.outcome.value,
            "detail": self.detail,
        }


@dataclass
class OperationReport:
    dry_run: bool
    rows: list[RowResult] = field(default_factory=list)
    poison_messages_removed: int = 0
    on_failure_messages_removed: int = 0
    poison_messages_to_remove: int = 0
    """A dry run's: the poison messages the real run would remove (0 otherwise)."""
    on_failure_messages_to_remove: int = 0
    """A dry run's: the on-failure messages the real run would remove (0 otherwise)."""
    messages_not_removed: int = 0
    """Deletions SQS refused: those messages reappear; run the command again."""
    messages_hidden: int = 0
    """Messages SQS did not hand back at once: visible again within five minutes."""
    unmapped_batches: list[str] = field(default_factory=list)
    """On-failure messages not settled (range unreadable, another stream, AWS failed): kept, with why."""
    poison_cleanup_error: str | None = None
    """Why the poison queue could not be cleaned up (the rows' changes stand; run the command again)."""

    @property
    def complete(self) -> bool:
        """Everything asked for was done, queues included."""
        return not (
            self.refused or self.unmapped_batches or self.messages_not_removed or self.poison_cleanup_error
        )

    def deleted(self, settled: Settled) -> int:
        """Counts what SQS did not do of a queue's settling; the messages it deleted."""
        self.messages_not_removed += settled.not_deleted
        self.messages_hidden += settled.hidden
        return settled.deleted

    @property
    def refused(self) -> list[RowResult]:
        """Rows the command did not do what was asked for."""
        return [row for row in self.rows if row.outcome in _NOT_DONE]

    def to_json(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "rows": [row.to_json() for row in self.rows],
            "poison_messages_removed": self.poison_messages_removed,
            "on_failure_messages_removed": self.on_failure_messages_removed,
            "poison_messages_to_remove": self.poison_messages_to_remove,
            "on_failure_messages_to_remove": self.on_failure_messages_to_remove,
            "messages_not_removed": self.messages_not_removed,
            "messages_hidden": self.messages_hidden,
            "unmapped_batches": self.unmapped_batches,
            "poison_cleanup_error": self.poison_cleanup_error,
        }


@dataclass(frozen=True)
class Operator:
    """Who acts, why, and how."""

    actor: str
    reason: str
    dry_run: bool = False
    allow_out_of_order: bool = False
    now: datetime | None = None
    max_messages: int = DEFAULT_MAX_MESSAGES

    def __post_init__(self) -> None:
        if not self.reason.strip():
            raise OperationError("a reason is required (--reason): it is recorded on every row changed")


class Operations:
    """Redrive and skip against one outbox."""

    def __init__(self, clients: OpsClients, resources: OutboxResources) -> None:
        self._clients = clients
        self._resources = resources
        self._failed = FailedRows(clients.dynamodb, resources.table)

    def redrive_failed(self, where: FailedFilter, operator: Operator) -> OperationReport:
        rows = self._failed.select(where)
        if not rows:
            raise RowNotFoundError("no FAILED row matches: see `outbox failed list`")
        report = OperationReport(operator.dry_run)
        report.rows = [self._redrive(row, operator) for row in rows]
        found = {row.event_id for row in rows}
        report.rows += [
            RowResult(None, event_id, Outcome.NOT_FOUND, "no FAILED row has this event_id")
            for event_id in sorted(where.event_ids - found)
        ]
        self._remove_poison(report, operator)
        return report

    def redrive_on_failure_queue(self, operator: Operator) -> OperationReport:
        queue = self._resources.require("on_failure_queue_url", "--on-failure-queue-url")
        reader = QueueReader(self._clients.sqs, queue, max_messages=operator.max_messages)
        report = OperationReport(operator.dry_run)
        settled: set[str] = set()
        for message in reader.messages():
            batch = DiscardedBatch.of(message)
            if batch is None or f":table/{self._resources.table}/stream/" not in batch.stream_arn:
                report.unmapped_batches.append(
                    f"{message.message_id}: not an on-failure record of this outbox's stream; kept"
                )
                continue
            try:
                keys = keys_in(self._clients.streams, batch)
                results = self._settle_rows(keys, operator)
            except StreamRangeTrimmedError:
                report.unmapped_batches.append(
                    f"{message.message_id}: shard {batch.shard_id} {batch.first}..{batch.last} is no longer "
                    "in the stream; kept (its rows are swept if PENDING, listed by `outbox failed list` if "
                    "FAILED)"
                )
                continue
            except (OutboxError, ClientError, BotoCoreError) as error:
                # This message only: the ones before it stay settled, the rest are still tried.
                report.unmapped_batches.append(f"{message.message_id}: {type(error).__name__}: {error}; kept")
                continue
            report.rows.extend(results)
            if all(result.outcome not in _NOT_DONE for result in results):
                settled.add(message.message_id)
        if operator.dry_run:
            report.on_failure_messages_to_remove = len(settled)
            report.deleted(reader.settle(lambda _: False))  # every message handed back: nothing removed
        else:
            report.on_failure_messages_removed = report.deleted(
                reader.settle(lambda message: message.message_id in settled)
            )
        self._remove_poison(report, operator)
        return report

    def skip_failed(self, event_id: str, operator: Operator) -> OperationReport:
        row = self._failed.find(event_id)
        report = OperationReport(operator.dry_run)
        if operator.dry_run:
            result = RowResult(row.key, row.event_id, Outcome.WOULD_SKIP, generation=row.generation)
        else:
            result = self._apply(
                row.key,
                row.event_id,
                Outcome.SKIPPED,
                lambda: self._skip(row, operator),
                generation=row.generation,
            )
        report.rows.append(result)
        self._remove_poison(report, operator, outcome=Outcome.SKIPPED)
        return report

    # --- per row -------------------------------------------------------------------------------------

    def _redrive(self, row: FailedRow, operator: Operator) -> RowResult:
        if operator.dry_run:
            # What the redrive itself checks (outbox_ops.release.redrive), without the write.
            risk = out_of_order_risk(row.first_released_at or row.released_at)
            if risk is not None and not operator.allow_out_of_order:
                detail = (
                    f"{risk}; redriving it could publish it after a later event "
                    "(--allow-out-of-order to do so anyway)"
                )
                return RowResult(row.key, row.event_id, Outcome.REFUSED, detail)
            return RowResult(
                row.key,
                row.event_id,
                Outcome.WOULD_REDRIVE,
                f"out of order: {risk}" if risk else "",
                generation=row.generation,
            )
        return self._apply(
            row.key,
            row.event_id,
            Outcome.REDRIVEN,
            generation=row.generation,
            action=lambda: redrive(
                self._clients.dynamodb,
                self._resources.table,
                row.key,
                reason=operator.reason,
                actor=operator.actor,
                now=operator.now,
                out_of_order=operator.allow_out_of_order,
            ),
        )

    def _settle_rows(self, keys: Sequence[RowKey], operator: Operator) -> list[RowResult]:
        items = self._failed.items(keys)
        results: list[RowResult] = []
        for key in keys:
            item = items.get(key)
            row = FailedRow.if_failed(item)
            if row is not None:
                results.append(self._redrive(row, operator))
                continue
            pending = item is not None and string_attribute(item, "status") == OutboxStatus.PENDING.value
            results.append(
                RowResult(
                    key, string_attribute(item, "event_id"), Outcome.PENDING if pending else Outcome.OUT
                )
            )
        return results

    def _skip(self, row: FailedRow, operator: Operator) -> None:
        skip(
            self._clients.dynamodb,
            self._resources.table,
            row.key,
            reason=operator.reason,
            actor=operator.actor,
            now=operator.now,
        )

    @staticmethod
    def _apply(
        key: RowKey,
        event_id: str | None,
        done: Outcome,
        action: Callable[[], None],
        *,
        generation: int | None = None,
    ) -> RowResult:
        """One row's action. A refusal or an AWS failure is this row's outcome: the rows before it stay
        done and reported, and the command goes on (each action is one conditional write: all or nothing)."""
        try:
            action()
        except ReleaseError as refused:
            return RowResult(key, event_id, Outcome.REFUSED, str(refused))
        except (OutboxError, ClientError, BotoCoreError) as error:
            return RowResult(key, event_id, Outcome.ERROR, f"{type(error).__name__}: {error}")
        return RowResult(key, event_id, done, generation=generation)

    def _remove_poison(
        self, report: OperationReport, operator: Operator, *, outcome: Outcome = Outcome.REDRIVEN
    ) -> None:
        try:
            self._remove_poison_messages(report, operator, outcome=outcome)
        except (OutboxError, ClientError, BotoCoreError) as error:
            report.poison_cleanup_error = f"{type(error).__name__}: {error}"

    def _remove_poison_messages(
        self, report: OperationReport, operator: Operator, *, outcome: Outcome = Outcome.REDRIVEN
    ) -> None:
        """Delete the poison messages of the rows this command redrove (or skipped): their copies there are
        settled; and those of rows no longer in the table (their events are out, or were skipped). A dry run
        counts them and hands every message back; nothing if no poison queue is known."""
        if operator.dry_run:
            outcome = _WOULD[outcome]
        acted = {
            row.key: row.generation
            for row in report.rows
            if row.outcome is outcome and row.key is not None and row.generation is not None
        }
        queue = self._resources.poison_queue_url
        if not acted or not queue:
            return
        reader = QueueReader(self._clients.sqs, queue, max_messages=operator.max_messages)
        about = {message.message_id: message for message in reader.messages()}
        others = [key for key in map(poison_key, about.values()) if key is not None and key not in acted]
        present = self._failed.items(others)
        out = {key for key in others if key not in present}

        def settled_by_this_command(message: QueueMessage) -> bool:
            key = poison_key(message)
            if key in out:
                return True
            # Only the life the command acted on: a failure of the redriven row since has a later generation.
            return key in acted and poison_generation(message) <= acted[key]

        if operator.dry_run:
            report.poison_messages_to_remove = sum(map(settled_by_this_command, about.values()))
            report.deleted(reader.settle(lambda _: False))  # every message handed back: nothing removed
            return
        report.poison_messages_removed = report.deleted(reader.settle(settled_by_this_command))


_WOULD = {Outcome.REDRIVEN: Outcome.WOULD_REDRIVE, Outcome.SKIPPED: Outcome.WOULD_SKIP}
_NOT_DONE = frozenset({Outcome.REFUSED, Outcome.ERROR, Outcome.NOT_FOUND})
