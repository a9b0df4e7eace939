"""The I/O around the stream mapping semantics: reading shards with `dynamodbstreams`, sending on-failure
metadata to SQS or SNS. Never a moto event source mapping: moto would drain the stream itself
(docs/local.md, "Where moto differs from AWS").
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from outbox_local.errors import UnsupportedResourceError
from outbox_local.invocation import InvocationResult
from outbox_local.poll_activity import PollActivity
from outbox_local.stream_mapping import (
    Clock,
    MappingSettings,
    ShardProcessor,
    StepKind,
    StepReport,
)
from outbox_local.stream_records import lambda_record

logger = logging.getLogger("outbox_local.streams")

# Lambda's words for a stream mapping's `LastProcessingResult` (AWS Lambda Developer Guide, "Using AWS
# Lambda with Amazon Kinesis", event source mapping API examples).
NO_RECORDS_PROCESSED = "No records processed"
PROCESSING_OK = "OK"
FUNCTION_CALL_FAILED = "PROBLEM: Function call failed"


@dataclass(frozen=True)
class ShardPosition:
    """Where a mapping resumes reading a shard after a restart: after its checkpoint (the last record
    committed or discarded), or, before any, where it first started reading (its first iterator)."""

    shard_id: str
    checkpoint: str | None
    first_iterator: str


@dataclass(frozen=True)
class MappingStats:
    name: str
    invocations: int
    failed_invocations: int
    discarded_records: int
    backlog: int
    iterator_age_s: float
    """Age of the oldest record not yet processed (0 when none waits), as Lambda's IteratorAge measures it."""
    last_processing_result: str


