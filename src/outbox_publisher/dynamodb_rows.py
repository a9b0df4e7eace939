"""Row updates (outbox_publisher.row_updates) on DynamoDB: one conditional call per row, several in flight.

A settle is a `DeleteItem`, a FAILED mark and a park an `UpdateItem`, each with the row's condition
(`#status = PENDING`, its `event_id`, its `generation`, and the run's lease where it holds one). A standard
delete costs 1 WCU per KB, half a transactional one, and these are the only forms that carry a condition per
row and run both on DynamoDB and on moto as it is: `BatchWriteItem` takes no condition, a PartiQL `DELETE`
in `BatchExecuteStatement` fails on moto (docs/local.md, "Where moto differs from AWS") and
`TransactWriteItems` bills twice and fails every row for one. DynamoDB bills by the row, not the call, so a
call per row costs nothing more; what it costs is the invocation's wait, which `WORKERS` calls in flight at
once divide (a run's rows are distinct, and the order in which their updates land does not matter: each
event is already out, or already poison).

Calls DynamoDB throttled or did not answer are sent once more after a short full-jitter pause, within the
deadline. No call starts with less than `UPDATE_CALL_MS` left.
"""

from __future__ import annotations

import contextvars
import random as _random
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

from outbox.aws import INVOCATION_CALL_S
from outbox.clock import format_timestamp
from outbox.dynamodb import ConditionNotMetError, call
from outbox.errors import OutboxError, RetryableError
from outbox.model import (
    DELIVERED_TO,
    FAILED_INDEX_PARTITION_KEY,
    FIRST_RELEASED_AT,
    GENERATION,
    IS_PENDING,
    LEASE_OWNER,
    LEASE_UNTIL,
    LEGACY_ATTRIBUTES,
    NEXT_ATTEMPT_AT,
    RELEASE_REASON,
    RELEASED_AT,
    TTL_ATTRIBUTE,
    OutboxStatus,
    failed_shard,
    truncate_error,
)
from outbox_publisher.deadline import Deadline, NoDeadline
from outbox_publisher.row_updates import Generation, MarkFailed, Park, RowUpdate, RowUpdatesReport, Settle

UPDATE_CALL_MS = (INVOCATION_CALL_S + 1) * 1000
"""One call ends within this (outbox.aws.invocation_client), plus a moment to answer Lambda."""
ROUNDS = 2
"""The first call of each row, and one more for those DynamoDB throttled or did not answer."""
BACKOFF_MS = 100
"""The pause before the second round: full jitter, uniform in [0, this)."""
WORKERS = 10
"""Calls in flight at once: as many as a boto3 client keeps connections (botocore's `max_pool_connections`,
10 by default), so none waits for a connection. A batch of 100 settles waits for 10 round trips, not 100."""

_NAMES = {"#status": "status"}
_FAILED = (
    f"SET #status = :failed, last_error = :last_error, failed_at = :at, {FAILED_INDEX_PARTITION_KEY} = :shard"
)
_RELEASED = (
    f", {RELEASED_AT} = :at, {RELEASE_REASON} = :release_reason, "
    f"{FIRST_RELEASED_AT} = if_not_exists({FIRST_RELEASED_AT}, :at)"
)
# A FAILED row is kept for an operator: it loses what only a row on its way out carries, and any TTL (a
# writer's `expires_at` on a PENDING row is what made it poison).
_LEFT_FOR_AN_OPERATOR = (
    f"REMOVE {LEASE_OWNER}, {LEASE_UNTIL}, {NEXT_ATTEMPT_AT}, {TTL_ATTRIBUTE}, {', '.join(LEGACY_ATTRIBUTES)}"
)


