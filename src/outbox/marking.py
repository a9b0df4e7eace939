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

As few calls and as little capacity as DynamoDB allows: rows are marked with PartiQL `BatchExecuteStatement`,
up to 25 UPDATE statements per call (outbox.mark_statements writes them), each a standard conditional write (1
WCU per KB, where a transaction costs 2) whose conditions are the statement's WHERE clause. DynamoDB answers
each statement on its own: a row that already moved on fails only its own statement
(`ConditionalCheckFailed`), never its neighbours', so a redelivered batch costs the same calls as the first
delivery. A FAILED mark that releases its row stays in the batch: PartiQL has no `if_not_exists`, so the
statement sets `first_released_at` guarded by `IS MISSING` when the row as read had none, and leaves it alone
guarded by `IS NOT MISSING` when it had one (as `attempts` is handled). What PartiQL cannot say goes one
UpdateItem per row: a single row (one UpdateItem is the same write, and needs no PartiQL), a restored row (an
UPDATE never creates an item), and a statement that failed its condition on a row still PENDING for this mark
(it gained or lost `attempts` or `first_released_at` since it was read: UpdateItem's ADD and `if_not_exists`
need no such condition) or whose answer holds no item (sources disagree on whether batch members return it):
UpdateItem's own answer then says exactly whether the row had moved on.

The PartiQL form has NOT been run against real DynamoDB here (no AWS account): it follows the UPDATE
grammar page (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ql-reference.update.html)
and runs on moto through outbox_local.moto_partiql only. So it is not relied on: if DynamoDB refuses the
statement form itself (a statement answered `ValidationError`, or the whole call `ValidationException`),
those rows are marked with the conditional UpdateItem above, the marker logs it once at ERROR (the error
code, no payload) and counts them (`MarkingReport.fallbacks`, the metric MarkingFallbacks), and it marks
with UpdateItem for the rest of the process's life (the container's: one marker per process): a refused
form never leaves rows PENDING for the sweeper to publish again. Throttled statements are sent once more
after a short full-jitter pause, within the deadline.