class StreamMappingRunner:
    """One `AWS::Lambda::EventSourceMapping`: polls its stream and feeds each shard's processor."""

    def __init__(
        self,
        name: str,
        settings: MappingSettings,
        *,
        streams_client: Any,
        invoke: Callable[[dict[str, Any]], InvocationResult],
        send_to_destination: Callable[[dict[str, Any]], None] | None,
        clock: Clock,
        region: str,
        starting_position: str = "TRIM_HORIZON",
        resume_at: Sequence[ShardPosition] = (),
    ) -> None:
        """`resume_at`: the positions `positions()` answered before a restart; those shards are read from
        there, never from `starting_position` again (which would invoke everything a second time)."""
        self.name = name
        self.settings = settings
        self._streams = streams_client
        self._invoke = invoke
        self._send = send_to_destination
        self._clock = clock
        self._region = region
        self._starting_position = starting_position
        self._iterators: dict[str, str] = {}
        self._first_iterators: dict[str, str] = {}
        self._resume_at = {position.shard_id: position for position in resume_at}
        self.shards: dict[str, ShardProcessor] = {}
        self._activity = PollActivity()
        self.listeners: list[Callable[[StepReport], None]] = []
        self.last_processing_result = NO_RECORDS_PROCESSED
        """What the last invocation did, as Lambda's mapping API reports it: a function error is a failed
        call; a function that returned (a partial batch failure included) was called successfully."""

    def poll_once(self) -> list[StepReport]:
        """Read what the stream has for each shard, then let each shard processor take one step."""
        this_poll = self._activity.begin()
        for shard_id, records in self._read().items():
            processor = self._processor(shard_id)
            processor.offer([lambda_record(raw, self.settings.stream_arn, self._region) for raw in records])
        reports = [processor.step() for processor in self.shards.values()]
        for report in reports:
            for listener in self.listeners:
                listener(report)
        self._activity.end(this_poll, idle=all(r.kind is StepKind.IDLE for r in reports))
        return reports

    def activity_mark(self) -> int:
        """The number of polls started so far: a later `wait_until_idle(after=mark)` ignores them."""
        return self._activity.mark()

    def wait_until_idle(self, timeout_s: float, *, after: int | None = None) -> bool:
        """Block until a poll that started after `after` (default: now) found nothing to do.

        A poll already under way when the caller wrote its records may have read the stream before
        them; only a poll started later can vouch that they were handled.
        """
        return self._activity.wait_until_idle(timeout_s, after=after)

    def stats(self) -> MappingStats:
        processors = list(self.shards.values())
        oldest = [at for p in processors if (at := p.oldest_unprocessed_at) is not None]
        return MappingStats(
            name=self.name,
            invocations=sum(p.invocations for p in processors),
            failed_invocations=sum(p.failed_invocations for p in processors),
            discarded_records=sum(p.discarded_records for p in processors),
            backlog=sum(p.backlog for p in processors),
            iterator_age_s=max(0.0, self._clock() - min(oldest)) if oldest else 0.0,
            last_processing_result=self.last_processing_result,
        )

    def positions(self) -> list[ShardPosition]:
        """Where each shard read so far would resume (read during a cut: `outbox_local.persistence.cut`)."""
        positions = {}
        for shard_id, first_iterator in list(self._first_iterators.items()):
            processor = self.shards.get(shard_id)
            checkpoint = processor.checkpoint if processor is not None else None
            positions[shard_id] = ShardPosition(shard_id, checkpoint, first_iterator)
        # A shard resumed but not read again yet keeps the position it was resumed at.
        for shard_id, position in self._resume_at.items():
            positions.setdefault(shard_id, position)
        return list(positions.values())

    def _processor(self, shard_id: str) -> ShardProcessor:
        if shard_id not in self.shards:
            self.shards[shard_id] = ShardProcessor(
                self.settings,
                shard_id=shard_id,
                invoke=self._invoke_and_record,
                send_to_destination=self._send,
                clock=self._clock,
            )
        return self.shards[shard_id]

    def _invoke_and_record(self, event: dict[str, Any]) -> InvocationResult:
        result = self._invoke(event)
        self.last_processing_result = FUNCTION_CALL_FAILED if result.failed else PROCESSING_OK
        return result

    def _read(self) -> dict[str, list[dict[str, Any]]]:
        description = self._streams.describe_stream(StreamArn=self.settings.stream_arn)["StreamDescription"]
        batches: dict[str, list[dict[str, Any]]] = {}
        for shard in description["Shards"]:
            shard_id = shard["ShardId"]
            if shard_id not in self._iterators:
                self._iterators[shard_id] = self._first_iterator(shard_id)
            response = self._streams.get_records(ShardIterator=self._iterators[shard_id], Limit=1000)
            self._iterators[shard_id] = response["NextShardIterator"]
            batches[shard_id] = response["Records"]
        return batches

    def _first_iterator(self, shard_id: str) -> str:
        resumed = self._resume_at.get(shard_id)
        if resumed is None:
            iterator: str = self._streams.get_shard_iterator(
                StreamArn=self.settings.stream_arn,
                ShardId=shard_id,
                ShardIteratorType=self._starting_position,
            )["ShardIterator"]
            self._first_iterators[shard_id] = iterator
            return iterator
        self._first_iterators[shard_id] = resumed.first_iterator
        processor = self._processor(shard_id)
        if resumed.checkpoint is None:
            return resumed.first_iterator
        processor.checkpoint = resumed.checkpoint
        resumed_iterator: str = self._streams.get_shard_iterator(
            StreamArn=self.settings.stream_arn,
            ShardId=shard_id,
            ShardIteratorType="AFTER_SEQUENCE_NUMBER",
            SequenceNumber=resumed.checkpoint,
        )["ShardIterator"]
        return resumed_iterator


def destination_sender(
    clients: Callable[[str], Any], destination_arn: str
) -> Callable[[dict[str, Any]], None]:
    """Send on-failure metadata to the SQS queue or SNS topic the mapping names."""
    service = destination_arn.split(":")[2]
    if service == "sqs":
        queue_name = destination_arn.rsplit(":", 1)[-1]
        sqs = clients("sqs")
        queue_url = sqs.get_queue_url(QueueName=queue_name)["QueueUrl"]

        def to_queue(document: dict[str, Any]) -> None:
            sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps(document))

        return to_queue
    if service == "sns":
        sns = clients("sns")

        def to_topic(document: dict[str, Any]) -> None:
            sns.publish(TopicArn=destination_arn, Message=json.dumps(document))

        return to_topic
    raise UnsupportedResourceError(
        f"on-failure destination {destination_arn}: only SQS and SNS are supported"
    )


def iterator_age_ms(mappings: Sequence[StreamMappingRunner], function_name: str) -> float | None:
    """Lambda's `IteratorAge` of a function: the oldest record its stream mappings have not processed."""
    ages = [
        mapping.stats().iterator_age_s * 1000
        for mapping in mappings
        if mapping.settings.function_arn.rsplit(":", 1)[-1] == function_name
    ]
    return max(ages) if ages else None
