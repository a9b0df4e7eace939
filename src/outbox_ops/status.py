"""`outbox status`: is anything stuck, what, since when, and the one command to run first.

It scans the outbox table with the sweeper's census (outbox_sweeper.census): the table holds only what is
not out yet, so a scan is cheap when all is well; it is bounded by `scan_for`, so a table left with millions
of rows by an outage is counted in part, and said so. Besides, it reads the two queues' depths, the
consumers' dead-letter queues' depths (every stack output ending in `DeadLetterQueueUrl`; SQS's approximate
figures), the publisher's stream mappings and the last hour's published events (CloudWatch). It is healthy
only while every pending event is younger than the sweeper's grace: an older one was missed by the stream.
A role that may not read the mappings or the metrics gets "unknown" for them, with why, not a failure; the
verdict (stuck, degraded, healthy: docs/operations.md, "outbox status") is then at best degraded, since it
cannot vouch for what it could not read.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from outbox import metrics, region_settings
from outbox.aws_errors import error_code
from outbox.clock import format_timestamp, utc_now
from outbox_ops.clients import OpsClients
from outbox_ops.queues import QueueDepth, depth
from outbox_ops.regions import RegionsReport, parse_ring, read_regions
from outbox_ops.resources import DeadLetterQueue, OutboxResources
from outbox_sweeper.census import Census
from outbox_sweeper.config import DEFAULT_SWEEP_GRACE
from outbox_sweeper.scan import DynamoDBTableScan, read_segment

STUCK_AFTER = timedelta(minutes=15)
DEGRADED_AFTER = timedelta(minutes=5)
SWEEP_GRACE = DEFAULT_SWEEP_GRACE
CONSUMER_DEAD_LETTERS_RUNBOOK = "docs/runbook.md#consumerdeadletters"
SCAN_FOR = timedelta(seconds=30)
_PUBLISHED_WINDOW = timedelta(hours=1)


class Verdict(StrEnum):
    HEALTHY = "healthy"
    DEGRADED = "degraded"
    STUCK = "stuck"


@dataclass(frozen=True)
class HeldAggregate:
    aggregate_key: str
    waiting_seq: str
    """The aggregate's first PENDING event that waits."""
    failed_seq: str
    """The FAILED event it waits behind."""

    @property
    def fix(self) -> str:
        return (
            f"outbox failed list --aggregate {self.aggregate_key}, then redrive or skip seq {self.failed_seq}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "aggregate_key": self.aggregate_key,
            "waiting_seq": _seq_json(self.waiting_seq),
            "failed_seq": _seq_json(self.failed_seq),
            "fix": self.fix,
        }


def _seq_json(stored: str) -> int | str:
    """A seq as `failed list --json` prints it: a number, or the stored text when it is no whole number."""
    try:
        number = int(stored)
    except ValueError:
        return stored
    return number if str(number) == stored else stored


@dataclass(frozen=True)
class MappingState:
    uuid: str
    state: str
    last_processing_result: str

    def to_json(self) -> dict[str, str]:
        return {"uuid": self.uuid, "state": self.state, "last_processing_result": self.last_processing_result}


@dataclass(frozen=True)
class DeadLetters:
    """A consumer's dead-letter queue and its depth (SQS's approximate figures), or None if unreadable."""

    queue: DeadLetterQueue
    depth: QueueDepth | None

    def to_json(self) -> dict[str, Any]:
        return {
            "consumer": self.queue.consumer,
            "output": self.queue.output,
            "url": self.queue.url,
            "visible": None if self.depth is None else self.depth.visible,
            "in_flight": None if self.depth is None else self.depth.in_flight,
            "approximate": True,
        }


