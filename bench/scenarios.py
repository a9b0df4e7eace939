"""The stream interleaves the figures are measured on: which aggregate's next event comes next.

Every event is the sample's OrderPlaced payload for a one-line order (what `orders.service` writes), PENDING,
two seconds old on the fake clock (tests.support.events), so the stream publisher takes it without a claim.
Each aggregate's events keep their `seq` order in the stream, as a writer commits them.

`scenarios()` names the interleaves the publish figures count, the CPU figures time and the cost figures price
(bench.publish_figures, bench.cpu_figures, bench.cost), the order-like one included: one event of each of 100
aggregates per batch, each following one an earlier batch settled, in a warm container (its memory holds the
predecessors) and a cold one (its gate reads them).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from outbox.model import OutboxEvent
from tests.support.events import event

RANDOM_SEED = 14
"""The issue's number: the same "random" interleave on every run."""
ORDER_LIKE_AGGREGATES = 100


def order_payload(order_id: str) -> dict[str, Any]:
    """The sample's OrderPlaced payload (orders.service._payload) for one line of two items."""
    return {
        "order_id": order_id,
        "customer_id": "customer-1",
        "currency": "EUR",
        "total": "19.98",
        "lines": [{"sku": "SKU-1", "quantity": 2, "unit_price": "9.99", "amount": "19.98"}],
    }


def aggregate_id(prefix: str, number: int) -> str:
    return f"{prefix}-{number:04d}"


def events_in_order(prefix: str, aggregates: Sequence[int], first_seq: int = 1) -> list[OutboxEvent]:
    """One event per entry of `aggregates` (aggregate numbers, in stream order), each aggregate's seq counting
    up from `first_seq`."""
    next_seq: dict[int, int] = {}
    events = []
    for number in aggregates:
        seq = next_seq.get(number, first_seq)
        next_seq[number] = seq + 1
        name = aggregate_id(prefix, number)
        events.append(event(name, seq, payload=order_payload(name)))
    return events


def round_robin(records: int, aggregates: int, prefix: str = "rr", first_seq: int = 1) -> list[OutboxEvent]:
    """a1#1, a2#1 ... aN#1, a1#2, a2#2 ...: the friendliest interleave for batching."""
    return events_in_order(prefix, [index % aggregates for index in range(records)], first_seq)


def random_interleave(records: int, aggregates: int, prefix: str = "ri") -> list[OutboxEvent]:
    """`records` events spread evenly over `aggregates`, in a seeded random order."""
    order = [index % aggregates for index in range(records)]
    random.Random(RANDOM_SEED).shuffle(order)  # noqa: S311 - a test pattern, not a secret
    return events_in_order(prefix, order)


def skewed_interleave(records: int, aggregates: int, busiest: int, prefix: str = "sk") -> list[OutboxEvent]:
    """`records` events over `aggregates`, the first holding `busiest` of them and the others the rest evenly,
    in a seeded random order: a batch needs at least `busiest` calls per destination."""
    others = aggregates - 1
    if others < 1 or not (records - busiest) / others <= busiest <= records:
        raise ValueError(f"no batch of {records} over {aggregates} aggregates has one holding {busiest}")
    order = [0] * busiest + [1 + index % others for index in range(records - busiest)]
    random.Random(RANDOM_SEED).shuffle(order)  # noqa: S311 - a test pattern, not a secret
    return events_in_order(prefix, order)


def hot_aggregate(records: int, prefix: str = "hot") -> list[OutboxEvent]:
    """Every event of one aggregate: the worst interleave (no call may hold two events of one aggregate)."""
    return events_in_order(prefix, [0] * records)


def one_each(aggregates: int, seq: int, prefix: str) -> list[OutboxEvent]:
    """Event `seq` of each of `aggregates` aggregates."""
    events = []
    for number in range(aggregates):
        name = aggregate_id(prefix, number)
        events.append(event(name, seq, payload=order_payload(name)))
    return events


@dataclass(frozen=True)
class Sizes:
    """The issue's sizes; the harness's test runs it smaller."""

    records: int = 100
    aggregates: int = 10
    large: int = 1000
    order_like: int = ORDER_LIKE_AGGREGATES


@dataclass(frozen=True)
class Scenario:
    name: str
    label: str
    events: list[OutboxEvent]
    earlier: list[OutboxEvent] | None = None
    """Published first, by the same container (`warm`) or another one."""
    warm: bool = False


DEFAULT_SIZES = Sizes()


def scenarios(sizes: Sizes = DEFAULT_SIZES) -> list[Scenario]:
    """The interleaves every publish figure and cost line is measured on."""
    records, aggregates, order_like = sizes.records, sizes.aggregates, sizes.order_like
    earlier, later = one_each(order_like, 1, "ol"), one_each(order_like, 2, "ol")
    return [
        Scenario(
            "round_robin",
            f"{records} records, {aggregates} aggregates, round-robin",
            round_robin(records, aggregates),
        ),
        Scenario(
            "random",
            f"{records} records, {aggregates} aggregates, random interleave",
            random_interleave(records, aggregates),
        ),
        Scenario(
            "random_large",
            f"{sizes.large:,} records, {aggregates} aggregates, random interleave",
            random_interleave(sizes.large, aggregates, prefix="rl"),
        ),
        Scenario(
            "skewed",
            f"{records} records, {aggregates} aggregates, one holding a fifth, random interleave",
            skewed_interleave(records, aggregates, busiest=records // 5),
        ),
        Scenario("hot", f"{records} records, one hot aggregate", hot_aggregate(records)),
        Scenario(
            "order_like",
            f"order-like: {order_like} aggregates, one event each, every predecessor settled by this "
            "container's previous batch (warm)",
            later,
            earlier,
            warm=True,
        ),
        Scenario(
            "order_like.cold",
            f"order-like: {order_like} aggregates, one event each, every predecessor settled before this "
            "container started (cold)",
            later,
            earlier,
            warm=False,
        ),
    ]
