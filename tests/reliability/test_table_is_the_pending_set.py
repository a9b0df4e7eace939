"""The two fault kinds issue 29 added to the random schedules, each played once by hand: rows another writer
saved with the contract's attributes only, whose stream records never reach the mapping (the sweeper must find
them in the table), and a long outage of one destination (the other must get each event once)."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.reliability.scenarios import drain_and_check, place_orders, statuses
from tests.reliability.schedules import Step, arm, outage_figures
from tests.reliability.system import PUBLISHER, SWEEPER, running_system
from tests.reliability.wire import EVENTBRIDGE, SNS

CONTRACT = {
    "aggregate_key",
    "seq",
    "event_id",
    "event_type",
    "schema_version",
    "aggregate_type",
    "aggregate_id",
    "payload",
    "occurred_at",
    "status",
}
"""The attributes a row another writer saves needs (docs/contracts.md, "Outbox row"): nothing else."""


def test_foreign_rows_whose_stream_records_are_discarded_are_swept_and_published_in_order() -> None:
    with running_system(seed=30) as system:
        # Given another writer's aggregate of 3 rows none of whose stream records reach the mapping, and one
        # whose first record only is dropped (its seq 2 and 3 reach the publisher, behind a row it never saw)
        unseen = system.write_foreign_rows("all-dropped", poison_first=False, count=3, discard=lambda _: True)
        first_unseen = system.write_foreign_rows(
            "first-dropped", poison_first=False, count=3, discard=lambda seq: seq == 1
        )
        # Each with the contract's attributes only: no index attribute of any kind
        assert {frozenset(row) for row in system.outbox_rows()} == {frozenset(CONTRACT)}
        # When the system runs and drains
        drain_and_check(system)
        # Then all 6 are out, on both destinations, in seq order (the checker's verdict above), each once
        assert statuses(system) == {"OUT": 6}
        sent = Counter((p.event_id, p.destination) for p in system.wire.published)
        assert sent == {(event_id, d): 1 for event_id in [*unseen, *first_unseen] for d in (SNS, EVENTBRIDGE)}
        # And the sweeper published every row the mapping never saw, and the ones it saw behind the unseen
        # seq 1 after it (the order is the verdict's)
        by = {p.event_id: p.function for p in system.wire.published}
        assert {by[event_id] for event_id in [*unseen, first_unseen[0]]} == {SWEEPER}
        assert {by[event_id] for event_id in first_unseen[1:]} == {SWEEPER}
        assert system.unstreamed == {*unseen, first_unseen[0]}


@pytest.mark.parametrize(
    ("kind", "down", "up"), [("sns_outage", SNS, EVENTBRIDGE), ("eventbridge_outage", EVENTBRIDGE, SNS)]
)
def test_a_60_s_outage_of_one_destination_sends_each_event_to_the_other_once(
    kind: str, down: str, up: str
) -> None:
    with running_system(seed=31) as system:
        # Given one destination refusing every call of every function for 60 s of virtual time
        arm(system, Step("fault", kind=kind, seconds=60.0))
        # When 5 orders are placed, confirmed and cancelled (15 events) meanwhile, and the system drains
        place_orders(system, 5)
        system.run_for(10)
        drain_and_check(system)
        # Then all 15 are out; the destination that stayed up got each event exactly once, from the publisher
        # at once, and the other got each once too, from the sweeper after the outage
        assert statuses(system) == {"OUT": 15}
        assert system.wire.injected[kind] > 0
        got = Counter((p.destination, p.function) for p in system.wire.published)
        assert got[(up, PUBLISHER)] > 0
        assert got[(down, SWEEPER)] > 0
        for destination in (up, down):
            copies = Counter(p.event_id for p in system.wire.published if p.destination == destination)
            assert (len(copies), set(copies.values())) == (15, {1})
        # And the outage's figures say so: it touched the 5 OrderPlaced events (each order's later events
        # waited behind its first, sent nowhere while it was down), and cost the healthy destination no copy
        (figures,) = outage_figures(system, system.verdict())
        assert (figures["destination"], figures["healthy"], figures["seconds"]) == (down, up, 60.0)
        assert figures["took_effect"]
        assert (figures["events"], figures["extra_copies"], figures["most_per_event"]) == (5, 0, 0)