@dataclass
class StatusReport:
    checked_at: datetime
    table: str
    pending: int = 0
    pending_complete: bool = True
    oldest_pending_age_s: float | None = None
    backing_off: int = 0
    oldest_unheld_age_s: float | None = None
    """The oldest pending event that no FAILED or missing event holds back: it should be going out."""
    held: list[HeldAggregate] = field(default_factory=list)
    """The held aggregates the scan named (at most outbox_sweeper.census.HELD_LISTED)."""
    held_count: int = 0
    failed: int = 0
    """FAILED rows that still hold their aggregate (not released)."""
    unindexed_failed: int = 0
    """FAILED rows not in the failed index yet (another writer's): the sweeper adds them as it finds them."""
    failed_released: int = 0
    """FAILED rows poisoned on a route that continues past poison: they hold nothing."""
    poison: QueueDepth | None = None
    on_failure: QueueDepth | None = None
    dead_letters: list[DeadLetters] = field(default_factory=list)
    """The consumers' dead-letter queues the stack names."""
    published_last_hour: int | None = None
    """None when the metrics could not be read."""
    mappings: list[MappingState] | None = None
    """None when the publisher function is not known, or they could not be read (`unknown` says why)."""
    regions: RegionsReport | None = None
    """With regions: each region's heartbeat, the origins taken over (outbox_ops.regions)."""
    unknown: list[str] = field(default_factory=list)
    """What could not be read, and why (e.g. a role without `cloudwatch:GetMetricData`)."""
    verdict: Verdict = Verdict.HEALTHY
    reasons: list[str] = field(default_factory=list)
    """Why the verdict, worst first; the first says what to do first."""

    def to_json(self) -> dict[str, Any]:
        def queue(found: QueueDepth | None) -> dict[str, int] | None:
            return None if found is None else {"visible": found.visible, "in_flight": found.in_flight}

        found: dict[str, Any] = {
            "checked_at": format_timestamp(self.checked_at),
            "table": self.table,
            "verdict": self.verdict.value,
            "reasons": self.reasons,
            "pending": self.pending,
            "pending_complete": self.pending_complete,
            "oldest_pending_age_seconds": self.oldest_pending_age_s,
            "oldest_unheld_pending_age_seconds": self.oldest_unheld_age_s,
            "backing_off": self.backing_off,
            "held_aggregates": [held.to_json() for held in self.held],
            "held_aggregate_count": self.held_count,
            "failed": self.failed,
            "unindexed_failed": self.unindexed_failed,
            "failed_released": self.failed_released,
            "unknown": self.unknown,
            "poison_queue": queue(self.poison),
            "on_failure_queue": queue(self.on_failure),
            "consumer_dead_letter_queues": [found.to_json() for found in self.dead_letters],
            "published_last_hour": self.published_last_hour,
            "stream_mappings": None if self.mappings is None else [m.to_json() for m in self.mappings],
        }
        if self.regions is not None:
            found["regions"] = self.regions.to_json()
        return found


@dataclass(frozen=True)
class StatusThresholds:
    stuck_after: timedelta = STUCK_AFTER
    degraded_after: timedelta = DEGRADED_AFTER
    sweep_grace: timedelta = SWEEP_GRACE
    """The sweeper's SWEEP_GRACE_SECONDS: a pending event older than it was missed by the stream."""
    scan_for: timedelta = SCAN_FOR
    """The longest the census may read the table."""


def status(
    clients: OpsClients,
    resources: OutboxResources,
    *,
    thresholds: StatusThresholds | None = None,
    now: datetime | None = None,
) -> StatusReport:
    now = now or utc_now()
    thresholds = thresholds or StatusThresholds()
    report = StatusReport(checked_at=now, table=resources.table)
    _census(clients, resources, report, now, thresholds.scan_for)
    if resources.poison_queue_url:
        report.poison = depth(clients.sqs, resources.poison_queue_url)
    if resources.on_failure_queue_url:
        report.on_failure = depth(clients.sqs, resources.on_failure_queue_url)
    for queue in resources.dead_letter_queues:
        found = _optional(
            report, f"{queue.consumer}'s dead-letter queue", functools.partial(depth, clients.sqs, queue.url)
        )
        report.dead_letters.append(DeadLetters(queue, found))
    if resources.publisher_function:
        function = resources.publisher_function
        report.mappings = _optional(report, "stream mappings", lambda: _mappings(clients.lambda_, function))
    if resources.regions:
        ring = parse_ring(resources.regions)
        takeover = int(resources.takeover_after_seconds or region_settings.DEFAULT_TAKEOVER_AFTER_SECONDS)
        report.regions = _optional(
            report,
            "region heartbeats",
            lambda: read_regions(clients.dynamodb, resources.table, ring, takeover, now),
        )
    report.published_last_hour = _optional(
        report, "published, last hour", lambda: _published(clients.cloudwatch, now, resources.outbox_name)
    )
    report.verdict, report.reasons = judge(report, thresholds)
    return report


