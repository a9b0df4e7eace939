"""Publish calls, settles and order-gate reads per event: ours and the naive publisher's, counted on moto.

Each scenario runs in a fresh world (bench.world): its rows written, its stream records delivered to the
publisher as ONE Lambda batch, the publisher's calls counted by botocore hooks on its own clients and its
DynamoDB capacity metered (bench.capacity). A batch the publisher hands back fails the run: a figure of a
failed batch would count something else.

Our publisher remembers the rows it settled (outbox_publisher.memory): a successor whose predecessor is among
them needs no gate read, and a record of a row it settled, delivered again, is skipped. So the figures where
that matters are measured twice: by the container that published the earlier batch (warm: its memory holds
those rows) and by another one, or the same after a cold start (cold: it remembers nothing).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bench import targets
from bench.capacity import Usage
from bench.figures import Figure, Group, per
from bench.meters import Snapshot
from bench.scenarios import DEFAULT_SIZES, Scenario, Sizes, one_each, round_robin, scenarios
from bench.world import BenchWorld, bench_world
from outbox.model import OutboxEvent
from outbox_publisher.handler import Publisher

PUBLISH_CALLS = {"sns": ("Publish", "PublishBatch"), "events": ("PutEvents",)}
SETTLE_CALLS = ("DeleteItem",)
"""Ours settles a row by deleting it."""
NAIVE_MARK_CALLS = ("UpdateItem",)
"""The naive publisher marks each row PUBLISHED."""
ROW_WRITES = ("DeleteItem", "UpdateItem", "PutItem", "TransactWriteItems", "BatchWriteItem")
"""Every DynamoDB write a publisher may make."""
GATE_READS = ("BatchGetItem",)
COMMAND = "python -m bench --only publishing"
HOOKS = "botocore before-call hooks on the publisher's own clients (moto in process)"


@dataclass(frozen=True)
class Delivery:
    """One batch delivered to a publisher; `again`: the same batch again to the same container (the rows it
    settled are in its memory); `elsewhere`: the same batch again to a container that remembers nothing."""

    events: int
    first: Snapshot
    again: Snapshot | None = None
    elsewhere: Snapshot | None = None


def deliver(events: Sequence[OutboxEvent], *, naive: bool, redeliver: bool = False) -> Delivery:
    with bench_world() as world:
        world.write(events)
        batch = world.new_batch()
        if len(batch["Records"]) != len(events):
            raise RuntimeError(f"{len(events)} rows written, {len(batch['Records'])} stream records")
        container = _container(world, naive=naive)
        _, first = world.measure(lambda: container(batch))
        again = elsewhere = None
        if redeliver:
            again = world.measure(lambda: container(batch))[1]
            other = _container(world, naive=naive)
            elsewhere = world.measure(lambda: other(batch))[1]
    return Delivery(len(events), first, again, elsewhere)


def after_earlier(
    earlier: Sequence[OutboxEvent], measured: Sequence[OutboxEvent], *, naive: bool, warm: bool = False
) -> Delivery:
    """`earlier` published first (not measured), then `measured` in a batch of its own: by the container that
    published `earlier` (`warm`) or by another one."""
    with bench_world() as world:
        world.write(earlier)
        container = _container(world, naive=naive)
        world.measure(lambda: container(world.new_batch()))
        world.write(measured)
        batch = world.new_batch()
        if not warm:
            container = _container(world, naive=naive)
        _, snapshot = world.measure(lambda: container(batch))
    return Delivery(len(measured), snapshot)


def run(scenario: Scenario, *, naive: bool, redeliver: bool = False) -> Delivery:
    if scenario.earlier is None:
        return deliver(scenario.events, naive=naive, redeliver=redeliver)
    return after_earlier(scenario.earlier, scenario.events, naive=naive, warm=scenario.warm)


def measure(sizes: Sizes = DEFAULT_SIZES) -> list[Group]:
    measured = scenarios(sizes)
    deliveries: dict[str, tuple[Delivery, Delivery]] = {}
    naive_by_batch: dict[int, Delivery] = {}
    for scenario in measured:
        redeliver = scenario.name == "round_robin"
        # The naive publisher has no memory: the warm and cold order-like batches are one batch to it.
        if scenario.earlier is not None and id(scenario.events) in naive_by_batch:
            naive = naive_by_batch[id(scenario.events)]
        else:
            naive = run(scenario, naive=True, redeliver=redeliver)
            naive_by_batch[id(scenario.events)] = naive
        deliveries[scenario.name] = (run(scenario, naive=False, redeliver=redeliver), naive)
    publish = Group(
        "publish",
        "Publish calls per event per destination",
        "naive publisher",
        [publish_figure(scenario, *deliveries[scenario.name]) for scenario in measured],
        notes=[
            "SNS PublishBatch/Publish and EventBridge PutEvents calls, summed over both destinations, "
            "divided by 2 x events. The floor: 10 entries per call. Billed SNS requests and EventBridge "
            "events (64 KB chunks), every call and the DynamoDB capacity per event are in each figure's "
            "detail: the cost section reads them from there.",
            "Order-like: each batch holds one event of each of 100 aggregates (say, an order's "
            "confirmation), "
            "so every event's predecessor was settled by an earlier batch: warm, this container's own "
            "previous batch (its memory of what it settled answers the gate); cold, a container that "
            "remembers nothing (another one, or a cold start), whose gate reads every predecessor.",
        ],
        command=COMMAND,
    )
    return [publish, _settle_group(*deliveries["round_robin"], sizes.records), _gate_group(sizes)]


def publish_figure(scenario: Scenario, ours: Delivery, naive: Delivery) -> Figure:
    return Figure(
        f"publish.{scenario.name}",
        scenario.label,
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
            "ours_capacity_per_event": ours_capacity(ours.first, ours.events),
            "naive_capacity_per_event": naive_capacity(naive.first, naive.events),
        },
    )


def ours_capacity(snapshot: Snapshot, events: int) -> dict[str, float]:
    """Our DynamoDB capacity per event: the settles, any other write, the gate's reads."""
    settles = snapshot.capacity(operations=SETTLE_CALLS)
    other = snapshot.capacity(operations=[op for op in ROW_WRITES if op not in SETTLE_CALLS])
    gate = snapshot.capacity(operations=GATE_READS)
    return {
        "settle_wcu": per(settles.table_wcu + settles.index_wcu, events),
        "other_write_wcu": per(other.wcu, events),
        "other_write_calls": per(other.calls, events),
        "gate_rru": per(gate.rcu, events),
    }


