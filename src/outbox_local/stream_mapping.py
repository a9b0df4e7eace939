"""The semantics of a Lambda event source mapping on a DynamoDB stream shard, with no I/O, so tests drive it
step by step on an injected clock without sleeping.

Each AWS rule it follows (batching and its window, filters, checkpoints, bisecting, retries, record age,
throttles, the on-failure record's shape) is listed in docs/local.md, "The stream mapping emulator:
semantics", with the judgement calls where AWS documents nothing; the tests cite each rule. The one the
publisher depends on most: with `ReportBatchItemFailures`, Lambda checkpoints at the LOWEST reported
sequence number and re-sends every record after it, even those that had succeeded.

A throttled batch (a function with `ReservedConcurrentExecutions` 0) never reached the function: it uses no
retry attempt and is not bisected; the shard tries again until its records pass `MaximumRecordAgeInSeconds`.
"""

from __future__ import annotations

import enum
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from outbox_local.batch_response import reported_failures
from outbox_local.filtering import FilterCriteria
from outbox_local.invocation import InvocationResult
from outbox_local.stream_records import StreamRecord

Clock = Callable[[], float]
NO_LIMIT = -1


# Lambda's synchronous invocation payload limit: the mapping cuts a batch before it (and invokes a batch that
# reached it without waiting out the batching window).
MAX_INVOCATION_PAYLOAD_BYTES = 6 * 1024 * 1024
_EMPTY_EVENT_BYTES = len(b'{"Records":[]}')


@dataclass(frozen=True)
class MappingSettings:
    """The event source mapping's properties, with AWS's defaults."""

    function_arn: str
    stream_arn: str
    batch_size: int = 100
    maximum_batching_window_s: float = 0.0
    maximum_retry_attempts: int = NO_LIMIT
    maximum_record_age_s: int = NO_LIMIT
    bisect_batch_on_function_error: bool = False
    report_batch_item_failures: bool = False
    filters: FilterCriteria = field(default_factory=FilterCriteria)
    on_failure_destination_arn: str | None = None
    retry_delay_s: float = 0.0
    """Pause before retrying a failed batch. Not an AWS setting: it keeps a local retry loop from spinning."""


Invoker = Callable[[dict[str, Any]], InvocationResult]
DestinationSender = Callable[[dict[str, Any]], None]


class StepKind(enum.Enum):
    IDLE = "idle"
    WAITING = "waiting"
    THROTTLED = "throttled"
    """Lambda refused the invocation (reserved concurrency 0): the batch never reached the function."""
    SUCCEEDED = "succeeded"
    PARTIAL_FAILURE = "partial_failure"
    FAILED = "failed"
    BISECTED = "bisected"
    DISCARDED = "discarded"


@dataclass(frozen=True)
class StepReport:
    """What one step did: which records were sent, committed, or discarded and why."""

    kind: StepKind
    invoked: tuple[str, ...] = ()
    committed: tuple[str, ...] = ()
    discarded: tuple[str, ...] = ()
    condition: str | None = None
    due_at: float | None = None
    """For a step that waits: when the mapping has something to do next (clock time)."""


NOTHING_DONE = frozenset({StepKind.IDLE, StepKind.WAITING, StepKind.THROTTLED})
"""Steps that changed nothing anywhere: no function ran, nothing was committed, discarded or deleted."""
THROTTLE_BACKOFF_S = 1.0
"""How long a shard waits after a throttled invocation before trying again (Lambda backs off too)."""


@dataclass
class _Attempt:
    records: list[StreamRecord]
    retries: int = 0
    invocations: int = 0
    last_error: bool = False
    give_up: str | None = None
    """Set once the retries are used up: the condition the records are discarded with. Kept on the
    attempt so a failed send to the on-failure destination is tried again instead of losing the metadata."""


class _Outcome(enum.Enum):
    SUCCESS = "success"
    PARTIAL = "partial"
    FAILURE = "failure"


