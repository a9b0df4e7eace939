"""The promise, checked over a whole kill run (`outbox local up --state-dir` killed and restarted under load):

- lost: an event the HTTP API acknowledged that did not reach a queue (the topic's, the bus's), or an
  acknowledged order the final runtime does not hold;
- invented: a delivered event whose order the final runtime does not hold at that version or later, or two
  different events delivered for one (order, seq): an event published for a write a crash undid;
- out of order: on a queue, an order's event first arriving before its predecessor first arrived;
- duplicates: copies beyond the first of an event on a queue (allowed: at least once), counted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from tests.local_crash.harness import Acknowledged, Delivery

VIOLATIONS = ("lost", "not_held", "invented", "out_of_order")


def check(
    acknowledged: Sequence[Acknowledged],
    queues: Mapping[str, Sequence[Delivery]],
    orders: Mapping[str, int],
) -> dict[str, Any]:
    events_by_key: dict[tuple[str, int], set[str]] = {}
    for deliveries in queues.values():
        for delivery in deliveries:
            events_by_key.setdefault((delivery.aggregate_id, delivery.seq), set()).add(delivery.event_id)
    lost = {
        name: sorted({a.event_id for a in acknowledged} - {d.event_id for d in deliveries})
        for name, deliveries in queues.items()
    }
    not_held = sorted({a.order_id for a in acknowledged if orders.get(a.order_id, 0) < a.seq})
    invented = sorted(
        f"{aggregate} seq {seq}"
        for (aggregate, seq), event_ids in events_by_key.items()
        if orders.get(aggregate, 0) < seq or len(event_ids) > 1
    )
    out_of_order = {name: _out_of_order(deliveries) for name, deliveries in queues.items()}
    duplicates = {
        name: sum(count - 1 for count in Counter(d.event_id for d in deliveries).values())
        for name, deliveries in queues.items()
    }
    return {
        "acknowledged_events": len(acknowledged),
        "acknowledged_orders": len({a.order_id for a in acknowledged}),
        "orders_held": len(orders),
        "delivered": {name: len({d.event_id for d in deliveries}) for name, deliveries in queues.items()},
        "copies": {name: len(deliveries) for name, deliveries in queues.items()},
        "duplicates": duplicates,
        "lost": {name: len(ids) for name, ids in lost.items()},
        "lost_examples": {name: ids[:5] for name, ids in lost.items() if ids},
        "not_held": len(not_held),
        "not_held_examples": not_held[:5],
        "invented": len(invented),
        "invented_examples": invented[:5],
        "out_of_order": {name: len(found) for name, found in out_of_order.items()},
        "out_of_order_examples": {name: found[:5] for name, found in out_of_order.items() if found},
    }


def broken(summary: Mapping[str, Any]) -> list[str]:
    """The promises the summary shows broken (empty: all held)."""
    found = [f"lost on {name}: {count}" for name, count in summary["lost"].items() if count]
    if summary["not_held"]:
        found.append(f"acknowledged orders not held: {summary['not_held']}")
    if summary["invented"]:
        found.append(f"invented: {summary['invented']}")
    found += [f"out of order on {name}: {count}" for name, count in summary["out_of_order"].items() if count]
    return found


def _out_of_order(deliveries: Sequence[Delivery]) -> list[str]:
    first_arrival: dict[tuple[str, int], int] = {}
    for position, delivery in enumerate(deliveries):
        first_arrival.setdefault((delivery.aggregate_id, delivery.seq), position)
    return sorted(
        f"{aggregate} seq {seq}"
        for (aggregate, seq), position in first_arrival.items()
        if seq > 1 and first_arrival.get((aggregate, seq - 1), -1) > position
    )