def judge(report: StatusReport, thresholds: StatusThresholds) -> tuple[Verdict, list[str]]:
    stuck: list[str] = []
    degraded: list[str] = []
    age = timedelta(seconds=report.oldest_unheld_age_s or 0)
    if report.held:
        degraded.append(f"{report.held_count} aggregate(s) held behind a FAILED event: {report.held[0].fix}")
    if report.mappings is not None and not any(m.state == "Enabled" for m in report.mappings):
        states = ", ".join(m.state for m in report.mappings) or "none found"
        stuck.append(
            f"no stream mapping is enabled ({states}): only the sweeper publishes; enable the mapping"
        )
    if age > thresholds.stuck_after:
        stuck.append(
            f"the oldest pending event is {_duration(age)} old: check the publisher's and the sweeper's "
            "errors and logs"
        )
    elif age > thresholds.sweep_grace:
        degraded.append(
            f"the oldest pending event is {_duration(age)} old, past the sweeper's "
            f"{_duration(thresholds.sweep_grace)} grace: the stream did not publish it; the sweeper should "
            "take it on its next run"
        )
    elif age > thresholds.degraded_after:
        degraded.append(f"the oldest pending event is {_duration(age)} old: the sweeper should take it soon")
    if report.regions is not None:
        degraded += report.regions.reasons()
    degraded += _needs_a_look(report, thresholds)
    if stuck:
        return Verdict.STUCK, stuck + degraded
    if degraded:
        return Verdict.DEGRADED, degraded
    if report.pending:
        oldest = (
            "" if report.oldest_pending_age_s is None else f", the oldest {report.oldest_pending_age_s:.0f} s"
        )
        return Verdict.HEALTHY, [
            f"{report.pending} event(s) pending{oldest}: within the sweeper's "
            f"{_duration(thresholds.sweep_grace)} grace, on their way out"
        ]
    return Verdict.HEALTHY, []


def _needs_a_look(report: StatusReport, thresholds: StatusThresholds) -> list[str]:
    """The degraded verdict's reasons besides held aggregates and age, worst first."""
    reasons: list[str] = []
    if report.failed:
        reasons.append(f"{report.failed} FAILED event(s) not released: outbox failed list")
    if report.unindexed_failed:
        reasons.append(
            f"{report.unindexed_failed} FAILED row(s) are not in the failed index yet (saved FAILED by "
            "another writer): the sweeper adds them on its next pass"
        )
    if not report.pending_complete:
        reasons.append(
            f"the table holds more than a {_duration(thresholds.scan_for)} scan reads (the figures are lower "
            "bounds): a backlog the sweeper is working through"
        )
    reasons += [f"could not read {what}: the verdict cannot vouch for it" for what in report.unknown]
    for name, queue, command in (
        ("poison", report.poison, "outbox failed list"),
        ("on-failure", report.on_failure, "outbox redrive --on-failure-queue --dry-run --reason '...'"),
    ):
        if queue is not None and queue.total:
            reasons.append(f"{queue.total} message(s) in the {name} queue: {command}")
    for found in report.dead_letters:
        if found.depth is not None and found.depth.total:
            reasons.append(
                f"about {found.depth.total} message(s) in {found.queue.consumer}'s dead-letter queue (SQS's "
                f"approximate count): the consumer gave up on them; see {CONSUMER_DEAD_LETTERS_RUNBOOK}"
            )
    problems = [m for m in report.mappings or [] if m.last_processing_result.startswith("PROBLEM")]
    if problems:
        reasons.append(
            f"the stream mapping's last result is {problems[0].last_processing_result!r}: check the "
            "publisher's errors and logs"
        )
    if report.backing_off:
        reasons.append(f"{report.backing_off} pending event(s) backing off after failed sweeps")
    return reasons