class ShardProcessor:
    """Drives one shard's records through a function exactly as a Lambda stream mapping does."""

    def __init__(
        self,
        settings: MappingSettings,
        *,
        shard_id: str,
        invoke: Invoker,
        send_to_destination: DestinationSender | None,
        clock: Clock,
        new_request_id: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        self._settings = settings
        self._shard_id = shard_id
        self._invoke = invoke
        self._send_to_destination = send_to_destination
        self._clock = clock
        self._new_request_id = new_request_id
        self._pending: deque[tuple[StreamRecord, float]] = deque()
        self._pending_bytes = 0
        self._work: deque[_Attempt] = deque()
        self._not_before = 0.0
        self._last_accepted: str | None = None
        self._filtered_after: dict[str, str] = {}
        """Outstanding record's sequence number -> the last filtered-out record directly after it."""
        self.checkpoint: str | None = None
        self.invocations = 0
        self.failed_invocations = 0
        self.throttled_invocations = 0
        self.discarded_records = 0
        self.filtered_out = 0

    @property
    def shard_id(self) -> str:
        return self._shard_id

    @property
    def oldest_unprocessed_at(self) -> float | None:
        """When the oldest record not yet processed was written (epoch seconds): the iterator age's start."""
        # Copies first: the control API reads this on its own thread while the poller changes the queues.
        work, pending = list(self._work), list(self._pending)
        # A slice, not [0] after a check: the poller may empty an attempt's records in between.
        oldest = [first.created_at for attempt in work for first in attempt.records[:1]]
        if pending:
            oldest.append(pending[0][0].created_at)
        return min(oldest) if oldest else None

    @property
    def backlog(self) -> int:
        """Records received but not yet committed or discarded."""
        return len(self._pending) + sum(len(attempt.records) for attempt in list(self._work))

    def offer(self, records: Sequence[StreamRecord]) -> None:
        """Hand over records read from the shard, in shard order."""
        now = self._clock()
        for record in records:
            if self._settings.filters.accepts(record.payload):
                self._pending.append((record, now))
                self._pending_bytes += record.size
                self._last_accepted = record.sequence_number
            else:
                self.filtered_out += 1
                if not self._pending and not self._work:
                    # Nothing before it is outstanding, so a dropped record is as good as processed.
                    self.checkpoint = record.sequence_number
                elif self._last_accepted is not None:
                    # Processed once the outstanding record before it is: the checkpoint then moves past it.
                    self._filtered_after[self._last_accepted] = record.sequence_number

    def step(self) -> StepReport:
        """Do the next thing Lambda would do: wait, invoke once, or discard expired records."""
        now = self._clock()
        if not self._work:
            if not self._pending:
                return StepReport(StepKind.IDLE)
            if not self._batch_ready(now):
                return StepReport(
                    StepKind.WAITING, due_at=self._pending[0][1] + self._settings.maximum_batching_window_s
                )
            self._work.append(_Attempt(self._next_batch()))
        if now < self._not_before:
            return StepReport(StepKind.WAITING, due_at=self._not_before)
        attempt = self._work[0]
        if attempt.give_up is not None:
            # The retries were used up but the on-failure destination could not be reached last time.
            return self._give_up(attempt, list(attempt.records), attempt.give_up)
        expired = self._expired_prefix(attempt.records, now)
        if expired:
            return self._give_up(attempt, expired, "RecordAgeExceeded")
        return self._invoke_attempt(attempt, now)

    def _next_batch(self) -> list[StreamRecord]:
        """Up to BatchSize records, cut before the invocation payload would pass 6 MB (at least one)."""
        batch: list[StreamRecord] = []
        size = _EMPTY_EVENT_BYTES
        while self._pending and len(batch) < self._settings.batch_size:
            record = self._pending[0][0]
            if batch and size + record.size > MAX_INVOCATION_PAYLOAD_BYTES:
                break
            self._pending.popleft()
            self._pending_bytes -= record.size
            size += record.size
            batch.append(record)
        return batch

    def _batch_ready(self, now: float) -> bool:
        window = self._settings.maximum_batching_window_s
        if window <= 0 or len(self._pending) >= self._settings.batch_size:
            return True
        if _EMPTY_EVENT_BYTES + self._pending_bytes >= MAX_INVOCATION_PAYLOAD_BYTES:
            return True
        first_received_at = self._pending[0][1]
        return now - first_received_at >= window

    def _expired_prefix(self, records: Sequence[StreamRecord], now: float) -> list[StreamRecord]:
        limit = self._settings.maximum_record_age_s
        if limit == NO_LIMIT:
            return []
        expired: list[StreamRecord] = []
        for record in records:
            if now - record.created_at <= limit:
                break
            expired.append(record)
        return expired

    def _give_up(self, attempt: _Attempt, records: list[StreamRecord], condition: str) -> StepReport:
        """Discard `records` (a prefix of the attempt): metadata to the destination first, then move on.

        If the destination cannot be reached the error propagates and nothing has changed: the next step tries
        again, so neither the records' place in the shard nor their metadata is ever lost.
        """
        self._discard(records, condition, attempt)
        del attempt.records[: len(records)]
        if not attempt.records:
            self._work.popleft()
        return StepReport(
            StepKind.DISCARDED,
            discarded=tuple(r.sequence_number for r in records),
            condition=condition,
        )

    def _invoke_attempt(self, attempt: _Attempt, now: float) -> StepReport:
        records = attempt.records
        sequence_numbers = tuple(r.sequence_number for r in records)
        result = self._invoke({"Records": [dict(r.payload) for r in records]})
        if result.throttled:
            # Retry attempts "don't apply to service errors or throttles where the batch didn't reach the
            # function": nothing is used up, nothing is bisected; the records wait, until they expire.
            self.throttled_invocations += 1
            self._not_before = now + max(self._settings.retry_delay_s, THROTTLE_BACKOFF_S)
            return StepReport(StepKind.THROTTLED, invoked=sequence_numbers, due_at=self._not_before)
        attempt.invocations += 1
        attempt.last_error = result.failed
        self.invocations += 1
        outcome, first_failed = self._classify(result, sequence_numbers)
        if outcome is _Outcome.SUCCESS:
            self._work.popleft()
            self._commit(records)
            return StepReport(StepKind.SUCCEEDED, invoked=sequence_numbers, committed=sequence_numbers)
        self.failed_invocations += 1
        if outcome is _Outcome.PARTIAL:
            succeeded, attempt.records = records[:first_failed], records[first_failed:]
            self._commit(succeeded)
            committed = tuple(r.sequence_number for r in succeeded)
            return self._after_retryable_failure(
                attempt, now, StepKind.PARTIAL_FAILURE, sequence_numbers, committed
            )
        if self._settings.bisect_batch_on_function_error and len(records) > 1:
            middle = len(records) // 2
            halves = [
                _Attempt(records[:middle], attempt.retries, attempt.invocations, attempt.last_error),
                _Attempt(records[middle:], attempt.retries, attempt.invocations, attempt.last_error),
            ]
            self._work.popleft()
            self._work.extendleft(reversed(halves))
            return StepReport(StepKind.BISECTED, invoked=sequence_numbers)
        return self._after_retryable_failure(attempt, now, StepKind.FAILED, sequence_numbers, ())

    def _classify(self, result: InvocationResult, sequence_numbers: Sequence[str]) -> tuple[_Outcome, int]:
        if result.failed:
            return _Outcome.FAILURE, 0
        if not self._settings.report_batch_item_failures:
            return _Outcome.SUCCESS, 0
        positions = reported_failures(result.payload, sequence_numbers)
        if positions is None:
            return _Outcome.FAILURE, 0
        if not positions:
            return _Outcome.SUCCESS, 0
        # Lambda checkpoints at the lowest reported sequence number.
        return _Outcome.PARTIAL, min(positions)

    def _after_retryable_failure(
        self,
        attempt: _Attempt,
        now: float,
        kind: StepKind,
        invoked: tuple[str, ...],
        committed: tuple[str, ...],
    ) -> StepReport:
        attempt.retries += 1
        limit = self._settings.maximum_retry_attempts
        if limit != NO_LIMIT and attempt.retries > limit:
            attempt.give_up = "RetryAttemptsExhausted"
            discarded = self._give_up(attempt, list(attempt.records), attempt.give_up)
            return StepReport(
                kind,
                invoked=invoked,
                committed=committed,
                discarded=discarded.discarded,
                condition=discarded.condition,
            )
        self._not_before = now + self._settings.retry_delay_s
        return StepReport(kind, invoked=invoked, committed=committed)

    def _commit(self, records: Sequence[StreamRecord]) -> None:
        if records:
            # Filtered-out records after any of these are behind the checkpoint now: forget them all (only the
            # last one's can move the checkpoint), or the map would keep one entry per such record for good.
            for record in records[:-1]:
                self._filtered_after.pop(record.sequence_number, None)
            last = records[-1].sequence_number
            self.checkpoint = self._filtered_after.pop(last, last)

    def _discard(self, records: Sequence[StreamRecord], condition: str, attempt: _Attempt) -> None:
        # Send first: if the destination fails, nothing below has happened and the discard is tried again.
        # Without a destination AWS simply bypasses the discarded records.
        if self._send_to_destination is not None and self._settings.on_failure_destination_arn is not None:
            self._send_to_destination(
                on_failure_record(
                    settings=self._settings,
                    shard_id=self._shard_id,
                    records=records,
                    condition=condition,
                    invocations=attempt.invocations,
                    function_error=attempt.last_error,
                    request_id=self._new_request_id(),
                    now=self._clock(),
                )
            )
        self.discarded_records += len(records)
        self._commit(records)


def on_failure_record(
    *,
    settings: MappingSettings,
    shard_id: str,
    records: Sequence[StreamRecord],
    condition: str,
    invocations: int,
    function_error: bool,
    request_id: str,
    now: float,
) -> dict[str, Any]:
    """The metadata document Lambda sends to a stream mapping's on-failure destination."""
    response_context: dict[str, Any] = {"statusCode": 200, "executedVersion": "$LATEST"}
    if function_error:
        response_context["functionError"] = "Unhandled"
    return {
        "requestContext": {
            "requestId": request_id,
            "functionArn": settings.function_arn,
            "condition": condition,
            "approximateInvokeCount": invocations,
        },
        "responseContext": response_context,
        "version": "1.0",
        "timestamp": _iso_millis(now),
        "DDBStreamBatchInfo": {
            "shardId": shard_id,
            "startSequenceNumber": records[0].sequence_number,
            "endSequenceNumber": records[-1].sequence_number,
            "approximateArrivalOfFirstRecord": _iso_seconds(records[0].created_at),
            "approximateArrivalOfLastRecord": _iso_seconds(records[-1].created_at),
            "batchSize": len(records),
            "streamArn": settings.stream_arn,
        },
    }


def _iso_seconds(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _iso_millis(epoch: float) -> str:
    moment = datetime.fromtimestamp(epoch, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
