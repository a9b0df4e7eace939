"""The sweeper's capacity: an idle run, a backlog drained, and a whole pass over the table, on moto.

The sweeper is wired by its own `build_sweeper` (through the integration tests' world) on metered clients. It
finds its work by scanning the outbox table itself, which holds only what is not out yet, from a cursor it
saves in the table (outbox_sweeper.scan, .cursor).

- Idle: runs on a table holding nothing but the sweeper's own cursor: a cursor GetItem (strongly consistent),
  one Scan page (eventually consistent) and a cursor PutItem. The first run ever has no cursor to read; the
  figure is a later one's, as every run after the first is.
- Backlog: what an outage leaves: `aggregates` aggregates whose first event the stream publisher settled, then
  `rows` later events the stream never delivered (as if the mapping had discarded them), older than the grace.
  Runs follow one another, on a fake clock that does not move, until every row is out; each run scans on from
  its cursor until it has its due rows (SWEEP_MAX_ROWS), claims them (a conditional UpdateItem each),
  publishes and settles them (a DeleteItem each).
- A pass: `pass_rows` PENDING rows younger than the grace (nothing due), read by one run from end to end:
  the Scan pages' capacity over that many rows, measured, then carried to 1,000,000 rows by DynamoDB's rules
  on the measured row size (no million rows in moto): the arithmetic is in the figure's detail.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any, NamedTuple

from bench import targets
from bench.capacity import READ_UNIT_BYTES, item_size, read_units
from bench.figures import Figure, Group, per
from bench.meters import Snapshot
from bench.publish_figures import PUBLISH_CALLS
from bench.scenarios import one_each, round_robin
from bench.world import bench_world
from outbox.model import RowKey
from outbox_publisher.config import DEFAULT_SWEEP_GRACE_SECONDS
from outbox_sweeper.config import DEFAULT_MAX_ROWS
from outbox_sweeper.scan import PAGE_ITEMS

READS = ("GetItem", "BatchGetItem", "Scan", "Query")
WRITES = ("PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem")
COMMAND = "python -m bench --only sweeper"
HOOKS = "botocore before-call hooks on the sweeper's own clients (moto in process)"
MAX_RUNS = 20
PASS_ROWS = 3000
EXTRAPOLATED_ROWS = 1_000_000
SCAN_PAGE_BYTES = 1024 * 1024
"""A Scan page stops at 1 MB read, whatever its Limit."""
CURSOR_READ_RRU = 1.0
"""The cursor's GetItem, strongly consistent, an item under 4 KB: 1 RRU a run."""


def idle_runs() -> tuple[Snapshot, Snapshot]:
    """The first run on an empty table (no cursor yet) and the next one (the steady state)."""
    with bench_world() as world:
        sweeper = world.sweeper()
        _, first = world.measure(lambda: world.sweep(sweeper))
        _, later = world.measure(lambda: world.sweep(sweeper))
    return first, later


class BacklogRun(NamedTuple):
    swept: int
    rows_read: int
    snapshot: Snapshot


def backlog_runs(rows: int, aggregates: int) -> list[BacklogRun]:
    """What each run did, until the backlog is gone."""
    with bench_world() as world:
        world.write(one_each(aggregates, 1, "sw"))
        publisher = world.publisher()
        world.measure(lambda: world.publish(publisher, world.new_batch()))
        world.write(round_robin(rows, aggregates, prefix="sw", first_seq=2))
        world.world.clock.advance(timedelta(seconds=DEFAULT_SWEEP_GRACE_SECONDS + 1))
        sweeper = world.sweeper()
        runs: list[BacklogRun] = []
        while sum(run.swept for run in runs) < rows:
            if len(runs) == MAX_RUNS:
                raise RuntimeError(f"{MAX_RUNS} sweeps left {rows - sum(r.swept for r in runs)} rows pending")
            report, snapshot = world.measure(lambda: world.sweep(sweeper))
            runs.append(BacklogRun(report.swept, report.rows_read, snapshot))
    return runs