def naive_capacity(snapshot: Snapshot, events: int) -> dict[str, float]:
    marks = snapshot.capacity(operations=NAIVE_MARK_CALLS)
    return {"mark_wcu": per(marks.wcu, events)}


def _settle_group(ours: Delivery, naive: Delivery, records: int) -> Group:
    assert ours.again is not None  # noqa: S101 - deliver(redeliver=True)
    assert ours.elsewhere is not None  # noqa: S101
    assert naive.again is not None  # noqa: S101
    settles = ours.first.capacity(operations=SETTLE_CALLS)
    marks = naive.first.capacity(operations=NAIVE_MARK_CALLS)
    others = ours.first.capacity(operations=[op for op in ROW_WRITES if op not in SETTLE_CALLS])
    figures = [
        Figure(
            "settle.calls.first",
            "settle calls (ours: DeleteItem; naive: UpdateItem), first delivery",
            "calls/event",
            per(ours.first.count("dynamodb", SETTLE_CALLS), ours.events),
            per(naive.first.count("dynamodb", NAIVE_MARK_CALLS), naive.events),
            floor=targets.SETTLE_CALLS_FLOOR,
            target=targets.SETTLE_CALLS_TARGET,
            source=HOOKS,
            detail={"ours_calls": ours.first.calls_detail(), "naive_calls": naive.first.calls_detail()},
        ),
        Figure(
            "settle.wcu.first",
            "settle WCU, first delivery",
            "WCU/row",
            per(settles.wcu, ours.events),
            per(marks.wcu, naive.events),
            floor=targets.SETTLE_WCU_FLOOR,
            target=targets.SETTLE_WCU_TARGET,
            source=settles.source(),
            detail={"ours": settles.to_json(), "naive": marks.to_json()},
        ),
        Figure(
            "settle.other_writes.first",
            "writes besides the settles, first delivery (healthy path)",
            "WCU/event",
            per(others.wcu, ours.events),
            target=targets.HEALTHY_OTHER_WCU_TARGET,
            source=others.source() if others.calls else HOOKS,
            detail={"ours": others.to_json()},
        ),
    ]
    for when, label, step in (
        ("same", "the same batch again, to the container that settled it", ours.again),
        ("elsewhere", "the same batch again, to a container that remembers nothing", ours.elsewhere),
    ):
        usage = step.capacity(operations=SETTLE_CALLS)
        figures.append(
            Figure(
                f"settle.calls.redelivered.{when}",
                f"settle calls, {label}",
                "calls/event",
                per(step.count("dynamodb", SETTLE_CALLS), ours.events),
                per(naive.again.count("dynamodb", NAIVE_MARK_CALLS), naive.events),
                source=HOOKS,
                detail={
                    "ours_calls": step.calls_detail(),
                    "naive_calls": naive.again.calls_detail(),
                    "ours_publish_calls_per_event_per_destination": publish_calls_per_destination(
                        step, ours.events
                    ),
                },
            )
        )
        figures.append(
            Figure(
                f"settle.wcu.redelivered.{when}",
                f"settle WCU, {label}",
                "WCU/row",
                per(usage.wcu, ours.events),
                per(naive.again.capacity(operations=NAIVE_MARK_CALLS).wcu, naive.events),
                source=usage.source() if usage.calls else HOOKS,
                detail={"ours": usage.to_json()},
            )
        )
    return Group(
        "settle",
        f"Settling rows ({records} records, round-robin)",
        "naive publisher (marks each row PUBLISHED: one UpdateItem)",
        figures,
        notes=[
            "Ours settles each published row with a conditional DeleteItem (status PENDING, the same "
            "event_id and generation): 1 WCU per KB of the deleted row. The naive publisher marks it "
            "PUBLISHED with an "
            "unconditional UpdateItem: 1 WCU, and the row stays until its TTL.",
            "Redelivered, same container: the records of rows it settled are skipped (its memory), no call. "
            "Another container publishes them again (a duplicate, as at-least-once allows) and its deletes "
            "fail their condition (the rows are gone): a failed condition is still charged 1 WCU.",
        ],
        command=COMMAND,
    )