class DynamoDBRowUpdater:
    """Settles, fails and parks outbox rows, one conditional call each."""

    def __init__(
        self,
        client: Any,
        table_name: str,
        *,
        sleep: Callable[[float], None] = time.sleep,
        random: Callable[[], float] = _random.random,
        workers: int = WORKERS,
    ) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self._client = client
        self._table = table_name
        self._sleep = sleep
        self._random = random
        self._workers = workers
        self._pool: ThreadPoolExecutor | None = None
        """Made on the first call that has more than one row, then kept for the process's later runs."""

    def apply(self, updates: Sequence[RowUpdate], deadline: Deadline | None = None) -> RowUpdatesReport:
        deadline = deadline or NoDeadline()
        report = RowUpdatesReport()
        # Two updates of one row: the last wins (a run makes one per row; this only guards the call count).
        pending = list({update.key: update for update in updates}.values())
        for round_ in range(ROUNDS):
            if not pending:
                break
            if round_:
                self._back_off(deadline)
            retry: list[RowUpdate] = []
            # Answers are taken in the updates' order, whatever order the calls ended in: the report is the
            # same as one call after another would make it.
            answers = self._map(lambda update: self._attempt(update, deadline), pending)
            for update, answer in zip(pending, answers, strict=True):
                report.calls += answer.called
                if answer.error is None:
                    (report.already_moved if answer.moved else report.done).append(update.key)
                elif answer.retryable and round_ + 1 < ROUNDS:
                    retry.append(update)
                else:
                    report.failed[update.key] = answer.error
            pending = retry
        return report

    def _map(self, attempt: Callable[[RowUpdate], _Answer], updates: list[RowUpdate]) -> list[_Answer]:
        if self._workers == 1 or len(updates) == 1:
            return [attempt(update) for update in updates]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self._workers, thread_name_prefix="outbox-row-updates")
        # Each call runs in a copy of this thread's context, so what it reads from context variables is what
        # this thread would read. (The X-Ray SDK keeps Lambda's trace per thread: its subsegments go under
        # Lambda's segment, not under the run's.)
        calls = [self._pool.submit(contextvars.copy_context().run, attempt, update) for update in updates]
        return [pending.result() for pending in calls]

    def _back_off(self, deadline: Deadline) -> None:
        delay_ms = self._random() * BACKOFF_MS
        if deadline.remaining_ms() - delay_ms >= UPDATE_CALL_MS:
            self._sleep(delay_ms / 1000)

    def _attempt(self, update: RowUpdate, deadline: Deadline) -> _Answer:
        """Makes the update's call if there is time for it (checked as it starts, in whichever thread)."""
        if deadline.remaining_ms() < UPDATE_CALL_MS:
            return _Answer(called=False, error="DeadlineExceeded")
        try:
            if isinstance(update, Settle):
                condition, names, values = _condition(update.event_id, update.generation, None)
                call(
                    "DeleteItem",
                    self._client.delete_item,
                    TableName=self._table,
                    Key=update.key.item(),
                    ConditionExpression=condition,
                    ExpressionAttributeNames=names,
                    ExpressionAttributeValues=values,
                )
            else:
                expression, condition, names, values = (
                    _failed(update) if isinstance(update, MarkFailed) else _parked(update)
                )
                call(
                    "UpdateItem",
                    self._client.update_item,
                    TableName=self._table,
                    Key=update.key.item(),
                    UpdateExpression=expression,
                    ConditionExpression=condition,
                    ExpressionAttributeNames=names,
                    ExpressionAttributeValues=values,
                )
        except ConditionNotMetError:
            return _Answer(called=True, moved=True)
        except OutboxError as error:
            return _Answer(
                called=True, error=type(error).__name__, retryable=isinstance(error, RetryableError)
            )
        return _Answer(called=True)


class _Answer(NamedTuple):
    """One update's answer: done, moved on (its condition did not hold), or not done (`error`)."""

    called: bool
    moved: bool = False
    error: str | None = None
    """Why it was not done: the error's name, or `DeadlineExceeded` when no call was made."""
    retryable: bool = False
    """Worth a second call (DynamoDB throttled it or did not answer)."""


def _condition(
    event_id: str | None, generation: Generation, lease_owner: str | None
) -> tuple[str, dict[str, str], dict[str, Any]]:
    """The row is still the one the run published: PENDING, the same event, the same generation, and held
    by the run's lease when it has one."""
    condition = IS_PENDING
    names = dict(_NAMES)
    values: dict[str, Any] = {":pending": {"S": OutboxStatus.PENDING.value}}
    if event_id is not None:
        condition += " AND event_id = :event_id"
        values[":event_id"] = {"S": event_id}
    if generation is None:
        condition += f" AND attribute_not_exists({GENERATION})"
    else:
        condition += f" AND {GENERATION} = :generation"
        values[":generation"] = dict(generation)
    if lease_owner is not None:
        condition += f" AND {LEASE_OWNER} = :owner"
        values[":owner"] = {"S": lease_owner}
    return condition, names, values


def _failed(mark: MarkFailed) -> tuple[str, str, dict[str, str], dict[str, Any]]:
    condition, names, values = _condition(mark.event_id, mark.generation, mark.lease_owner)
    values |= {
        ":failed": {"S": OutboxStatus.FAILED.value},
        ":last_error": {"S": truncate_error(mark.error)},
        ":at": {"S": format_timestamp(mark.failed_at)},
        ":shard": {"N": str(failed_shard(mark.key.aggregate_key))},
        ":attempts": {"N": str(mark.attempts)},
    }
    expression = _FAILED
    if mark.release_reason is not None:
        expression += _RELEASED
        values[":release_reason"] = {"S": truncate_error(mark.release_reason)}
    expression += " ADD attempts :attempts"
    if mark.delivered_to:
        expression += f", {DELIVERED_TO} :delivered"
        values[":delivered"] = {"SS": sorted(mark.delivered_to)}
    return f"{expression} {_LEFT_FOR_AN_OPERATOR}", condition, names, values


def _parked(park: Park) -> tuple[str, str, dict[str, str], dict[str, Any]]:
    condition, names, values = _condition(park.event_id, park.generation, park.lease_owner)
    values |= {":delivered": {"SS": sorted(park.delivered_to)}, ":error": {"S": truncate_error(park.error)}}
    expression = f"SET last_error = :error ADD {DELIVERED_TO} :delivered"
    if park.lease_owner is not None:
        expression += f" REMOVE {LEASE_OWNER}, {LEASE_UNTIL}"
    return expression, condition, names, values
