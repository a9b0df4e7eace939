"""Lambda entry point of the sweeper (handler `outbox_sweeper.handler.handler`), run on a schedule.

Thin: configuration read and validated once per process (a bad one fails every run loudly), one sweep per
invocation (of the segment the schedule names: `{"segment": n}`, 0 when it names none), and its figures as
metrics on every run, also when there is nothing to do: an alarm on the oldest pending age must see data when
all is well, not only when something is stuck.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import MetricUnit, single_metric

import outbox_tracing as tracing
from outbox import metrics as metric_names
from outbox.aws import invocation_client
from outbox.clock import Clock, utc_now
from outbox.errors import ConfigurationError
from outbox.payload_store import PayloadStore
from outbox_publisher.deadline import LambdaDeadline
from outbox_publisher.leases import DynamoDBRowClaimer, RowClaimer
from outbox_publisher.ports import DestinationPort, PoisonQueue
from outbox_publisher.predecessors import PredecessorReader
from outbox_publisher.region_store import DynamoDBRegionStore, RegionStore
from outbox_publisher.retry import Random, RetryPolicy, Sleep, system_random, system_sleep
from outbox_publisher.routing import Destination
from outbox_publisher.row_updates import RowUpdater
from outbox_publisher.wiring import build_engine
from outbox_sweeper.config import SweeperConfig
from outbox_sweeper.cursor import CursorStore, DynamoDBCursorStore
from outbox_sweeper.failed_index import DynamoDBFailedIndexer, FailedIndexer
from outbox_sweeper.regional import RegionalSweep
from outbox_sweeper.scan import DynamoDBTableScan, TableScan
from outbox_sweeper.sweep import Sweeper, SweepReport

# Per outbox (outbox.metrics.service_name), as its construct set it.
SERVICE = metric_names.configured_service(os.environ, metric_names.SWEEPER_SERVICE)

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
    updater: RowUpdater | None = None,
    predecessors: PredecessorReader | None = None,
    claimer: RowClaimer | None = None,
    scan: TableScan | None = None,
    cursors: CursorStore | None = None,
    indexer: FailedIndexer | None = None,
    clock: Clock = utc_now,
    sleep: Sleep = system_sleep,
    random: Random = system_random,
    retry: RetryPolicy | None = None,
    payloads: PayloadStore | None = None,
    region_store: RegionStore | None = None,
    region_stores: Callable[[str], RegionStore] | None = None,
) -> Sweeper:
    """Wires the sweeper; tests pass their own ports, clock and sleep. `region_stores`: another region's
    replica of the outbox table (where the `#taken#` records its sweeper wrote are read); default, a client
    for that region on the same table name (global table replicas share it)."""
    table = config.publisher.table_name
    dynamodb = invocation_client("dynamodb")
    regions = config.publisher.regions
    engine = build_engine(
        config.publisher,
        destinations=destinations,
        poison_queue=poison_queue,
        updater=updater,
        predecessors=predecessors,
        clock=clock,
        sleep=sleep,
        random=random,
        retry=retry,
        payloads=payloads,
    )
    return Sweeper(
        engine=engine,
        scan=scan or DynamoDBTableScan(dynamodb, table),
        cursors=cursors or DynamoDBCursorStore(dynamodb, table, region=regions.region if regions else None),
        claimer=claimer or DynamoDBRowClaimer(dynamodb, table),
        indexer=indexer or DynamoDBFailedIndexer(dynamodb, table),
        grace=config.publisher.sweep_grace,
        settings=config.sweep,
        clock=clock,
        random=random,
        retry=retry,
        regions=RegionalSweep(
            region_store or DynamoDBRegionStore(dynamodb, table),
            regions,
            region_stores or (lambda peer: DynamoDBRegionStore(invocation_client("dynamodb", peer), table)),
        )
        if regions is not None
        else None,
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
    return sweep(event, context, sweeper())


def sweep(event: Any, context: Any, app: Sweeper) -> dict[str, Any]:
    report = app.run(LambdaDeadline(context), segment_of(event))
    _observe(report)
    return summary(report)


def segment_of(event: Any) -> int:
    """The segment the schedule names (`{"segment": n}`); 0 for an event that names none (one segment)."""
    segment = event.get("segment", 0) if isinstance(event, Mapping) else 0
    if isinstance(segment, bool) or not isinstance(segment, int):
        raise ConfigurationError(f"the sweeper's event names segment {segment!r}: a whole number is needed")
    return segment


def summary(report: SweepReport) -> dict[str, Any]:
    publish, figures = report.publish, report.figures
    region = report.region
    regional = (
        {}
        if region is None
        else {
            "region": region.region,
            "region_state": region.state.value if region.state else None,
            "taking": list(region.taking),
            "late_replicas": region.late_replicas,
            "taken_duplicates_avoided": region.duplicates_avoided,
        }
    )
    return regional | {
        "pending": figures.pending,
        "pass_complete": report.complete,
        "oldest_pending_age_s": round(report.oldest_pending_age_s, 3),
        "failed": figures.failed,
        "rows_read": report.rows_read,
        "pages": report.pages,
        "due": report.due,
        "claimed": report.claimed,
        "swept": report.swept,
        "poisoned": report.poisoned,
        "gave_up": report.gave_up,
        "backed_off": report.backed_off,
        "held_aggregates": report.held_aggregates,
        "indexed_failed": report.indexed,
        "calls": publish.calls,
        "rows_not_updated": len(publish.rows.failed),
    }


def _observe(report: SweepReport) -> None:
    count = MetricUnit.Count
    metrics.add_metric(
        name=metric_names.OLDEST_PENDING_AGE_SECONDS,
        unit=MetricUnit.Seconds,
        value=report.oldest_pending_age_s,
    )
    metrics.add_metric(name=metric_names.PENDING_EVENTS, unit=count, value=report.figures.pending)
    metrics.add_metric(name=metric_names.HELD_AGGREGATES, unit=count, value=report.held_aggregates)
    metrics.add_metric(name=metric_names.SWEPT_EVENTS, unit=count, value=report.swept)
    metrics.add_metric(name=metric_names.BACKED_OFF_EVENTS, unit=count, value=report.backed_off)
    metrics.add_metric(name=metric_names.GAVE_UP_EVENTS, unit=count, value=report.gave_up)
    metrics.add_metric(
        name=metric_names.ROW_UPDATE_FAILURES, unit=count, value=len(report.publish.rows.failed)
    )
    metrics.add_metric(
        name=metric_names.WRITER_CONTRACT_VIOLATIONS, unit=count, value=report.publish.contract_breaks
    )
    if report.region is not None:
        _observe_region(report)
    level = logger.warning if report.held_aggregates or report.gave_up or report.backed_off else logger.info
    level("sweep done", extra=summary(report))


def _observe_region(report: SweepReport) -> None:
    """The region's figures, each with its `Region` dimension (one EMF document each: the function's other
    metrics keep their dimensions unchanged)."""
    region = report.region
    assert region is not None  # noqa: S101 - the caller checked
    dimensions = {metric_names.SERVICE_DIMENSION: SERVICE, metric_names.REGION_DIMENSION: region.region}
    figures = (
        (metric_names.REGION_HEARTBEAT_AGE_SECONDS, MetricUnit.Seconds, region.oldest_peer_age_s),
        (metric_names.TAKEOVER_IN_PROGRESS, MetricUnit.Count, len(region.taking)),
        (metric_names.LATE_REPLICA_EVENTS, MetricUnit.Count, region.late_replicas),
        (metric_names.TAKEN_OVER_DUPLICATES_AVOIDED, MetricUnit.Count, region.duplicates_avoided),
    )
    for name, unit, value in figures:
        with single_metric(name=name, unit=unit, value=value, default_dimensions=dimensions):
            pass
