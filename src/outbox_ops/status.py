"""`outbox status`: is anything stuck, what, since when, and the one command to run first.

What it reads, and what it never does (no table scan, whatever the table's size):

- the `pending` index, one paginated query per shard: pending count, oldest pending age, rows backing off,
  and each aggregate's lowest pending row;
- those rows' predecessors, one strongly consistent BatchGetItem per 100 aggregates (a missing one costs a
  Query more): an aggregate is HELD when its next event waits behind a FAILED or missing one, which only an
  operator can release;
- the `failed` index, one query per shard, and the FAILED rows themselves (BatchGetItem, 100 a call): which
  of them still hold their aggregate, and which an operator released (skipped: they need nothing more);
- the poison and on-failure queues' depths, the publisher's stream mappings (Lambda), and the last hour's
  published events (CloudWatch: the publisher's `EventsPublished` plus the sweeper's `SweptEvents`). A
  role that may not read the mappings or the metrics gets "unknown" for them, with why, not a failure;
  the verdict is then at best degraded: it cannot vouch for what it could not read.

The verdict, worst first:

- **stuck**: no stream mapping is enabled (only the sweeper publishes), or an event that nothing holds
  back has been pending for longer than `stuck_after` (the `OldestPendingAge` alarm's threshold, 15
  minutes): events are not going out by themselves.
- **degraded**: held aggregates (an operator must redrive or skip the event they wait behind), FAILED rows
  not yet released,
  messages in the poison or on-failure queue, a mapping whose last result is a problem, rows backing off, or
  an event pending for longer than `degraded_after`: the outbox works, but something needs a look.
- **healthy**: none of these.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from outbox import metrics
from outbox.aws_errors import error_code
from outbox.clock import format_timestamp, utc_now
from outbox.deadline import NoDeadline
from outbox.model import RowKey
from outbox.predecessors import DynamoDBPredecessorReader, PredecessorState
from outbox_ops.clients import OpsClients
from outbox_ops.failed import FailedRows
from outbox_ops.queues import QueueDepth, depth
from outbox_ops.resources import OutboxResources
from outbox_sweeper.pending import DUE_AGGREGATES_KEPT, DynamoDBPendingIndex

STUCK_AFTER = timedelta(minutes=15)
DEGRADED_AFTER = timedelta(minutes=5)
_PUBLISHED_WINDOW = timedelta(hours=1)


class Verdict(StrEnum):
    HEALTHY = "healthy"
    DEGRADED = "degraded"
    STUCK = "stuck"


@dataclass(frozen=True)
class HeldAggregate:
    aggregate_key: str
    waiting_seq: int
    """The aggregate's next event, held."""
    predecessor: PredecessorState
    """FAILED or MISSING: what event `waiting_seq - 1` is."""

    @property
    def fix(self) -> str:
        if self.predecessor is PredecessorState.MISSING:
            return (
                f"outbox skip --missing {self.aggregate_key} {self.waiting_seq - 1} --reason '...' "
                "(after checking the event was never written)"
            )
        return f"outbox failed list --aggregate {self.aggregate_key}, then redrive or skip it"

    def to_json(self) -> dict[str, Any]:
        return {
            "aggregate_key": self.aggregate_key,
            "waiting_seq": self.waiting_seq,
            "predecessor_seq": self.waiting_seq - 1,
            "predecessor": self.predecessor.value,
            "fix": self.fix,
        }


@dataclass(frozen=True)
class MappingState:
    uuid: str
    state: str
    last_processing_result: str

    def to_json(self) -> dict[str, str]:
        return {"uuid": self.uuid, "state": self.state, "last_processing_result": self.last_processing_result}


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
    failed: int = 0
    """FAILED rows that still hold their aggregate (not released)."""
    unindexed_failed: int = 0
    """Held aggregates whose FAILED predecessor is not in the failed index (failed before it existed)."""
    failed_released: int = 0
    """FAILED rows an operator skipped, or poisoned on a route that continues past poison: settled."""
    poison: QueueDepth | None = None
    on_failure: QueueDepth | None = None
    published_last_hour: int | None = None
    """None when the metrics could not be read."""
    mappings: list[MappingState] | None = None
    """None when the publisher function is not known, or they could not be read (`unknown` says why)."""
    unknown: list[str] = field(default_factory=list)
    """What could not be read, and why (e.g. a role without `cloudwatch:GetMetricData`)."""
    verdict: Verdict = Verdict.HEALTHY
    reasons: list[str] = field(default_factory=list)
    """Why the verdict, worst first; the first says what to do first."""

    def to_json(self) -> dict[str, Any]:
        def queue(found: QueueDepth | None) -> dict[str, int] | None:
            return None if found is None else {"visible": found.visible, "in_flight": found.in_flight}

        return {
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
            "failed": self.failed,
            "failed_released": self.failed_released,
            "unknown": self.unknown,
            "poison_queue": queue(self.poison),
            "on_failure_queue": queue(self.on_failure),
            "published_last_hour": self.published_last_hour,
            "stream_mappings": None if self.mappings is None else [m.to_json() for m in self.mappings],
        }


@dataclass(frozen=True)
class StatusThresholds:
    stuck_after: timedelta = STUCK_AFTER
    degraded_after: timedelta = DEGRADED_AFTER