def _census(
    clients: OpsClients, resources: OutboxResources, report: StatusReport, now: datetime, scan_for: timedelta
) -> None:
    census = Census(now=now, grace=timedelta(0), due_limit=0)
    progress = read_segment(
        census,
        DynamoDBTableScan(clients.dynamodb, resources.table),
        segment=0,
        segments=1,
        start=None,
        deadline=_Budget(scan_for),
        # Stop once the time is spent: read_segment stops when less than this is left, and a budget never
        # has less than 0 left (with 0 here, the scan would read the whole table whatever `scan_for` says).
        reserve_ms=1,
    )
    figures = census.figures()
    report.pending, report.pending_complete = figures.pending, progress.position is None
    report.backing_off = figures.backing_off
    report.failed, report.failed_released = figures.failed, figures.failed_released
    report.unindexed_failed = figures.unindexed_failed
    report.held_count = figures.held_aggregates
    report.held = [
        HeldAggregate(held.aggregate_key, held.waiting_seq, held.failed_seq)
        for held in sorted(census.held, key=lambda held: held.aggregate_key)
    ]
    if figures.oldest_pending is not None:
        report.oldest_pending_age_s = max(0.0, (now - figures.oldest_pending).total_seconds())
    if figures.oldest_unheld is not None:
        report.oldest_unheld_age_s = max(0.0, (now - figures.oldest_unheld).total_seconds())


class _Budget:
    """The time the census may read for, as a deadline (a `remaining_ms()`, as the publisher's deadlines), on
    the monotonic clock."""

    def __init__(self, budget: timedelta) -> None:
        self._ends = time.monotonic() + budget.total_seconds()

    def remaining_ms(self) -> int:
        return max(0, int((self._ends - time.monotonic()) * 1000))


_T = TypeVar("_T")


def _optional(report: StatusReport, what: str, read: Callable[[], _T]) -> _T | None:
    """A figure a role may not be allowed to read: unknown (with why) instead of failing the whole status."""
    try:
        return read()
    except ClientError as error:
        report.unknown.append(f"{what}: {error_code(error)}")
    except BotoCoreError as error:
        report.unknown.append(f"{what}: {type(error).__name__}")
    return None


def _mappings(lambda_: Any, function: str) -> list[MappingState]:
    found: list[MappingState] = []
    arguments: dict[str, Any] = {"FunctionName": function}
    while True:
        page = lambda_.list_event_source_mappings(**arguments)
        for mapping in page.get("EventSourceMappings", []):
            if ":dynamodb:" not in str(mapping.get("EventSourceArn", "")):
                continue
            found.append(
                MappingState(
                    str(mapping.get("UUID", "")),
                    str(mapping.get("State", "unknown")),
                    str(mapping.get("LastProcessingResult") or "unknown"),
                )
            )
        if not page.get("NextMarker"):
            return found
        arguments["Marker"] = page["NextMarker"]


def _published(cloudwatch: Any, now: datetime, outbox_name: str | None) -> int | None:
    end = now.replace(microsecond=0) + timedelta(seconds=1)
    # Each outbox's functions report under services of its own (outbox.metrics.service_name).
    publisher, sweeper = (
        (
            metrics.service_name(outbox_name, metrics.PUBLISHER),
            metrics.service_name(outbox_name, metrics.SWEEPER),
        )
        if outbox_name
        else (metrics.PUBLISHER_SERVICE, metrics.SWEEPER_SERVICE)
    )
    queries: Sequence[tuple[str, str, str]] = (
        ("stream", metrics.EVENTS_PUBLISHED, publisher),
        ("swept", metrics.SWEPT_EVENTS, sweeper),
    )
    response = cloudwatch.get_metric_data(
        MetricDataQueries=[
            {
                "Id": query_id,
                "MetricStat": {
                    "Metric": {
                        "Namespace": metrics.NAMESPACE,
                        "MetricName": name,
                        "Dimensions": [{"Name": metrics.SERVICE_DIMENSION, "Value": service}],
                    },
                    "Period": int(_PUBLISHED_WINDOW.total_seconds()),
                    "Stat": "Sum",
                },
            }
            for query_id, name, service in queries
        ],
        # Whole seconds, rounded up: CloudWatch keeps timestamps to the millisecond but may compare a query's
        # bounds to the second, which would drop what was published in the current second.
        StartTime=end - _PUBLISHED_WINDOW,
        EndTime=end,
    )
    return int(sum(sum(result.get("Values", [])) for result in response.get("MetricDataResults", [])))


def _duration(age: timedelta) -> str:
    seconds = int(age.total_seconds())
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h"
