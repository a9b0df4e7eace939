"""The SQS event source mapping: Lambda's queue poller, run against moto's SQS. Each AWS rule it follows
(polling, batching window, record shape, deletes on success and with `ReportBatchItemFailures`, filters,
FIFO groups) is listed in docs/local.md, "SQS queue mappings: what runs as on AWS".

moto keeps visibility timeouts and dead-letter redrive itself, so the mapping does nothing for either, as
Lambda does nothing. A batch is cut before its invocation payload would pass Lambda's 6 MB.

Local choices: ReceiveMessage never long-polls, since a poll under way could not vouch for what was written
during it, which `LocalRuntime.wait_until_idle` needs (the poll interval: `outbox_local.background`).
A poll starts batches in rounds, up to `max_concurrent_batches`, each on a thread of its own, and returns once
all are done, so nothing is in flight between polls. On a FIFO queue it never starts a batch holding a group
that a batch in flight holds, so each group keeps its order. Time comes from an injected clock, so a caller
driving the runtime step by step moves a virtual clock through a batching window instead of sleeping.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from outbox_local.batch_response import reported_failures
from outbox_local.filtering import FilterCriteria, accepts_queue_record
from outbox_local.invocation import InvocationResult
from outbox_local.poll_activity import PollActivity
from outbox_local.queues import SQS_MAX_MESSAGES_PER_RECEIVE
from outbox_local.stream_mapping import MAX_INVOCATION_PAYLOAD_BYTES, Clock, StepKind, StepReport
from outbox_local.stream_records import base64_text

logger = logging.getLogger("outbox_local.queues")

DEFAULT_BATCH_SIZE = 10  # "BatchSize ... Default 10" for SQS (Lambda parameters for Amazon SQS mappings)


@dataclass(frozen=True)
class QueueMappingSettings:
    """The mapping's properties, with AWS's defaults, and where the queue is locally."""

    function_arn: str
    queue_arn: str
    queue_url: str
    batch_size: int = DEFAULT_BATCH_SIZE
    maximum_batching_window_s: float = 0.0
    report_batch_item_failures: bool = False
    filters: FilterCriteria = field(default_factory=FilterCriteria)


@dataclass(frozen=True)
class QueueMappingStats:
    name: str
    invocations: int
    failed_invocations: int
    """Invocations that failed the whole batch: a function error, or a response that is not valid."""
    partial_failures: int
    deleted_messages: int
    filtered_out: int
    held: int
    """Messages received and waiting for the batching window."""


class QueueMappingRunner:
    """One `AWS::Lambda::EventSourceMapping` on an SQS queue: receives, invokes, deletes."""

    def __init__(
        self,
        name: str,
        settings: QueueMappingSettings,
        *,
        sqs_client: Any,
        invoke: Callable[[dict[str, Any]], InvocationResult],
        clock: Clock,
        max_concurrent_batches: int = 1,
    ) -> None:
        """`max_concurrent_batches`: how many batches may be in flight at once (1: one after the other, on the
        poller's own thread)."""
        if max_concurrent_batches < 1:
            raise ValueError("max_concurrent_batches must be at least 1")
        self.name = name
        self.max_concurrent_batches = max_concurrent_batches
        self._fifo = settings.queue_arn.endswith(".fifo")
        self._counters = threading.Lock()
        self.settings = settings
        self._sqs = sqs_client
        self._invoke = invoke
        self._clock = clock
        self._held: list[dict[str, Any]] = []
        self._held_bytes = _EMPTY_EVENT_BYTES
        """The invocation payload the held messages would make."""
        self._held_since = 0.0
        self._activity = PollActivity()
        self.listeners: list[Callable[[StepReport], None]] = []
        self.invocations = 0
        self.failed_invocations = 0
        self.partial_failures = 0
        self.deleted_messages = 0
        self.filtered_out = 0

    def poll_once(self) -> list[StepReport]:
        """Receive what the queue has, then do the next thing Lambda would: wait, invoke (one batch, or up to
        `max_concurrent_batches` at once, returning when all are done), or nothing; one report per batch.

        IDLE means the queue handed out nothing and no batch is held: a message left invisible by a failed
        invocation is not work until its visibility timeout ends and SQS hands it out again.
        """
        this_poll = self._activity.begin()
        reports = [StepReport(StepKind.FAILED)]
        try:
            reports = self._round()
        finally:
            self._activity.end(this_poll, idle=all(report.kind is StepKind.IDLE for report in reports))
        for report in reports:
            for listener in self.listeners:
                listener(report)
        return reports

    def activity_mark(self) -> int:
        """The number of polls started so far: a later `wait_until_idle(after=mark)` ignores them."""
        return self._activity.mark()

    def wait_until_idle(self, timeout_s: float, *, after: int | None = None) -> bool:
        """Block until a poll that started after `after` (default: now) found nothing to do."""
        return self._activity.wait_until_idle(timeout_s, after=after)

    def stats(self) -> QueueMappingStats:
        return QueueMappingStats(
            name=self.name,
            invocations=self.invocations,
            failed_invocations=self.failed_invocations,
            partial_failures=self.partial_failures,
            deleted_messages=self.deleted_messages,
            filtered_out=self.filtered_out,
            held=len(self._held),
        )

    def _round(self) -> list[StepReport]:
        """Start batches while the queue hands them out, up to the concurrency; wait for all of them."""
        batches: list[list[dict[str, Any]]] = []
        reports: list[StepReport] = []
        dropped: tuple[str, ...] = ()
        while len(batches) < self.max_concurrent_batches:
            dropped += self._receive()
            if not self._held:
                break
            if not self._batch_ready(self._clock()):
                due_at = self._held_since + self.settings.maximum_batching_window_s
                reports.append(StepReport(StepKind.WAITING, due_at=due_at))
                break
            batch = self._next_batch()
            if self._fifo and _groups(batch) & {group for started in batches for group in _groups(started)}:
                self._hold_again(batch)  # its group has a batch in flight: it goes in a later round
                break
            batches.append(batch)
        if len(batches) == 1:
            reports.insert(0, self._invoke_batch(batches[0]))
        elif batches:
            with ThreadPoolExecutor(len(batches), thread_name_prefix=f"{self.name[:24]}-batch") as pool:
                reports[:0] = list(pool.map(self._invoke_batch, batches))
        if self._fifo and any(report.kind in _NOT_ALL_DELETED for report in reports):
            # What the 6 MB cut held back must not be applied past the messages that come again: let SQS
            # hand it out again after them, in its group's order.
            self._held, self._held_bytes = [], _EMPTY_EVENT_BYTES
        if dropped:
            # Filtered-out messages were deleted: work was done, the next poll decides whether more is left.
            first = reports[0] if reports else StepReport(StepKind.SUCCEEDED)
            reports[:1] = [_with_committed(first, dropped)]
        return reports or [StepReport(StepKind.IDLE)]

    def _hold_again(self, batch: list[dict[str, Any]]) -> None:
        self._held = batch + self._held
        self._held_bytes += sum(_record_bytes(record) for record in batch)

    def _next_batch(self) -> list[dict[str, Any]]:
        """The held messages up to the 6 MB payload limit (at least one); the rest stay held."""
        size, cut = _EMPTY_EVENT_BYTES, 0
        while cut < len(self._held):
            record_bytes = _record_bytes(self._held[cut])
            if cut and size + record_bytes > MAX_INVOCATION_PAYLOAD_BYTES:
                break
            size += record_bytes
            cut += 1
        batch, self._held = self._held[:cut], self._held[cut:]
        self._held_bytes -= size - _EMPTY_EVENT_BYTES
        return batch

    def _receive(self) -> tuple[str, ...]:
        """Top up the held batch from the queue; delete (and return) the messages the filters drop."""
        settings = self.settings
        dropped: list[dict[str, Any]] = []
        while len(self._held) < settings.batch_size and self._held_bytes < MAX_INVOCATION_PAYLOAD_BYTES:
            wanted = min(SQS_MAX_MESSAGES_PER_RECEIVE, settings.batch_size - len(self._held))
            messages = self._sqs.receive_message(
                QueueUrl=settings.queue_url,
                MaxNumberOfMessages=wanted,
                WaitTimeSeconds=0,
                AttributeNames=["All"],
                MessageAttributeNames=["All"],
            ).get("Messages", [])
            if not messages:
                break
            for message in messages:
                record = lambda_record(message, settings.queue_arn)
                if not accepts_queue_record(settings.filters, record):
                    dropped.append(record)
                    continue
                if not self._held:
                    self._held_since = self._clock()
                held = next(
                    (i for i, r in enumerate(self._held) if r["messageId"] == record["messageId"]), None
                )
                if held is None:
                    self._held.append(record)
                else:
                    # Its visibility ran out while it was held for the window and SQS handed it out again:
                    # one copy, with the newest receipt handle (the only one that can delete it).
                    self._held_bytes -= _record_bytes(self._held[held])
                    self._held[held] = record
                self._held_bytes += _record_bytes(record)
            if settings.maximum_batching_window_s <= 0:
                break  # without a window, what one receive hands out is the batch
        self.filtered_out += len(dropped)
        return self._delete(dropped)

    def _batch_ready(self, now: float) -> bool:
        window = self.settings.maximum_batching_window_s
        full = len(self._held) >= self.settings.batch_size or self._held_bytes >= MAX_INVOCATION_PAYLOAD_BYTES
        if window <= 0 or full:
            return True
        return now - self._held_since >= window

    def _invoke_batch(self, batch: list[dict[str, Any]]) -> StepReport:
        """Invoke with one batch and delete what it processed (on a thread of its own when others run)."""
        message_ids = tuple(str(record["messageId"]) for record in batch)
        result = self._invoke({"Records": batch})
        failed = (
            reported_failures(result.payload, message_ids)
            if self.settings.report_batch_item_failures and not result.failed
            else []
        )
        with self._counters:
            self.invocations += 1
            if result.failed or failed is None:
                self.failed_invocations += 1
        if result.failed or failed is None:
            # Nothing is deleted: SQS hands the messages out again once their visibility timeout ends.
            return StepReport(StepKind.FAILED, invoked=message_ids)
        kept = {message_ids[position] for position in failed}
        deleted = self._delete([record for record in batch if record["messageId"] not in kept])
        if kept:
            with self._counters:
                self.partial_failures += 1
            return StepReport(StepKind.PARTIAL_FAILURE, invoked=message_ids, committed=deleted)
        return StepReport(StepKind.SUCCEEDED, invoked=message_ids, committed=deleted)

    def _delete(self, records: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
        """DeleteMessageBatch, ten at a time; returns the ids SQS deleted.

        A delete SQS refuses (a receipt handle that expired meanwhile) is logged: the message comes back
        after its visibility timeout and is processed again, as on AWS when Lambda's delete fails.
        """
        deleted: list[str] = []
        for start in range(0, len(records), SQS_MAX_MESSAGES_PER_RECEIVE):
            chunk = records[start : start + SQS_MAX_MESSAGES_PER_RECEIVE]
            answer = self._sqs.delete_message_batch(
                QueueUrl=self.settings.queue_url,
                Entries=[
                    {"Id": str(index), "ReceiptHandle": record["receiptHandle"]}
                    for index, record in enumerate(chunk)
                ],
            )
            for entry in answer.get("Successful", []):
                deleted.append(str(chunk[int(entry["Id"])]["messageId"]))
            for entry in answer.get("Failed", []):
                logger.warning(
                    "%s: SQS did not delete message %s (%s): it will be received again",
                    self.name,
                    chunk[int(entry["Id"])]["messageId"],
                    entry.get("Code"),
                )
        with self._counters:
            self.deleted_messages += len(deleted)
        return tuple(deleted)


_EMPTY_EVENT_BYTES = len(b'{"Records":[]}')
_NOT_ALL_DELETED = frozenset({StepKind.FAILED, StepKind.PARTIAL_FAILURE})


def _groups(batch: Sequence[Mapping[str, Any]]) -> set[str]:
    """The FIFO message groups a batch holds."""
    return {str(record["attributes"].get("MessageGroupId")) for record in batch}


def _with_committed(report: StepReport, committed: tuple[str, ...]) -> StepReport:
    return dataclasses.replace(report, committed=committed + report.committed)


def _record_bytes(record: Mapping[str, Any]) -> int:
    """What the record adds to the invocation payload: its compact UTF-8 JSON and a separating comma."""
    return len(json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode()) + 1


def lambda_record(message: Mapping[str, Any], queue_arn: str) -> dict[str, Any]:
    """A ReceiveMessage message as Lambda puts it in the event.

    `md5OfMessageAttributes` is null when the message has no attributes, as in the events Lambda sends;
    binary attribute values are base64 text (boto3 hands them over as bytes).
    """
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": dict(message.get("Attributes", {})),
        "messageAttributes": {
            name: _attribute_as_sent(value) for name, value in message.get("MessageAttributes", {}).items()
        },
        "md5OfMessageAttributes": message.get("MD5OfMessageAttributes"),
        "md5OfBody": message["MD5OfBody"],
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": queue_arn.split(":")[3],
    }


def _attribute_as_sent(value: Mapping[str, Any]) -> dict[str, Any]:
    shaped: dict[str, Any] = {}
    if "StringValue" in value:
        shaped["stringValue"] = value["StringValue"]
    if "BinaryValue" in value:
        shaped["binaryValue"] = base64_text(value["BinaryValue"])
    shaped["stringListValues"] = list(value.get("StringListValues", []))
    shaped["binaryListValues"] = [base64_text(item) for item in value.get("BinaryListValues", [])]
    shaped["dataType"] = value["DataType"]
    return shaped
