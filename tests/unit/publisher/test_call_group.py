"""A call group keeps its aggregates and byte totals as it grows: whether one more event fits is what summing
over every member says, whatever the group holds."""

from __future__ import annotations

import random
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any, cast

import pytest

from outbox_publisher.messages import MAX_ENTRIES_PER_CALL
from outbox_publisher.planning import CallGroup, Planned
from outbox_publisher.ports import DestinationPort
from outbox_publisher.routing import Destination

PORTS = cast(
    "dict[Destination, DestinationPort]",
    {
        Destination.SNS: SimpleNamespace(max_batch_bytes=1_000),
        Destination.EVENTBRIDGE: SimpleNamespace(max_batch_bytes=700),
    },
)


def _planned(aggregate_key: str, sizes: dict[Destination, int]) -> Planned:
    event: Any = SimpleNamespace(aggregate_key=aggregate_key)
    return cast("Planned", SimpleNamespace(event=event, sizes=sizes))


def _fits_by_summing(group: Sequence[Planned], planned: Planned) -> bool:
    """The general rule, member by member."""
    if len(group) >= MAX_ENTRIES_PER_CALL:
        return False
    if any(member.event.aggregate_key == planned.event.aggregate_key for member in group):
        return False
    return all(
        sum(member.sizes.get(destination, 0) for member in group) + size <= PORTS[destination].max_batch_bytes
        for destination, size in planned.sizes.items()
    )


def _random_planned(draw: random.Random) -> Planned:
    destinations = draw.choice([[Destination.SNS], [Destination.EVENTBRIDGE], list(Destination)])
    return _planned(f"A#{draw.randrange(12)}", {d: draw.randrange(1, 260) for d in destinations})


@pytest.mark.parametrize("seed", range(200))
def test_whether_an_event_fits_is_what_summing_over_the_members_says(seed: int) -> None:
    draw = random.Random(seed)  # noqa: S311 - a test pattern, not a secret
    group, members = CallGroup(), list[Planned]()
    for _ in range(30):
        planned = _random_planned(draw)
        fits = _fits_by_summing(members, planned)
        assert group.fits(planned, PORTS) == fits
        assert group.holds(planned.event.aggregate_key) == any(
            member.event.aggregate_key == planned.event.aggregate_key for member in members
        )
        if fits:
            group.add(planned)
            members.append(planned)
        assert group.members == members
        assert bool(group) == bool(members)