The statement's shape follows the documented grammar, not only what moto accepts (docs/BENCHMARKS.md,
"Marking"): `UPDATE table [SET | REMOVE] path [= data] [...] WHERE condition`, each clause repeated
with its own keyword ("PartiQL update statements for DynamoDB",
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ql-reference.update.html), `+` on a number
and `IS MISSING` ("PartiQL arithmetic, comparison, and logical operators for DynamoDB",
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ql-operators.html), at most 25 statements a
call ("Running batch operations with PartiQL for DynamoDB",
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ql-reference.multiplestatements.batching.html),
and per-statement error codes ("BatchStatementError",
https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_BatchStatementError.html). moto neither
parses that grammar nor fails a statement on its WHERE clause: outbox_local.moto_partiql makes it answer as
DynamoDB does.
"""

from __future__ import annotations

import logging
import random as _random
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any, TypeGuard

from botocore.exceptions import BotoCoreError, ClientError

from outbox.aws import INVOCATION_CALL_S
from outbox.aws_errors import error_code
from outbox.deadline import Deadline, NoDeadline
from outbox.dynamodb import translate_client_error
from outbox.errors import (
    AwsCallError,
    AwsUnavailableError,
    ThrottledError,
    TransactionConflictError,
    TransactionValidationError,
)
from outbox.mark_statements import MarkStatements
from outbox.mark_updates import update_of
from outbox.model import (
    GENERATION,
    LEASE_OWNER,
    OutboxStatus,
    RowKey,
    generation_of,
    outbox_table,
)
from outbox.row_marks import FailedMark, Mark, MarkingReport, PublishedMark

# How long a PUBLISHED row stays in the table before its TTL lets DynamoDB delete it. The publisher's
# configuration and the CDK constructs both default to this.
DEFAULT_PUBLISHED_RETENTION_DAYS = 7
DEFAULT_PUBLISHED_RETENTION = timedelta(days=DEFAULT_PUBLISHED_RETENTION_DAYS)

_log = logging.getLogger(__name__)

# One marking call ends within this (outbox.aws.invocation_client), plus a moment to answer Lambda.
MARKING_CALL_MS = (INVOCATION_CALL_S + 1) * 1000
# BatchExecuteStatement takes at most 25 statements ("Running batch operations with PartiQL for DynamoDB").
MAX_BATCH_STATEMENTS = 25
# Calls per chunk: the first, and one more for the statements DynamoDB throttled or could not run then.
STATEMENT_ROUNDS = 2
# Statement error codes (BatchStatementError) that may succeed when sent again, and each code's typed error.
_RETRYABLE_STATEMENT_CODES = frozenset(
    {
        "ThrottlingError",
        "ProvisionedThroughputExceeded",
        "RequestLimitExceeded",
        "InternalServerError",
        "TransactionConflict",
    }
)
# What DynamoDB answers when it refuses the statement form itself: a statement's `Error.Code`, and the whole
# call's error code. Either one puts the marker on UpdateItem for good (the module docstring).
_REFUSED_STATEMENT_CODE = "ValidationError"
_REFUSED_CALL_CODE = "ValidationException"
# The pause before throttled statements are sent again: full jitter, uniform in [0, this), as
# outbox_publisher.retry's RetryPolicy does for its first retry (the core cannot import that package).
STATEMENT_BACKOFF_MS = 100
_STATEMENT_ERRORS = {
    "ThrottlingError": ThrottledError.__name__,
    "ProvisionedThroughputExceeded": ThrottledError.__name__,
    "RequestLimitExceeded": ThrottledError.__name__,
    "InternalServerError": AwsUnavailableError.__name__,
    "TransactionConflict": TransactionConflictError.__name__,
    "ValidationError": TransactionValidationError.__name__,
    "ItemCollectionSizeLimitExceeded": TransactionValidationError.__name__,
}


class DynamoDBRowMarker:
    """Marks outbox rows with PartiQL BatchExecuteStatement, 25 conditional UPDATEs a call; UpdateItem for
    what PartiQL cannot say."""

    def __init__(
        self,
        client: Any,
        table_name: str,
        *,
        published_retention: timedelta = DEFAULT_PUBLISHED_RETENTION,
        sleep: Callable[[float], None] = time.sleep,
        random: Callable[[], float] = _random.random,
    ) -> None:
        if published_retention <= timedelta(0):
            raise ValueError("published_retention must be positive")
        self._sleep = sleep
        self._random = random
        # False once DynamoDB refused the PartiQL form: UpdateItem from then on, for this marker's life (one
        # per process, so the container's).
        self._partiql = True
        self._client = client
        self._table = outbox_table(table_name)
        self._statements = MarkStatements(table_name, published_retention)
        self._retention = published_retention
        self._deadline: Deadline = NoDeadline()

    def mark(self, marks: Sequence[Mark], deadline: Deadline | None = None) -> MarkingReport:
        report = MarkingReport()
        self._deadline = deadline or NoDeadline()
        # Two statements on one item in one batch: the last mark wins (DynamoDB refuses such a batch).
        unique = list({mark.key: mark for mark in marks}.values())
        batched: list[PublishedMark | FailedMark] = [mark for mark in unique if _in_batch(mark)]
        if len(batched) == 1:
            batched = []  # one row: UpdateItem is the same write
        one_by_one = [mark for mark in unique if not batched or not _in_batch(mark)]
        for start in range(0, len(batched), MAX_BATCH_STATEMENTS):
            chunk = batched[start : start + MAX_BATCH_STATEMENTS]
            if self._partiql:
                chunk = self._mark_batch(chunk, report)
            if not self._partiql:
                report.fallbacks += len(chunk)  # refused by now: UpdateItem for the chunk's rows left to mark
            one_by_one.extend(chunk)
        for mark in one_by_one:
            self._mark_one(mark, report)
        return report

    def _time_for_a_call(self, marks: Sequence[Mark], report: MarkingReport) -> bool:
        if self._deadline.remaining_ms() >= MARKING_CALL_MS:
            return True
        for mark in marks:
            report.failed[mark.key] = "DeadlineExceeded"
        return False

    def _mark_batch(
        self, chunk: Sequence[PublishedMark | FailedMark], report: MarkingReport
    ) -> list[PublishedMark | FailedMark]:
        """Marks `chunk` with BatchExecuteStatement; returns the marks to make one by one instead."""
        recheck: list[PublishedMark | FailedMark] = []
        pending = list(chunk)
        last_code: dict[RowKey, str] = {}
        for round_ in range(STATEMENT_ROUNDS):
            if not pending:
                return recheck
            if round_:
                self._back_off()
            if not self._time_for_a_call(pending, report):
                return recheck
            responses = self._send(pending, report)
            if responses is None:
                return recheck if self._partiql else recheck + pending
            pending = self._read(pending, responses, report, recheck, last_code)
            if not self._partiql:
                return recheck + pending
        report.failed.update((mark.key, _statement_error(last_code[mark.key])) for mark in pending)
        return recheck

    def _send(
        self, pending: Sequence[PublishedMark | FailedMark], report: MarkingReport
    ) -> list[Mapping[str, Any]] | None:
        """One BatchExecuteStatement call's answers, one per statement; None when the call failed (its rows
        reported failed), or was refused as a form (the marker is then off PartiQL)."""
        report.calls += 1
        try:
            answer = self._client.batch_execute_statement(
                Statements=[self._statement(mark) for mark in pending]
            )
        except ClientError as error:
            if error_code(error) == _REFUSED_CALL_CODE:
                self._refused(_REFUSED_CALL_CODE)
                return None
            name = type(translate_client_error(error, "BatchExecuteStatement")).__name__
            report.failed.update((mark.key, name) for mark in pending)
            return None
        except BotoCoreError as error:
            report.failed.update((mark.key, type(error).__name__) for mark in pending)
            return None
        responses: list[Mapping[str, Any]] = answer.get("Responses", [])
        if len(responses) != len(pending):
            # Not an answer DynamoDB gives: which row it speaks of cannot be told.
            report.failed.update((mark.key, "UnexpectedResponse") for mark in pending)
            return None
        return responses

    def _read(
        self,
        pending: Sequence[PublishedMark | FailedMark],
        responses: Sequence[Mapping[str, Any]],
        report: MarkingReport,
        recheck: list[PublishedMark | FailedMark],
        last_code: dict[RowKey, str],
    ) -> list[PublishedMark | FailedMark]:
        """Reports each statement's answer, adds to `recheck` what UpdateItem must mark; returns the marks to
        send again (throttled, or not run then)."""
        retry: list[PublishedMark | FailedMark] = []
        for mark, response in zip(pending, responses, strict=True):
            failure = response.get("Error")
            if failure is None:
                report.marked.append(mark.key)
                continue
            code = str(failure.get("Code", ""))
            if code == "ConditionalCheckFailed":
                item = failure.get("Item")
                if not item or _still_markable(mark, item):
                    recheck.append(mark)  # UpdateItem's own answer is exact: no guess
                else:
                    report.already_moved.append(mark.key)
            elif code == _REFUSED_STATEMENT_CODE:
                self._refused(code)
                recheck.append(mark)
            elif code in _RETRYABLE_STATEMENT_CODES:
                last_code[mark.key] = code
                retry.append(mark)
            else:
                report.failed[mark.key] = _statement_error(code)
        return retry

    def _refused(self, code: str) -> None:
        """DynamoDB refused the PartiQL form: UpdateItem from now on, said once."""
        if self._partiql:
            self._partiql = False
            _log.error(
                "PartiQL marking refused by DynamoDB: marking with UpdateItem from now on",
                extra={"error_code": code},
            )

    def _back_off(self) -> None:
        """A full-jitter pause before statements are sent again, when the deadline leaves time for it and
        for the call after it."""
        delay_ms = self._random() * STATEMENT_BACKOFF_MS
        if self._deadline.remaining_ms() - delay_ms >= MARKING_CALL_MS:
            self._sleep(delay_ms / 1000)

    def _statement(self, mark: PublishedMark | FailedMark) -> dict[str, Any]:
        return self._statements.of(mark)

    def _mark_one(self, mark: Mark, report: MarkingReport) -> None:
        if not self._time_for_a_call([mark], report):
            return
        expression, condition, names, values = update_of(mark, self._retention)
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


def _in_batch(mark: Mark) -> TypeGuard[PublishedMark | FailedMark]:
    """Whether PartiQL can say the mark: not a restored row (an UPDATE never creates an item)."""
    return isinstance(mark, PublishedMark | FailedMark)


def _still_markable(mark: PublishedMark | FailedMark, item: Mapping[str, Any]) -> bool:
    """Whether the row of a failed statement (as DynamoDB returned it) is still the one the mark is for, so
    only the presence of `attempts` or `first_released_at` failed: the row has not moved on, and UpdateItem
    (whose ADD and `if_not_exists` need no such condition) marks it."""
    if item.get("status") != {"S": OutboxStatus.PENDING.value}:
        return False
    if mark.lease_owner is not None and item.get(LEASE_OWNER) != {"S": mark.lease_owner}:
        return False
    if generation_of(item) != mark.generation or (mark.generation == 0 and GENERATION in item):
        return False
    return mark.event_id is None or item.get("event_id") == {"S": mark.event_id}


def _statement_error(code: str) -> str:
    """The typed error a statement's error code stands for, by name (what MarkingReport.failed holds)."""
    return _STATEMENT_ERRORS.get(code, AwsCallError.__name__)
