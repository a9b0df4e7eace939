"""Lambda entry point of the outbox publisher (handler `outbox_publisher.handler.handler`).

Thin by design: Powertools logging, tracing and metrics; the stream batch goes to the `StreamPublisher`;
the answer is Lambda's partial-batch response (`stream.batch_item_failures`). Configuration is read and
validated once per process, before the first record is touched, and a bad one fails every invocation
loudly instead of publishing anywhere by accident.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, NamedTuple

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import MetricUnit

import outbox_tracing as tracing
from outbox import metrics as metric_names
from outbox.aws import invocation_client
from outbox.clock import Clock, utc_now
from outbox.payload_store import PayloadStore
from outbox_publisher.config import PublisherConfig
from outbox_publisher.deadline import LambdaDeadline
from outbox_publisher.errors import InvalidStreamEventError, StreamConfigurationError
from outbox_publisher.leases import DynamoDBRowClaimer, RowClaimer
from outbox_publisher.ports import DestinationPort, PoisonQueue
from outbox_publisher.predecessors import PredecessorReader
from outbox_publisher.region_store import CachedOwnership, DynamoDBRegionStore, RegionStore
from outbox_publisher.regions import VIEW_MAX_AGE
from outbox_publisher.report import EventOutcome, Status
from outbox_publisher.retry import Random, RetryPolicy, Sleep, system_random, system_sleep
from outbox_publisher.routing import Destination
from outbox_publisher.row_updates import RowUpdater
from outbox_publisher.stream import StreamBatchResult, StreamPublisher, batch_item_failures
from outbox_publisher.waves import LOOKAHEAD
from outbox_publisher.wiring import build_engine

# Per outbox (outbox.metrics.service_name), as its construct set it.
SERVICE = metric_names.configured_service(os.environ, metric_names.PUBLISHER_SERVICE)
MAX_LOGGED_IDS = 100

logger = Logger(service=SERVICE)
tracer = tracing.tracer(SERVICE)
metrics = Metrics(service=SERVICE)
# The engine and its adapters log through the standard library; give them the same JSON output.
copy_config_to_registered_loggers(source_logger=logger, include={"outbox", "outbox_publisher"})


class Publisher(NamedTuple):
    """The process's wiring."""

    config: PublisherConfig
    stream: StreamPublisher


def build_publisher(
    config: PublisherConfig,
    *,
    destinations: Mapping[Destination, DestinationPort] | None = None,
    poison_queue: PoisonQueue | None = None,
    updater: RowUpdater | None = None,
    predecessors: PredecessorReader | None = None,
    claimer: RowClaimer | None = None,
    clock: Clock = utc_now,
    sleep: Sleep = system_sleep,
    random: Random = system_random,
    retry: RetryPolicy | None = None,
    payloads: PayloadStore | None = None,
    lookahead: int = LOOKAHEAD,
    region_store: RegionStore | None = None,
) -> Publisher:
    """Wires the publisher; tests pass their own ports, clock and sleep (and the bench a `lookahead`)."""
    engine = build_engine(
        config,
        destinations=destinations,
        poison_queue=poison_queue,
        updater=updater,
        predecessors=predecessors,
        clock=clock,
        sleep=sleep,
        random=random,
        retry=retry,
        lookahead=lookahead,
        payloads=payloads,
    )
    regions = None
    if config.regions is not None:
        store = region_store or DynamoDBRegionStore(invocation_client("dynamodb"), config.table_name)
        regions = CachedOwnership(store, config.regions, max_age=VIEW_MAX_AGE, clock=clock)
    stream = StreamPublisher(
        engine,
        config.table_name,
        claimer or DynamoDBRowClaimer(invocation_client("dynamodb"), config.table_name),
        sweep_grace=config.sweep_grace,
        clock=clock,
        retry=retry,
        regions=regions,
    )
    return Publisher(config, stream)


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
    try:
        result = app.stream.publish(records, deadline)
    except StreamConfigurationError as error:
        # Fail the invocation: the mapping retries, PublisherErrors fires, nothing is skipped or poisoned.
        metrics.add_metric(name=metric_names.CONFIGURATION_ERRORS, unit=MetricUnit.Count, value=1)
        logger.error("the publisher is misconfigured; failing the invocation", extra={"reason": str(error)})
        raise
    response = batch_item_failures(records, result.first_failure)
    _observe(result, len(response["batchItemFailures"]))
    return response


def _observe(result: StreamBatchResult, handed_back: int) -> None:
    report = result.report
    published: list[EventOutcome] = []
    poisoned = undelivered = 0
    for outcome in report.outcomes:  # one pass: this runs once per invocation, whatever its batch
        if outcome.status is Status.PUBLISHED:
            published.append(outcome)
        elif outcome.status is Status.POISONED:
            poisoned += 1
        elif outcome.status is Status.UNDELIVERED:
            undelivered += 1
    contract_breaks = result.contract_breaks
    rows, parks = report.rows, result.parks
    counts = {
        metric_names.EVENTS_PUBLISHED: len(published),
        metric_names.EVENTS_FAILED: handed_back,
        metric_names.UNDELIVERED_EVENTS: undelivered,
        metric_names.POISON_EVENTS: poisoned,
        metric_names.RECORDS_SKIPPED: sum(result.skipped.values()),
        metric_names.ROW_UPDATE_FAILURES: len(rows.failed) + len(parks.failed),
        metric_names.ROWS_ALREADY_MOVED: len(rows.already_moved) + len(parks.already_moved),
        metric_names.HELD_EVENTS: sum(result.held.values()),
        metric_names.WRITER_CONTRACT_VIOLATIONS: contract_breaks,
    }
    for name, count in counts.items():
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=count)
    # One value per event (the dashboard's p99 is over events).
    for outcome in published:
        if (latency := outcome.latency_ms) is not None:
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
        "undelivered": undelivered,
        "poisoned": poisoned,
        "skipped": result.skipped,
        "held": result.held,
        "writer_contract_violations": contract_breaks,
        "claims": result.claims,
        "gate_reads": report.gate_reads,
        "handed_back": handed_back,
        "calls": report.calls,
        "rows_settled_or_failed": len(rows.done),
        "rows_parked": len(parks.done),
        "rows_already_moved": len(rows.already_moved) + len(parks.already_moved),
        "rows_not_updated": len(rows.failed) + len(parks.failed),
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