def _gate_group(sizes: Sizes) -> Group:
    records, aggregates, order_like = sizes.records, sizes.aggregates, sizes.order_like
    per_aggregate = records // aggregates
    earlier_rr = round_robin(records, aggregates, prefix="gh")
    later_rr = round_robin(records, aggregates, prefix="gh", first_seq=per_aggregate + 1)
    earlier_ol, later_ol = one_each(order_like, 1, "go"), one_each(order_like, 2, "go")
    measured = [
        (
            "healthy",
            f"healthy ({records} round-robin, predecessors settled earlier), cold",
            earlier_rr,
            later_rr,
        ),
        ("healthy.warm", f"healthy ({records} round-robin), warm", earlier_rr, later_rr),
        ("order_like", f"order-like ({order_like} aggregates, one event each), cold", earlier_ol, later_ol),
        (
            "order_like.warm",
            f"order-like ({order_like} aggregates, one event each), warm",
            earlier_ol,
            later_ol,
        ),
    ]
    figures = []
    for name, label, earlier, later in measured:
        healthy = name == "healthy"
        ours = after_earlier(earlier, later, naive=False, warm=name.endswith(".warm"))
        # The naive publisher has no gate: measured once, on the healthy path, to show it reads nothing.
        naive = after_earlier(earlier, later, naive=True) if healthy else None
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
                source=usage.source() if usage.calls else HOOKS,
                detail={"ours": usage.to_json()},
            )
        )
    return Group(
        "gate",
        "Order-gate reads (BatchGetItem of the predecessors outside the batch)",
        "naive publisher (no gate: no reads, no order)",
        figures,
        notes=[
            "A predecessor's row is absent once it is out: the gate reads it (strongly consistent, 1 RCU per "
            "item up to 4 KB, an absent item 1) unless the container settled it itself (warm: no read).",
            "The naive publisher, which keeps no order, is measured on the healthy path only.",
        ],
        command=COMMAND,
    )


def _container(world: BenchWorld, *, naive: bool) -> Callable[[dict[str, Any]], object]:
    """A publisher process: ours (with its own memory of what it settled) or the naive one."""
    if naive:
        baseline = world.naive()
        return lambda batch: world.publish_naively(baseline, batch)
    ours: Publisher = world.publisher()
    return lambda batch: world.publish(ours, batch)


def publish_calls_per_destination(snapshot: Snapshot, events: int) -> float:
    calls = sum(snapshot.count(service, operations) for service, operations in PUBLISH_CALLS.items())
    return per(calls, 2 * events)


def settle_usage(snapshot: Snapshot) -> Usage:
    return snapshot.capacity(operations=SETTLE_CALLS)


def _billed(snapshot: Snapshot, events: int) -> dict[str, float]:
    return {name: per(units, events) for name, units in sorted(snapshot.billed.items())}