def pass_run(rows: int) -> tuple[Snapshot, dict[str, Any]]:
    """One run reading a table of `rows` PENDING rows that are not due yet; the rows' sizes."""
    with bench_world() as world:
        aggregates = max(1, rows // 10)
        events = round_robin(rows, aggregates, prefix="pass")
        world.write(events)
        sizes = [item_size(world.item(RowKey(event.aggregate_key, event.seq).item())) for event in events]
        sweeper = world.sweeper()
        report, snapshot = world.measure(lambda: world.sweep(sweeper))
        if report.rows_read != rows or report.due:
            raise RuntimeError(f"the pass read {report.rows_read} of {rows} rows, {report.due} due")
        return snapshot, {
            "rows": rows,
            "pages": report.pages,
            "row_bytes_mean": sum(sizes) / len(sizes),
            "row_bytes_max": max(sizes),
        }


def pass_extrapolated(measured: dict[str, Any], rows: int = EXTRAPOLATED_ROWS) -> dict[str, Any]:
    """A read-only pass over `rows` rows of the measured size, by DynamoDB's rules: each Scan page holds
    PAGE_ITEMS rows (or 1 MB), and costs 0.5 RRU per 4 KB of the rows it read, rounded up per page."""
    row_bytes = measured["row_bytes_mean"]
    per_page = min(PAGE_ITEMS, int(SCAN_PAGE_BYTES // row_bytes))
    pages = math.ceil(rows / per_page)
    page_rru = read_units(math.ceil(per_page * row_bytes), consistent=False)
    scan_rru = pages * page_rru
    return {
        "rows": rows,
        "row_bytes": row_bytes,
        "rows_per_page": per_page,
        "pages": pages,
        "rru_per_page": page_rru,
        "scan_rru": scan_rru,
        "arithmetic": (
            f"{rows:,} rows / {per_page:,} rows a page (PAGE_ITEMS, under 1 MB) = {pages:,} pages; a page "
            f"reads {per_page:,} x {row_bytes:,.1f} bytes = {per_page * row_bytes:,.0f} bytes = "
            f"{math.ceil(per_page * row_bytes / READ_UNIT_BYTES):,} x 4 KB x 0.5 RRU = {page_rru:g} RRU; "
            f"{pages:,} x {page_rru:g} = {scan_rru:,.0f} RRU, plus {CURSOR_READ_RRU:g} RRU (cursor GetItem) "
            "and 1 WRU (cursor PutItem) per run the pass spans"
        ),
    }


def measure(rows: int = 1000, aggregates: int = 100, pass_rows: int = PASS_ROWS) -> list[Group]:
    first_idle, idle = idle_runs()
    runs = backlog_runs(rows, aggregates)
    pass_snapshot, pass_measured = pass_run(pass_rows)
    idle_reads, idle_writes = idle.capacity(operations=READS), idle.capacity(operations=WRITES)
    rru = sum(run.snapshot.capacity(operations=READS).rcu for run in runs)
    wru = sum(run.snapshot.capacity(operations=WRITES).wcu for run in runs)
    publish_calls = sum(
        run.snapshot.count(service, operations)
        for run in runs
        for service, operations in PUBLISH_CALLS.items()
    )
    scale = 1000 / rows
    pass_scan = pass_snapshot.capacity(operations=("Scan",))
    pass_reads = pass_snapshot.capacity(operations=READS)
    measured_rule = pass_extrapolated(pass_measured, pass_rows)
    extrapolated = pass_extrapolated(pass_measured)
    figures = [
        Figure(
            "sweeper.idle.rru",
            "RRU per idle run (cursor GetItem + one Scan page)",
            "RRU/run",
            idle_reads.rcu,
            decimals=1,
            source=idle_reads.source(),
            detail={
                "calls": idle.calls_detail(),
                "usage": idle_reads.to_json(),
                "first_run_calls": first_idle.calls_detail(),
                "first_run_rru": first_idle.capacity(operations=READS).rcu,
            },
        ),
        Figure(
            "sweeper.idle.wru",
            "WRU per idle run (cursor PutItem)",
            "WRU/run",
            idle_writes.wcu,
            decimals=1,
            source=idle_writes.source(),
            detail={"usage": idle_writes.to_json()},
        ),
        Figure(
            "sweeper.backlog.rru",
            f"RRU per 1,000 pending rows drained ({aggregates} aggregates, {len(runs)} runs)",
            "RRU/1,000 rows",
            rru * scale,
            decimals=1,
            source=runs[0].snapshot.capacity(operations=READS).source(),
            detail=_backlog_detail(runs, rows),
        ),
        Figure(
            "sweeper.backlog.wru",
            "WRU per 1,000 pending rows drained (claims, settles, cursor)",
            "WRU/1,000 rows",
            wru * scale,
            decimals=1,
            source=runs[0].snapshot.capacity(operations=WRITES).source(),
            detail={
                "by_operation": {
                    operation: sum(run.snapshot.capacity(operations=[operation]).wcu for run in runs) * scale
                    for operation in WRITES
                }
            },
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
        Figure(
            "sweeper.pass.rru.measured",
            f"RRU of one run reading {pass_rows:,} rows not yet due (a pass over them)",
            "RRU/pass",
            pass_reads.rcu,
            decimals=1,
            source=pass_reads.source(),
            detail={
                "measured": pass_measured,
                "scan": pass_scan.to_json(),
                "calls": pass_snapshot.calls_detail(),
                "rules_for_the_same_rows": measured_rule,
            },
        ),
        Figure(
            "sweeper.pass.rru.1m",
            f"RRU per full pass over {EXTRAPOLATED_ROWS:,} rows (rules on the measured row size)",
            "RRU/pass",
            extrapolated["scan_rru"],
            decimals=0,
            source="DynamoDB's Scan rules on the row size measured by the pass above (none of a million)",
            detail=extrapolated,
        ),
    ]
    return [
        Group(
            "sweeper",
            "Sweeper capacity (cursor, Scan pages, claims, settles)",
            "- (the naive publisher has no sweeper)",
            figures,
            notes=[
                "Scan pages are eventually consistent: 0.5 RRU per 4 KB of whole rows read, summed per page "
                f"({PAGE_ITEMS:,} rows a page), at least 0.5. The cursor is read strongly consistent (1 RRU) "
                "and written once per run (1 WRU).",
                f"Draining: each run takes up to {DEFAULT_MAX_ROWS} due rows and stops right after the row "
                "that filled it; the next run reads on from there, so the rest of that page is read again: "
                "the backlog's Scan RRU per 1,000 rows (its detail) against a pass's (`sweeper.pass.*`).",
                "A full pass over 1,000,000 rows, the figure's arithmetic: the pages' reads only. A pass "
                "spans as many runs as its time allows (each stops scanning 30 s before its deadline); each "
                "run adds its cursor's 1 RRU and 1 WRU. Draining rows costs what the backlog figure "
                "says per 1,000 rows.",
            ],
            command=COMMAND,
        )
    ]


def _backlog_detail(runs: list[BacklogRun], rows: int) -> dict[str, Any]:
    calls: dict[str, int] = {}
    for run in runs:
        for name, count in run.snapshot.calls_detail().items():
            calls[name] = calls.get(name, 0) + count
    return {
        "rows": rows,
        "swept_per_run": [run.swept for run in runs],
        "rows_read_per_run": [run.rows_read for run in runs],
        "calls_all_runs": calls,
        "rru_by_operation_per_1000_rows": {
            operation: sum(run.snapshot.capacity(operations=[operation]).rcu for run in runs) * 1000 / rows
            for operation in READS
        },
        "claims_per_row": per(calls.get("dynamodb.UpdateItem", 0), rows),
        "settles_per_row": per(calls.get("dynamodb.DeleteItem", 0), rows),
    }
