"""Lambda entry point of the sweeper (handler `outbox_sweeper.handler.handler`), run on a schedule.

Thin: configuration read and validated once per process (a bad one fails every run loudly), one sweep per
invocation, and its figures as metrics on every run, also when there is nothing to do: an alarm on the
oldest pending age must see data when all is well, not only when something is stuck.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import MetricUnit

from outbox import metrics as metric_names
from outbox import tracing
from outbox.aws import invocation_client
from outbox.clock import Clock, utc_now
from outbox.deadline import LambdaDeadline
from outbox.leases import DynamoDBRowClaimer, RowClaimer
from outbox.predecessors import DynamoDBPredecessorReader, PredecessorReader
from outbox.row_marks import RowMarker
from outbox_publisher.ports import DestinationPort, PoisonQueue
from outbox_publisher.retry import Random, RetryPolicy, Sleep, system_random, system_sleep
from outbox_publisher.routing import Destination
from outbox_publisher.wiring import build_engine
from outbox_sweeper.config import SweeperConfig
from outbox_sweeper.pending import DynamoDBPendingIndex, PendingIndex
from outbox_sweeper.sweep import Sweeper, SweepReport

SERVICE = metric_names.SWEEPER_SERVICE

logger = Logger(service=SERVICE)
tracer = tracing.tracer(SERVICE)
metrics = Metrics(service=SERVICE)
copy_config_to_registered_loggers(
    source_logger=logger, include={"outbox", "outbox_publisher", "outbox_sweeper"}
)


def build_sweeper(
    config: SweeperConfig,
    *,
    destinations: Mapping[Destination, DestinationPort] | None = None,
    poison_queue: PoisonQueue | None = None,
    marker: RowMarker | None = None,
    predecessors: PredecessorReader | None = None,
    claimer: RowClaimer | None = None,
    index: PendingIndex | None = None,
    clock: Clock = utc_now,
    sleep: Sleep = system_sleep,
    random: Random = system_random,
    retry: RetryPolicy | None = None,
) -> Sweeper:
    """Wires the sweeper; tests pass their own ports, clock and sleep."""
    table = config.publisher.table_name
    reader = predecessors or DynamoDBPredecessorReader(
        invocation_client("dynamodb"),
        table,
        clock=clock,
        published_retention=config.publisher.published_retention,
    )
    engine = build_engine(
        config.publisher,
        destinations=destinations,
        poison_queue=poison_queue,
        marker=marker,
        predecessors=reader,
        clock=clock,
        sleep=sleep,
        random=random,
        retry=retry,
    )
    return Sweeper(
        engine=engine,
        index=index or DynamoDBPendingIndex(invocation_client("dynamodb"), table),
        predecessors=reader,
        claimer=claimer or DynamoDBRowClaimer(invocation_client("dynamodb"), table),
        grace=config.publisher.sweep_grace,
        settings=config.sweep,
        clock=clock,
        random=random,
        retry=retry,
    )


_sweeper: Sweeper | None = None


def sweeper() -> Sweeper:
    """The process's sweeper, built on first use from the environment (once per cold start)."""
    global _sweeper  # noqa: PLW0603 - one wiring per process, like the boto3 clients
    if _sweeper is None:
        _sweeper = build_sweeper(SweeperConfig.from_env(os.environ))
    return _sweeper


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return sweep(context, sweeper())


def sweep(context: Any, app: Sweeper) -> dict[str, Any]:
    report = app.run(LambdaDeadline(context))
    _observe(report)
    return summary(report)


def summary(report: SweepReport) -> dict[str, Any]:
    publish = report.publish
    return {
        "pending": report.pending,
        "pending_counted_in_full": report.pending_complete,
        "oldest_pending_age_s": round(report.oldest_pending_age_s, 3),
        "due": report.due,
        "claimed": report.claimed,
        "swept": report.swept,
        "poisoned": report.poisoned,
        "gave_up": report.gave_up,
        "backed_off": report.backed_off,
        "held_aggregates": report.held_aggregates,
        "calls": publish.calls,
        "rows_not_marked": len(publish.marking.failed),
    }


def _observe(report: SweepReport) -> None:
    count = MetricUnit.Count
    metrics.add_metric(
        name=metric_names.OLDEST_PENDING_AGE_SECONDS,
        unit=MetricUnit.Seconds,
        value=report.oldest_pending_age_s,
    )
    metrics.add_metric(name=metric_names.PENDING_EVENTS, unit=count, value=report.pending)
    metrics.add_metric(name=metric_names.HELD_AGGREGATES, unit=count, value=report.held_aggregates)
    metrics.add_metric(name=metric_names.SWEPT_EVENTS, unit=count, value=report.swept)
    metrics.add_metric(name=metric_names.BACKED_OFF_EVENTS, unit=count, value=report.backed_off)
    metrics.add_metric(name=metric_names.GAVE_UP_EVENTS, unit=count, value=report.gave_up)
    metrics.add_metric(
        name=metric_names.MARKING_FAILURES, unit=count, value=len(report.publish.marking.failed)
    )
    metrics.add_metric(
        name=metric_names.MARKING_FALLBACKS, unit=count, value=report.publish.marking.fallbacks
    )
    metrics.add_metric(
        name=metric_names.WRITER_CONTRACT_VIOLATIONS, unit=count, value=report.publish.contract_breaks
    )
    level = logger.warning if report.held_aggregates or report.gave_up or report.backed_off else logger.info
    level("sweep done", extra=summary(report))
