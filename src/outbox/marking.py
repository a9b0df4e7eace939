"""Moving outbox rows out of PENDING once a publisher is done with them.

Shared by the stream publisher and the sweeper: both mark rows through this one adapter, so the rules
below hold whoever publishes.

- Never backwards: every update carries `#status = PENDING`. A row another process already moved on
  (published by the sweeper, redriven, deleted) fails the condition; that is counted, never an error.
- PUBLISHED sets `published_at`, adds this round's `attempts` and sets the TTL `expires_at` (retention
  from configuration): a published row has done its job and may go.
- FAILED sets `last_error` (truncated, free of payload data: callers pass codes and reasons only),
  `failed_at` and `failed_shard` (which puts the row in the sparse `failed` index operators list), adds
  `attempts`, and REMOVEs `expires_at` (and `published_at`, from a slot's earlier life): a poisoned row must
  stay inspectable and redrivable (`outbox failed`, `outbox redrive`) until an operator deals with it.
- Both REMOVE `pending_shard`, which takes the row out of the sparse `pending` index the sweeper scans, and
  the lease and backoff attributes (outbox.leases). A mark made under a lease requires that lease's owner:
  a path that lost its lease cannot mark the row. Every mark also requires the row's `generation` as the
  caller read it: once an operator redrove the row, a stale stream record of its earlier life (a
  re-delivered INSERT) cannot mark it; and the row's `event_id` as the caller read it: a slot another writer
  rewrote meanwhile (outbox_publisher.writer_contract) is not marked for the event it no longer holds.
- A FAILED mark may release the row at once (`released_at`, `release_reason`): its route lets the
  aggregate's later events continue past a poison event, so the order gate does not hold them.
- A deadline, when given, is checked before each call: with less than `MARKING_CALL_MS` left, the rest stay
  PENDING (reported as `DeadlineExceeded`) rather than risk the invocation's timeout.

As few calls as DynamoDB allows: it has no batch *conditional* update (BatchWriteItem only puts and
deletes, without conditions), so rows are marked with TransactWriteItems, up to 100 Update actions per
call, built with the core `Transaction` (its limits are enforced before sending). One failed condition
cancels a whole transaction, so a cancelled chunk falls back to one UpdateItem per row, which tells
exactly which rows had moved on. PartiQL is not used: moto and DynamoDB disagree on the UPDATE statement's
grammar (docs/local.md, "Where moto differs from AWS").
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from outbox.aws import INVOCATION_CALL_S
from outbox.aws_errors import error_code
from outbox.clock import format_timestamp
from outbox.deadline import Deadline, NoDeadline
from outbox.dynamodb import DynamoDBTransactionExecutor, translate_client_error
from outbox.errors import OutboxError, TransactionCancelledError
from outbox.limits import MAX_TRANSACTION_ACTIONS
from outbox.model import (
    FAILED_INDEX_PARTITION_KEY,
    FIRST_RELEASED_AT,
    GENERATION,
    LEASE_OWNER,
    LEASE_UNTIL,
    NEXT_ATTEMPT_AT,
    PARTITION_KEY,
    PENDING_INDEX_PARTITION_KEY,
    RELEASE_REASON,
    RELEASED_AT,
    SORT_KEY,
    TTL_ATTRIBUTE,
    OutboxStatus,
    RowKey,
    outbox_table,
    pending_shard,
    truncate_error,
)
from outbox.transaction import Transaction

# How long a PUBLISHED row stays in the table before its TTL lets DynamoDB delete it. The publisher's
# configuration and the CDK constructs both default to this.
DEFAULT_PUBLISHED_RETENTION_DAYS = 7
DEFAULT_PUBLISHED_RETENTION = timedelta(days=DEFAULT_PUBLISHED_RETENTION_DAYS)

_log = logging.getLogger(__name__)

_LEFT_PENDING = f"REMOVE {PENDING_INDEX_PARTITION_KEY}, {LEASE_OWNER}, {LEASE_UNTIL}, {NEXT_ATTEMPT_AT}"
_PUBLISHED_UPDATE = (
    f"SET #status = :published, published_at = :published_at, {TTL_ATTRIBUTE} = :expires_at "
    f"ADD attempts :attempts {_LEFT_PENDING}"
)
_FAILED = (
    f"SET #status = :failed, last_error = :last_error, failed_at = :at, {FAILED_INDEX_PARTITION_KEY} = :shard"
)
# A FAILED row is kept for an operator: it loses any TTL and publication time an earlier life left on it (a
# slot another writer rewrote after it was PUBLISHED).
_LEFT_FOR_AN_OPERATOR = f"{_LEFT_PENDING}, {TTL_ATTRIBUTE}, published_at"
_FAILED_UPDATE = f"{_FAILED} ADD attempts :attempts {_LEFT_FOR_AN_OPERATOR}"
_FAILED_AND_RELEASED_UPDATE = (
    f"{_FAILED}, {RELEASED_AT} = :at, {RELEASE_REASON} = :release_reason, "
    f"{FIRST_RELEASED_AT} = if_not_exists({FIRST_RELEASED_AT}, :at) "
    f"ADD attempts :attempts {_LEFT_FOR_AN_OPERATOR}"
)
_CONDITION = "#status = :pending"
_LEASED_CONDITION = f" AND {LEASE_OWNER} = :owner"
_FIRST_GENERATION = f" AND attribute_not_exists({GENERATION})"
_GENERATION = f" AND {GENERATION} = :generation"
_EVENT = " AND event_id = :event_id"
_NAMES = {"#status": "status"}
# One marking call ends within this (outbox.aws.invocation_client), plus a moment to answer Lambda.
MARKING_CALL_MS = (INVOCATION_CALL_S + 1) * 1000


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
_NOT_RESTORED = frozenset(
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


class RowMarker(Protocol):
    """Port: marks rows, never raises for a row it could not mark (it reports it instead)."""

    def mark(self, marks: Sequence[Mark], deadline: Deadline | None = None) -> MarkingReport: ...


class DynamoDBRowMarker:
    """Marks outbox rows with TransactWriteItems chunks, falling back to UpdateItem per row."""

    def __init__(
        self,
        client: Any,
        table_name: str,
        *,
        published_retention: timedelta = DEFAULT_PUBLISHED_RETENTION,
    ) -> None:
        if published_retention <= timedelta(0):
            raise ValueError("published_retention must be positive")
        self._client = client
        self._table = outbox_table(table_name)
        self._executor = DynamoDBTransactionExecutor(client)
        self._retention = published_retention
        self._deadline: Deadline = NoDeadline()

    def mark(self, marks: Sequence[Mark], deadline: Deadline | None = None) -> MarkingReport:
        report = MarkingReport()
        self._deadline = deadline or NoDeadline()
        # Two actions on one item would make DynamoDB reject the whole transaction: the last mark wins.
        unique = list({mark.key: mark for mark in marks}.values())
        for start in range(0, len(unique), MAX_TRANSACTION_ACTIONS):
            self._mark_chunk(unique[start : start + MAX_TRANSACTION_ACTIONS], report)
        return report

    def _time_for_a_call(self, marks: Sequence[Mark], report: MarkingReport) -> bool:
        if self._deadline.remaining_ms() >= MARKING_CALL_MS:
            return True
        for mark in marks:
            report.failed[mark.key] = "DeadlineExceeded"
        return False

    def _mark_chunk(self, chunk: Sequence[Mark], report: MarkingReport) -> None:
        if len(chunk) == 1:
            # One row: UpdateItem costs half the WCU of a one-action transaction.
            self._mark_one(chunk[0], report)
            return
        if not self._time_for_a_call(chunk, report):
            return
        transaction = Transaction()
        for mark in chunk:
            expression, condition, names, values = self._update(mark)
            transaction.update(
                self._table,
                mark.key.item(),
                expression,
                label=f"mark {mark.key.aggregate_key} seq {mark.key.seq_text}",
                condition=condition,
                names=names,
                values=values,
            )
        report.calls += 1
        try:
            self._executor.execute(transaction)
        except TransactionCancelledError as error:
            # Usually one row had already moved on; which one, only per-row updates can tell.
            _log.info(
                "marking transaction cancelled, marking rows one by one", extra={"reasons": error.reasons}
            )
            for mark in chunk:
                self._mark_one(mark, report)
            return
        except OutboxError as error:
            for mark in chunk:
                report.failed[mark.key] = type(error).__name__
            return
        report.marked.extend(mark.key for mark in chunk)

    def _mark_one(self, mark: Mark, report: MarkingReport) -> None:
        if not self._time_for_a_call([mark], report):
            return
        expression, condition, names, values = self._update(mark)
        report.calls += 1
        try:
            self._client.update_item(
                TableName=self._table.table_name,
                Key=mark.key.item(),
                UpdateExpression=expression,
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except ClientError as error:
            if error_code(error) == "ConditionalCheckFailedException":
                report.already_moved.append(mark.key)
            else:
                report.failed[mark.key] = type(translate_client_error(error, "UpdateItem")).__name__
            return
        except BotoCoreError as error:
            report.failed[mark.key] = type(error).__name__
            return
        report.marked.append(mark.key)

    def _update(self, mark: Mark) -> tuple[str, str, dict[str, str], dict[str, Any]]:
        """The mark's update expression, its condition, and their names and values."""
        if isinstance(mark, RestoredMark):
            return _restore(mark)
        values: dict[str, Any] = {
            ":pending": {"S": OutboxStatus.PENDING.value},
            ":attempts": {"N": str(mark.attempts)},
        }
        condition = _CONDITION
        if mark.lease_owner is not None:
            condition += _LEASED_CONDITION
            values[":owner"] = {"S": mark.lease_owner}
        if mark.generation == 0:
            condition += _FIRST_GENERATION
        else:
            condition += _GENERATION
            values[":generation"] = {"N": str(mark.generation)}
        if mark.event_id is not None:
            condition += _EVENT
            values[":event_id"] = {"S": mark.event_id}
        if isinstance(mark, PublishedMark):
            values[":published"] = {"S": OutboxStatus.PUBLISHED.value}
            values[":published_at"] = {"S": format_timestamp(mark.published_at)}
            values[":expires_at"] = {"N": str(int((mark.published_at + self._retention).timestamp()))}
            return _PUBLISHED_UPDATE, condition, _NAMES, values
        values[":failed"] = {"S": OutboxStatus.FAILED.value}
        values[":last_error"] = {"S": truncate_error(mark.error)}
        values[":at"] = {"S": format_timestamp(mark.failed_at)}
        values[":shard"] = {"N": str(pending_shard(mark.key.aggregate_key))}
        if mark.release_reason is None:
            return _FAILED_UPDATE, condition, _NAMES, values
        values[":release_reason"] = {"S": truncate_error(mark.release_reason)}
        return _FAILED_AND_RELEASED_UPDATE, condition, _NAMES, values


def _restore(mark: RestoredMark) -> tuple[str, str, dict[str, str], dict[str, Any]]:
    kept = [name for name in mark.image if name not in _NOT_RESTORED]
    names = {"#status": "status", "#pk": PARTITION_KEY} | {f"#a{n}": name for n, name in enumerate(kept)}
    values: dict[str, Any] = {f":a{n}": mark.image[name] for n, name in enumerate(kept)}
    values |= {
        ":failed": {"S": OutboxStatus.FAILED.value},
        ":last_error": {"S": truncate_error(mark.error)},
        ":at": {"S": format_timestamp(mark.failed_at)},
        ":shard": {"N": str(pending_shard(mark.key.aggregate_key))},
    }
    restored = "".join(f", #a{n} = :a{n}" for n in range(len(kept)))
    return f"{_FAILED}{restored}", "attribute_not_exists(#pk)", names, values
