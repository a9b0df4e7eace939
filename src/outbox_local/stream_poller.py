"""The I/O around the stream mapping semantics: reading shards with `dynamodbstreams`, sending on-failure
metadata to SQS or SNS. Never a moto event source mapping: moto would drain the stream itself
(docs/local.md, "Where moto differs from AWS").
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
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
        resume_after: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.settings = settings
        self._streams = streams_client
        self._invoke = invoke
        self._send = send_to_destination
        self._clock = clock
        self._region = region
        self._starting_position = starting_position
        self._iterators: dict[str, str] = {}
        self._resume_after = dict(resume_after or {})
        """Shard -> the checkpoint a previous runner of this mapping reached (a stack update replaced it):
        reading starts after it, not at `starting_position` again (which would invoke the function with
        every record once more)."""
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

    def checkpoints(self) -> dict[str, str]:
        """Shard -> the sequence number of the last record this runner is done with (processed, filtered
        out or given up on): where a runner replacing it resumes."""
        return {
            shard_id: processor.checkpoint
            for shard_id, processor in self.shards.items()
            if processor.checkpoint is not None
        }

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
                position: dict[str, str] = {"ShardIteratorType": self._starting_position}
                if shard_id in self._resume_after:
                    position = {
                        "ShardIteratorType": "AFTER_SEQUENCE_NUMBER",
                        "SequenceNumber": self._resume_after[shard_id],
                    }
                self._iterators[shard_id] = self._streams.get_shard_iterator(
                    StreamArn=self.settings.stream_arn, ShardId=shard_id, **position
                )["ShardIterator"]
            response = self._streams.get_records(ShardIterator=self._iterators[shard_id], Limit=1000)
            self._iterators[shard_id] = response["NextShardIterator"]
            batches[shard_id] = response["Records"]
        return batches


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
