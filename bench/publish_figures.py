"""Publish calls, marking and order-gate reads per event: ours and the naive publisher's, counted on moto.

Each scenario runs in a fresh world (bench.world): its rows written, its stream records delivered to the
publisher as ONE Lambda batch, the publisher's calls counted by botocore hooks on its own clients and its
DynamoDB capacity metered (bench.capacity). A batch the publisher hands back fails the run: a figure of a
failed batch would count something else.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bench import targets
from bench.capacity import Usage
from bench.figures import Figure, Group, per
from bench.meters import Snapshot
from bench.scenarios import hot_aggregate, one_each, random_interleave, round_robin, skewed_interleave
from bench.world import BenchWorld, bench_world
from outbox.model import OutboxEvent

PUBLISH_CALLS = {"sns": ("Publish", "PublishBatch"), "events": ("PutEvents",)}
MARKING_CALLS = ("TransactWriteItems", "UpdateItem", "BatchWriteItem", "BatchExecuteStatement")
GATE_READS = ("BatchGetItem", "Query")
COMMAND = "python -m bench --only publishing"
HOOKS = "botocore before-call hooks on the publisher's own clients (moto in process)"


@dataclass(frozen=True)
class Sizes:
    """The issue's sizes; the harness's test runs it smaller."""

    records: int = 100
    aggregates: int = 10
    large: int = 1000


@dataclass(frozen=True)
class Delivery:
    """One batch delivered to a publisher; `again`: the same batch again, its rows PUBLISHED by then."""

    events: int
    first: Snapshot
    again: Snapshot | None = None


def deliver(events: Sequence[OutboxEvent], *, naive: bool, redeliver: bool = False) -> Delivery:
    with bench_world() as world:
        world.write(events)
        batch = world.new_batch()
        if len(batch["Records"]) != len(events):
            raise RuntimeError(f"{len(events)} rows written, {len(batch['Records'])} stream records")
        run = _runner(world, batch, naive=naive)
        _, first = world.measure(run)
        again = world.measure(run)[1] if redeliver else None
    return Delivery(len(events), first, again)


def gate_run(
    earlier: Sequence[OutboxEvent],
    measured: Sequence[OutboxEvent],
    *,
    naive: bool,
    expire_earlier: bool = False,
) -> Delivery:
    """`earlier` published first (not measured), then `measured` in a batch of its own; with `expire_earlier`
    the earlier rows are deleted in between, as their TTL would."""
    with bench_world() as world:
        world.write(earlier)
        world.measure(_runner(world, world.new_batch(), naive=naive))
        if expire_earlier:
            for event in earlier:
                world.world.dynamodb.delete_item(TableName=world.outbox_table, Key=_key(event))
        world.write(measured)
        _, snapshot = world.measure(_runner(world, world.new_batch(), naive=naive))
    return Delivery(len(measured), snapshot)


def measure(sizes: Sizes = Sizes()) -> list[Group]:
    records, aggregates = sizes.records, sizes.aggregates
    scenarios: list[tuple[str, str, list[OutboxEvent]]] = [
        (
            "round_robin",
            f"{records} records, {aggregates} aggregates, round-robin",
            round_robin(records, aggregates),
        ),
        (
            "random",
            f"{records} records, {aggregates} aggregates, random interleave",
            random_interleave(records, aggregates),
        ),
        (
            "random_large",
            f"{sizes.large:,} records, {aggregates} aggregates, random interleave",
            random_interleave(sizes.large, aggregates, prefix="rl"),
        ),
        (
            "skewed",
            f"{records} records, {aggregates} aggregates, one holding a fifth, random interleave",
            skewed_interleave(records, aggregates, busiest=records // 5),
        ),
        ("hot", f"{records} records, one hot aggregate", hot_aggregate(records)),
    ]
    deliveries: dict[str, tuple[Delivery, Delivery]] = {}
    for name, _, events in scenarios:
        redeliver = name == "round_robin"
        deliveries[name] = (
            deliver(events, naive=False, redeliver=redeliver),
            deliver(events, naive=True, redeliver=redeliver),
        )
    publish = Group(
        "publish",
        "Publish calls per event per destination",
        "naive publisher",
        [_publish_figure(name, label, *deliveries[name]) for name, label, _ in scenarios],
        notes=[
            "SNS PublishBatch/Publish and EventBridge PutEvents calls, summed over both destinations, "
            "divided by 2 x events. The floor: 10 entries per call. Billed SNS requests and EventBridge "
            "events (64 KB chunks) are in each figure's detail.",
        ],
        command=COMMAND,
    )
    return [publish, _marking_group(*deliveries["round_robin"], records), _gate_group(sizes)]


def _publish_figure(name: str, label: str, ours: Delivery, naive: Delivery) -> Figure:
    return Figure(
        f"publish.{name}",
        label,
        "calls/event/destination",
        publish_calls_per_destination(ours.first, ours.events),
        publish_calls_per_destination(naive.first, naive.events),
        floor=targets.PUBLISH_CALLS_FLOOR,
        target=targets.PUBLISH_CALLS_TARGET,
        source=HOOKS,
        detail={
            "events": ours.events,
            "ours_calls": ours.first.calls_detail(),
            "naive_calls": naive.first.calls_detail(),
            "ours_billed_per_event": _billed(ours.first, ours.events),
            "naive_billed_per_event": _billed(naive.first, naive.events),
        },
    )


def _marking_group(ours: Delivery, naive: Delivery, records: int) -> Group:
    assert ours.again is not None  # noqa: S101 - deliver(redeliver=True)
    assert naive.again is not None  # noqa: S101
    figures = []
    for when, label, our_step, naive_step in (
        ("first", "first delivery", ours.first, naive.first),
        ("redelivered", "redelivered (rows PUBLISHED)", ours.again, naive.again),
    ):
        our_usage, naive_usage = _marking_usage(our_step), _marking_usage(naive_step)
        figures.append(
            Figure(
                f"marking.calls.{when}",
                f"marking calls, {label}",
                "calls/event",
                per(our_step.count("dynamodb", MARKING_CALLS), ours.events),
                per(naive_step.count("dynamodb", MARKING_CALLS), naive.events),
                floor=targets.MARKING_CALLS_FLOOR,
                target=targets.MARKING_CALLS_TARGET,
                source=HOOKS,
                detail={"ours_calls": our_step.calls_detail(), "naive_calls": naive_step.calls_detail()},
            )
        )
        figures.append(
            Figure(
                f"marking.wcu.{when}",
                f"marking WCU (table), {label}",
                "WCU/row",
                per(our_usage.table_wcu, ours.events),
                per(naive_usage.table_wcu, naive.events),
                floor=targets.MARKING_WCU_FLOOR,
                target=targets.MARKING_WCU_TARGET,
                source=our_usage.source(),
                detail={
                    "ours": our_usage.to_json(),
                    "naive": naive_usage.to_json(),
                    "ours_index_wcu_per_row": per(our_usage.index_wcu, ours.events),
                    "naive_index_wcu_per_row": per(naive_usage.index_wcu, naive.events),
                },
            )
        )
    return Group(
        "marking",
        f"Marking rows PUBLISHED ({records} records, round-robin)",
        "naive publisher",
        figures,
        notes=[
            "Marking calls: BatchExecuteStatement, TransactWriteItems, UpdateItem and BatchWriteItem on the "
            "outbox table. WCU: "
            "the table's own; the pending index's WCU (removing the row from the sweeper's sparse index, "
            "which the naive publisher never had) is in the detail and in the lifecycle figures.",
            "Ours marks with PartiQL BatchExecuteStatement, 25 conditional UPDATEs a call, each answered "
            "on its own: on a redelivered batch (every row already PUBLISHED) each statement fails its "
            "condition, charged as a standard write, and no row is retried alone.",
        ],
        command=COMMAND,
    )


def _gate_group(sizes: Sizes) -> Group:
    records, aggregates = sizes.records, sizes.aggregates
    per_aggregate = records // aggregates
    scenarios = [
        (
            "healthy",
            f"healthy ({records} round-robin, predecessors published earlier)",
            round_robin(records, aggregates, prefix="gh"),
            round_robin(records, aggregates, prefix="gh", first_seq=per_aggregate + 1),
            False,
        ),
        (
            "outside",
            f"{records} aggregates, each predecessor outside the run",
            one_each(records, 1, "go"),
            one_each(records, 2, "go"),
            False,
        ),
        (
            "expired",
            f"{records} aggregates, each predecessor outside, TTL-deleted",
            one_each(records, 1, "ge"),
            one_each(records, 2, "ge"),
            True,
        ),
    ]
    figures = []
    for name, label, earlier, measured, expire in scenarios:
        healthy = name == "healthy"
        ours = gate_run(earlier, measured, naive=False, expire_earlier=expire)
        # The naive publisher has no gate: measured once, on the healthy path, to show it reads nothing.
        naive = gate_run(earlier, measured, naive=True) if healthy else None
        usage = ours.first.capacity(operations=GATE_READS)
        figures.append(
            Figure(
                f"gate.reads.{name}",
                f"read calls, {label}",
                "calls/event",
                per(ours.first.count("dynamodb", GATE_READS), ours.events),
                None if naive is None else per(naive.first.count("dynamodb", GATE_READS), naive.events),
                target=targets.GATE_READS_TARGET if healthy else None,
                decimals=3,
                source=HOOKS,
                detail={
                    "ours_calls": ours.first.calls_detail(),
                    "naive_calls": None if naive is None else naive.first.calls_detail(),
                },
            )
        )
        figures.append(
            Figure(
                f"gate.rcu.{name}",
                f"RCU, {label}",
                "RCU/event",
                per(usage.rcu, ours.events),
                None if naive is None else per(naive.first.capacity(operations=GATE_READS).rcu, naive.events),
                target=targets.GATE_RCU_TARGET if healthy else None,
                decimals=3,
                source=usage.source(),
                detail={"ours": usage.to_json()},
            )
        )
    return Group(
        "gate",
        "Order-gate reads (BatchGetItem, and a Query per missing predecessor)",
        "naive publisher (no gate: no reads, no order)",
        figures,
        notes=[
            "Reads are strongly consistent: 1 RCU per item up to 4 KB, a missing item or an empty Query 1.",
            "The naive publisher, which keeps no order, is measured on the healthy path only.",
        ],
        command=COMMAND,
    )


def _runner(world: BenchWorld, batch: dict[str, Any], *, naive: bool) -> Callable[[], object]:
    if naive:
        baseline = world.naive()
        return lambda: world.publish_naively(baseline, batch)
    ours = world.publisher()
    return lambda: world.publish(ours, batch)


def publish_calls_per_destination(snapshot: Snapshot, events: int) -> float:
    calls = sum(snapshot.count(service, operations) for service, operations in PUBLISH_CALLS.items())
    return per(calls, 2 * events)


def _marking_usage(snapshot: Snapshot) -> Usage:
    return snapshot.capacity(operations=MARKING_CALLS)


def _billed(snapshot: Snapshot, events: int) -> dict[str, float]:
    return {name: per(units, events) for name, units in sorted(snapshot.billed.items())}


def _key(event: OutboxEvent) -> dict[str, Any]:
    return {"aggregate_key": {"S": event.aggregate_key}, "seq": {"N": str(event.seq)}}
