"""Lambda entry point of the outbox publisher (handler `outbox_publisher.handler.handler`).

Thin by design: Powertools logging, tracing and metrics; the stream batch goes to the
`StreamPublisher`; the answer is Powertools' partial-batch response. Configuration is read and
validated once per process, before the first record is touched, and a bad one fails every invocation
loudly instead of publishing anywhere by accident.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord

from outbox import metrics as metric_names
from outbox.aws import client
from outbox.clock import Clock, utc_now
from outbox.marking import DynamoDBRowMarker, RowMarker
from outbox_publisher.adapters import (
    EventBridgeDestination,
    SnsDestination,
    SqsPoisonQueue,
    publishing_client,
)
from outbox_publisher.config import PublisherConfig
from outbox_publisher.engine import PublishingEngine
from outbox_publisher.errors import InvalidStreamEventError
from outbox_publisher.messages import Message
from outbox_publisher.ports import DestinationPort, EntryResult, PoisonQueue
from outbox_publisher.report import Status
from outbox_publisher.retry import LambdaDeadline, Random, RetryPolicy, Sleep, system_random, system_sleep
from outbox_publisher.routing import Destination
from outbox_publisher.stream import StopAtFirstFailureProcessor, StreamBatchResult, StreamPublisher

SERVICE = metric_names.PUBLISHER_SERVICE
MAX_LOGGED_IDS = 100

logger = Logger(service=SERVICE)
tracer = Tracer(service=SERVICE)
metrics = Metrics(service=SERVICE)
# The engine and the marker log through the standard library; give them the same JSON output.
copy_config_to_registered_loggers(source_logger=logger, include={"outbox", "outbox_publisher"})


class TracedDestination:
    """A destination whose every publish call is an X-Ray subsegment."""

    def __init__(self, inner: DestinationPort) -> None:
        self._inner = inner
        self.destination = inner.destination
        self.max_entry_bytes = inner.max_entry_bytes
        self.max_batch_bytes = inner.max_batch_bytes

    def size_of(self, message: Message) -> int:
        return self._inner.size_of(message)

    @tracer.capture_method(capture_response=False)
    def publish(self, messages: Sequence[Message]) -> list[EntryResult]:
        tracer.put_annotation("destination", self.destination.value)
        tracer.put_metadata("event_ids", [message.event.event_id for message in messages])
        return self._inner.publish(messages)


@dataclass(frozen=True)
class Publisher:
    config: PublisherConfig
    stream: StreamPublisher


def build_publisher(
    config: PublisherConfig,
    *,
    destinations: Mapping[Destination, DestinationPort] | None = None,
    poison_queue: PoisonQueue | None = None,
    marker: RowMarker | None = None,
    clock: Clock = utc_now,
    sleep: Sleep = system_sleep,
    random: Random = system_random,
    retry: RetryPolicy | None = None,
) -> Publisher:
    """Wires the publisher; tests pass their own ports, clock and sleep."""
    if destinations is None:
        ports: dict[Destination, DestinationPort] = {}
        if config.topic_arn is not None:
            ports[Destination.SNS] = SnsDestination(publishing_client("sns"), config.topic_arn)
        if config.event_bus_name is not None and config.event_source is not None:
            ports[Destination.EVENTBRIDGE] = EventBridgeDestination(
                publishing_client("events"), config.event_bus_name, config.event_source
            )
        destinations = ports
    engine = PublishingEngine(
        destinations={name: TracedDestination(port) for name, port in destinations.items()},
        router=config.router,
        poison_queue=poison_queue or SqsPoisonQueue(client("sqs"), config.poison_queue_url),
        marker=marker
        or DynamoDBRowMarker(
            client("dynamodb"), config.table_name, published_retention=config.published_retention
        ),
        clock=clock,
        retry=retry,
        sleep=sleep,
        random=random,
    )
    return Publisher(config, StreamPublisher(engine, config.table_name))


_publisher: Publisher | None = None


def publisher() -> Publisher:
    """The process's publisher, built on first use from the environment (once per cold start)."""
    global _publisher  # noqa: PLW0603 - one wiring per process, like the boto3 clients
    if _publisher is None:
        _publisher = build_publisher(PublisherConfig.from_env(os.environ))
    return _publisher


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return handle(event, context, publisher())


def handle(event: Mapping[str, Any], context: Any, app: Publisher) -> dict[str, Any]:
    records = event.get("Records") if isinstance(event, Mapping) else None
    if not isinstance(records, list):
        raise InvalidStreamEventError("the event has no Records list: not a DynamoDB stream batch")
    deadline = LambdaDeadline(context)
    outcome: list[StreamBatchResult] = []

    def publish_batch(batch: Sequence[DynamoDBRecord]) -> int | None:
        result = app.stream.publish(batch, deadline)
        outcome.append(result)
        return result.first_failure

    processor = StopAtFirstFailureProcessor()
    with processor(records=records, handler=publish_batch):
        processor.process()
    response = processor.response()
    if outcome:
        _observe(outcome[0], len(response["batchItemFailures"]))
    return dict(response)


def _observe(result: StreamBatchResult, handed_back: int) -> None:
    report = result.report
    published = [outcome for outcome in report.outcomes if outcome.status is Status.PUBLISHED]
    metrics.add_metric(name=metric_names.EVENTS_PUBLISHED, unit=MetricUnit.Count, value=len(published))
    metrics.add_metric(name=metric_names.EVENTS_FAILED, unit=MetricUnit.Count, value=handed_back)
    metrics.add_metric(
        name=metric_names.POISON_EVENTS, unit=MetricUnit.Count, value=report.count(Status.POISONED)
    )
    metrics.add_metric(
        name=metric_names.RECORDS_SKIPPED, unit=MetricUnit.Count, value=sum(result.skipped.values())
    )
    metrics.add_metric(
        name=metric_names.MARKING_FAILURES, unit=MetricUnit.Count, value=len(report.marking.failed)
    )
    metrics.add_metric(
        name=metric_names.ROWS_ALREADY_MOVED, unit=MetricUnit.Count, value=len(report.marking.already_moved)
    )
    for outcome in published:
        latency = outcome.latency_ms
        if latency is not None:
            metrics.add_metric(
                name=metric_names.PUBLISH_LATENCY_MS, unit=MetricUnit.Milliseconds, value=max(latency, 0.0)
            )
    summary: dict[str, Any] = {
        "records": result.records,
        # Ids only, never payloads; capped so a 10,000-record batch still logs one readable line.
        "event_ids": [
            str(outcome.candidate.event.event_id)
            for outcome in published[:MAX_LOGGED_IDS]
            if outcome.candidate.event
        ],
        "published": len(published),
        "poisoned": report.count(Status.POISONED),
        "skipped": result.skipped,
        "handed_back": handed_back,
        "calls": report.calls,
        "rows_marked": len(report.marking.marked),
        "rows_already_moved": len(report.marking.already_moved),
        "rows_not_marked": len(report.marking.failed),
    }
    if report.stopped_at is not None:
        stop = report.outcomes[report.stopped_at]
        event = stop.candidate.event
        summary["stopped_at"] = {
            "sequence_number": stop.candidate.ref,
            "event_id": event.event_id if event else None,
            "code": stop.code,
        }
        logger.warning("batch partially published; handing the rest back to Lambda", extra=summary)
    else:
        logger.info("batch published", extra=summary)