def status(
    clients: OpsClients,
    resources: OutboxResources,
    *,
    thresholds: StatusThresholds | None = None,
    now: datetime | None = None,
) -> StatusReport:
    now = now or utc_now()
    report = StatusReport(checked_at=now, table=resources.table)
    _pending(clients, resources, report, now)
    failed = FailedRows(clients.dynamodb, resources.table).select()
    report.failed = sum(1 for row in failed if row.holds_aggregate)
    report.failed_released = len(failed) - report.failed
    listed = {row.key for row in failed}
    report.unindexed_failed = sum(
        1
        for held in report.held
        if held.predecessor is PredecessorState.FAILED
        and RowKey(held.aggregate_key, held.waiting_seq - 1) not in listed
    )
    if resources.poison_queue_url:
        report.poison = depth(clients.sqs, resources.poison_queue_url)
    if resources.on_failure_queue_url:
        report.on_failure = depth(clients.sqs, resources.on_failure_queue_url)
    if resources.publisher_function:
        function = resources.publisher_function
        report.mappings = _optional(report, "stream mappings", lambda: _mappings(clients.lambda_, function))
    report.published_last_hour = _optional(
        report, "published, last hour", lambda: _published(clients.cloudwatch, now)
    )
    report.verdict, report.reasons = judge(report, thresholds or StatusThresholds())
    return report


def judge(report: StatusReport, thresholds: StatusThresholds) -> tuple[Verdict, list[str]]:
    stuck: list[str] = []
    degraded: list[str] = []
    age = timedelta(seconds=report.oldest_unheld_age_s or 0)
    if report.held:
        degraded.append(
            f"{len(report.held)} aggregate(s) held behind a FAILED or missing event: {report.held[0].fix}"
        )
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
    elif age > thresholds.degraded_after:
        degraded.append(f"the oldest pending event is {_duration(age)} old: the sweeper should take it soon")
    if report.failed:
        degraded.append(f"{report.failed} FAILED event(s) not released: outbox failed list")
    if report.unindexed_failed:
        # Held behind a FAILED row the failed index does not have: one from before the index existed.
        degraded.append(
            f"{report.unindexed_failed} held aggregate(s) wait behind a FAILED row missing from the failed "
            "index: outbox failed reindex"
        )
    degraded += [f"could not read {what}: the verdict cannot vouch for it" for what in report.unknown]
    for name, queue, command in (
        ("poison", report.poison, "outbox failed list"),
        ("on-failure", report.on_failure, "outbox redrive --on-failure-queue --dry-run --reason '...'"),
    ):
        if queue is not None and queue.total:
            degraded.append(f"{queue.total} message(s) in the {name} queue: {command}")
    problems = [m for m in report.mappings or [] if m.last_processing_result.startswith("PROBLEM")]
    if problems:
        degraded.append(
            f"the stream mapping's last result is {problems[0].last_processing_result!r}: check the "
            "publisher's errors and logs"
        )
    if report.backing_off:
        degraded.append(f"{report.backing_off} pending event(s) backing off after failed sweeps")
    if stuck:
        return Verdict.STUCK, stuck + degraded
    if degraded:
        return Verdict.DEGRADED, degraded
    return Verdict.HEALTHY, []


def _pending(clients: OpsClients, resources: OutboxResources, report: StatusReport, now: datetime) -> None:
    # Due now = not backing off: each aggregate's lowest such row is the one the gate decides on.
    scan = DynamoDBPendingIndex(clients.dynamodb, resources.table).scan(
        due_before=now, now=now, limit=1, deadline=NoDeadline()
    )
    report.pending, report.pending_complete = scan.count, scan.complete
    report.backing_off = scan.count - scan.due_count
    if scan.oldest is not None:
        report.oldest_pending_age_s = max(0.0, (now - scan.oldest).total_seconds())
    firsts = [rows[0] for rows in scan.due.values() if rows]
    if len(scan.due) >= DUE_AGGREGATES_KEPT:
        report.unknown.append(
            f"held aggregates: only the first {DUE_AGGREGATES_KEPT} aggregates with pending events checked"
        )
    waiting = [row for row in firsts if row.key.seq > 1 and not row.predecessor_released]
    states = (
        DynamoDBPredecessorReader(clients.dynamodb, resources.table).states(
            [row.key.predecessor for row in waiting]
        )
        if waiting
        else {}
    )
    report.held = sorted(
        (
            HeldAggregate(row.key.aggregate_key, row.key.seq, states[row.key.predecessor])
            for row in waiting
            if states[row.key.predecessor] in (PredecessorState.FAILED, PredecessorState.MISSING)
        ),
        key=lambda held: held.aggregate_key,
    )
    held = {held.aggregate_key for held in report.held}
    unheld = [
        row.occurred_at
        for row in firsts
        if row.key.aggregate_key not in held and row.occurred_at is not None and row.occurred_at <= now
    ]
    if unheld:
        report.oldest_unheld_age_s = (now - min(unheld)).total_seconds()


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


def _published(cloudwatch: Any, now: datetime) -> int | None:
    end = now.replace(microsecond=0) + timedelta(seconds=1)
    queries: Sequence[tuple[str, str, str]] = (
        ("stream", metrics.EVENTS_PUBLISHED, metrics.PUBLISHER_SERVICE),
        ("swept", metrics.SWEPT_EVENTS, metrics.SWEEPER_SERVICE),
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
