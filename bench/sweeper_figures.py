"""The sweeper's reads: on an idle table, and to drain a backlog of pending rows, on moto.

The sweeper is wired by its own `build_sweeper` (through the integration tests' world) on metered clients.
The backlog is what an outage leaves: `aggregates` aggregates whose first event was published by the stream
publisher, then `rows` later events the stream never delivered (as if the mapping had discarded them), older
than the grace. Runs follow one another, on a fake clock that does not move, until every row is out; each run
reads the whole pending index again, then predecessors, claims (one conditional write per row, at most
SWEEP_MAX_ROWS a run), publishes and marks.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from bench import targets
from bench.figures import Figure, Group, per
from bench.meters import Snapshot
from bench.publish_figures import PUBLISH_CALLS
from bench.scenarios import one_each, round_robin
from bench.world import bench_world
from outbox_publisher.config import DEFAULT_SWEEP_GRACE_SECONDS

READS = ("Query", "BatchGetItem")
COMMAND = "python -m bench --only sweeper"
HOOKS = "botocore before-call hooks on the sweeper's own clients (moto in process)"
MAX_RUNS = 20


def idle_run() -> Snapshot:
    with bench_world() as world:
        sweeper = world.sweeper()
        _, snapshot = world.measure(lambda: world.sweep(sweeper))
    return snapshot


def backlog_runs(rows: int, aggregates: int) -> list[tuple[int, Snapshot]]:
    """(events swept, what the run did) for each run until the backlog is gone."""
    with bench_world() as world:
        world.write(one_each(aggregates, 1, "sw"))
        publisher = world.publisher()
        world.measure(lambda: world.publish(publisher, world.new_batch()))
        world.write(round_robin(rows, aggregates, prefix="sw", first_seq=2))
        world.world.clock.advance(timedelta(seconds=DEFAULT_SWEEP_GRACE_SECONDS + 1))
        sweeper = world.sweeper()
        runs: list[tuple[int, Snapshot]] = []
        while sum(swept for swept, _ in runs) < rows:
            if len(runs) == MAX_RUNS:
                raise RuntimeError(f"{MAX_RUNS} sweeps left {rows - sum(s for s, _ in runs)} rows pending")
            report, snapshot = world.measure(lambda: world.sweep(sweeper))
            runs.append((report.swept, snapshot))
    return runs


def measure(rows: int = 1000, aggregates: int = 100) -> list[Group]:
    idle = idle_run()
    runs = backlog_runs(rows, aggregates)
    reads = sum(snapshot.count("dynamodb", READS) for _, snapshot in runs)
    rcu = sum(snapshot.capacity(operations=READS).rcu for _, snapshot in runs)
    idle_usage = idle.capacity(operations=READS)
    publish_calls = sum(
        snapshot.count(service, operations)
        for _, snapshot in runs
        for service, operations in PUBLISH_CALLS.items()
    )
    scale = 1000 / rows
    figures = [
        Figure(
            "sweeper.idle.reads",
            "read calls per run, idle table",
            "calls/run",
            float(idle.count("dynamodb", READS)),
            decimals=0,
            source=HOOKS,
            detail={"calls": idle.calls_detail()},
        ),
        Figure(
            "sweeper.idle.rcu",
            "RCU per run, idle table",
            "RCU/run",
            idle_usage.rcu,
            decimals=1,
            source=idle_usage.source(),
            detail={"usage": idle_usage.to_json()},
        ),
        Figure(
            "sweeper.backlog.reads",
            f"read calls per 1,000 pending rows ({aggregates} aggregates, {len(runs)} runs)",
            "calls/1,000 rows",
            reads * scale,
            decimals=0,
            source=HOOKS,
            detail=_backlog_detail(runs, rows),
        ),
        Figure(
            "sweeper.backlog.rcu",
            "RCU per 1,000 pending rows",
            "RCU/1,000 rows",
            rcu * scale,
            decimals=1,
            source=runs[0][1].capacity(operations=READS).source(),
        ),
        Figure(
            "sweeper.backlog.publish",
            "publish calls per event per destination, sweeping it",
            "calls/event/destination",
            per(publish_calls, 2 * rows),
            floor=targets.PUBLISH_CALLS_FLOOR,
            target=targets.PUBLISH_CALLS_TARGET,
            source=HOOKS,
        ),
    ]
    return [
        Group(
            "sweeper",
            "Sweeper reads (pending index Query, predecessors' BatchGetItem)",
            "- (the naive publisher has no sweeper)",
            figures,
            notes=[
                "Index queries are eventually consistent: 0.5 RCU per 4 KB of index entries, at least 0.5 "
                "per query. Each swept row also costs one claim (a conditional UpdateItem), its share of the "
                "publish calls and of a marking transaction: see the backlog figure's detail.",
            ],
            command=COMMAND,
        )
    ]


def _backlog_detail(runs: list[tuple[int, Snapshot]], rows: int) -> dict[str, Any]:
    calls: dict[str, int] = {}
    for _, snapshot in runs:
        for name, count in snapshot.calls_detail().items():
            calls[name] = calls.get(name, 0) + count
    return {
        "rows": rows,
        "swept_per_run": [swept for swept, _ in runs],
        "calls_all_runs": calls,
        "claims_per_row": per(calls.get("dynamodb.UpdateItem", 0), rows),
    }
