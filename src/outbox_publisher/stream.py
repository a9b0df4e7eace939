"""The DynamoDB-stream layer: Lambda's stream records in, the engine in the middle, batchItemFailures out.

Only INSERTs of outbox rows are publishable. MODIFY (our own marking), REMOVE (TTL expiry, clean-up) and
records of any other table are skipped and counted, never an error.

Powertools' BatchProcessor hands records to a handler one at a time and carries on past a failure. On an
ordered stream that is wrong twice over: records after a failure would be published ahead of it, and since
Lambda checkpoints at the LOWEST reported sequence number and re-sends everything after it
(docs/publisher.md, "Retries"), they would be published again. `StopAtFirstFailureProcessor` keeps
Powertools' response shape and reporting but processes the batch as one unit: the engine stops at the
first record it cannot publish, and that record and EVERY later one are reported, by SequenceNumber.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord

from outbox.stream_mapping import INSERT_EVENT_NAME
from outbox_publisher.candidates import Candidate
from outbox_publisher.engine import PublishingEngine
from outbox_publisher.errors import InvalidStreamEventError
from outbox_publisher.poison import PoisonReason, Rejection
from outbox_publisher.report import PublishReport
from outbox_publisher.retry import Deadline

INSERT = INSERT_EVENT_NAME


class RecordNotPublishedError(Exception):
    """Stands for a record handed back to Lambda (Powertools' failure handler wants an exception)."""


@dataclass(frozen=True, slots=True)
class Skipped:
    reason: str


@dataclass(slots=True)
class StreamBatchResult:
    report: PublishReport
    skipped: dict[str, int]
    """Skipped records by reason: `modify`, `remove`, `other_table`..."""
    first_failure: int | None
    """Index, in the Lambda batch, of the first record handed back; every later one is handed back too."""
    records: int = 0


def classify(record: DynamoDBRecord, table_name: str) -> Candidate | Skipped:
    """A publishable candidate, or why the record is skipped."""
    raw: dict[str, Any] = record.raw_event
    source_arn = raw.get("eventSourceARN")
    if isinstance(source_arn, str) and f":table/{table_name}/stream/" not in source_arn:
        return Skipped("other_table")
    event_name = raw.get("eventName")
    if event_name != INSERT:
        return Skipped(str(event_name).lower() if event_name else "unknown")
    stream = raw.get("dynamodb") or {}
    sequence_number = sequence_number_of(raw)
    source = {
        "event_source_arn": str(source_arn or ""),
        "sequence_number": sequence_number,
        "event_name": INSERT,
    }
    keys = stream.get("Keys")
    image = stream.get("NewImage")
    if not isinstance(image, dict):
        # A stream without NEW_IMAGE cannot carry the event; the row itself is intact in the table.
        rejection = Rejection(PoisonReason.INVALID_ROW, "NoNewImage", "the stream record carries no NewImage")
        return Candidate.rejected(sequence_number, keys or {}, rejection, keys=keys, source=source)
    return Candidate.from_row(sequence_number, image, keys=keys, source=source)


def sequence_number_of(raw: dict[str, Any]) -> str:
    sequence_number = (raw.get("dynamodb") or {}).get("SequenceNumber")
    if not isinstance(sequence_number, str) or not sequence_number:
        # An empty or null itemIdentifier would fail the whole batch anyway; say why instead.
        raise InvalidStreamEventError("a stream record has no SequenceNumber")
    return sequence_number


class StreamPublisher:
    """Publishes one Lambda batch of one shard with the engine, and says where it stopped."""

    def __init__(self, engine: PublishingEngine, table_name: str) -> None:
        self._engine = engine
        self._table_name = table_name

    def publish(self, records: Sequence[DynamoDBRecord], deadline: Deadline) -> StreamBatchResult:
        for record in records:
            sequence_number_of(record.raw_event)  # before anything is published, not halfway
        candidates: list[Candidate] = []
        positions: list[int] = []
        skipped: dict[str, int] = {}
        for position, record in enumerate(records):
            verdict = classify(record, self._table_name)
            if isinstance(verdict, Skipped):
                skipped[verdict.reason] = skipped.get(verdict.reason, 0) + 1
                continue
            candidates.append(verdict)
            positions.append(position)
        report = self._engine.publish(candidates, deadline)
        first_failure = None if report.stopped_at is None else positions[report.stopped_at]
        return StreamBatchResult(report, skipped, first_failure, len(records))


BatchHandler = Callable[[Sequence[DynamoDBRecord]], int | None]
"""Processes a whole batch; returns the index of the first record to hand back, or None."""


class StopAtFirstFailureProcessor(BatchProcessor):
    """Powertools' BatchProcessor for DynamoDB streams, processing the batch as one ordered unit.

    Unlike the stock processor, which calls the handler per record and carries on past failures, this one
    calls a `BatchHandler` once with every record and reports the record it stopped at and every later
    one. `raise_on_entire_batch_failure` is off: when the first record fails, reporting every record has
    the same effect as failing the invocation, without making Lambda bisect the batch.
    """

    def __init__(self) -> None:
        super().__init__(event_type=EventType.DynamoDBStreams, raise_on_entire_batch_failure=False)

    def process(self) -> list[tuple[Any, ...]]:
        records = [DynamoDBRecord(record) for record in self.records]
        handler: BatchHandler = self.handler
        first_failure = handler(records)
        responses: list[tuple[Any, ...]] = []
        for position, (raw, record) in enumerate(zip(self.records, records, strict=True)):
            if first_failure is None or position < first_failure:
                responses.append(self.success_handler(raw, None))
                continue
            error = RecordNotPublishedError(
                "not published: an earlier record of the shard failed"
                if position > first_failure
                else "not published: transient failure"
            )
            responses.append(self.failure_handler(record, (RecordNotPublishedError, error, None)))
        return responses

    def _process_record(self, record: dict[str, Any]) -> Any:
        raise NotImplementedError("records are processed as one batch, see process()")
