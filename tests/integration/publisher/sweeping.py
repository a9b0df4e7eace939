"""What the sweeper's tests check, on the world of publisher_world.py: what was published, rows' states, and
the promise's order."""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from datetime import timedelta

from outbox.model import OutboxEvent, RowKey
from tests.integration.publisher.publisher_world import World

GRACE = timedelta(seconds=60)


def published_ids(world: World) -> list[str]:
    return [envelope["event_id"] for envelope in world.topic_envelopes()]


def assert_in_seq_order(
    published: list[str], *aggregates: list[OutboxEvent], released: AbstractSet[str] = frozenset()
) -> None:
    """Per aggregate: each event's first publication comes after its predecessor's (duplicates allowed),
    unless the predecessor was released by an operator (`released`, by event id)."""
    firsts = list(dict.fromkeys(published))
    for events in aggregates:
        by_seq = {e.seq: e for e in events}
        for e in events:
            if e.event_id not in firsts or e.seq - 1 not in by_seq:
                continue
            predecessor = by_seq[e.seq - 1]
            if predecessor.event_id in released:
                continue
            assert predecessor.event_id in firsts, f"seq {e.seq} was published, seq {e.seq - 1} never"
            assert firsts.index(predecessor.event_id) < firsts.index(e.event_id), f"seq {e.seq} went first"


OUT = "OUT"
"""What `statuses` says of a row that left the table: its event is out (settled), or it was skipped."""


def statuses(world: World, *events: OutboxEvent) -> list[str]:
    """Each event's row's status now, or OUT once the row has left the table."""
    return [row["status"]["S"] if (row := world.stored(e)) is not None else OUT for e in events]


def key(e: OutboxEvent) -> RowKey:
    return RowKey(e.aggregate_key, e.seq)
