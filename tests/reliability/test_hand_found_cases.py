"""The three cases found by hand on what had landed (issue 15), each reproduced with the fault API and
checked after the drain. Each also asserts the path it takes on the current model (issue 29): a destination's
failure is not handed back to the stream any more (the row stays PENDING, recording the destinations that
took the event), and the sweeper finishes the job."""

from __future__ import annotations

from collections import Counter

from tests.reliability.invariants import CAUSE_ROW_UPDATE
from tests.reliability.scenarios import drain_and_check, place_orders, statuses
from tests.reliability.system import PUBLISHER, SWEEPER, System, running_system
from tests.reliability.wire import EVENTBRIDGE, SNS, CallFault


def test_sns_throttled_for_20_s_left_31_of_60_events_undelivered_for_good() -> None:
    with running_system(seed=1) as system:
        # Given SNS PublishBatch throttled for 20 s (virtual), from before the first event
        system.wire.call_faults.append(
            CallFault(
                "sns_throttled",
                SNS,
                frozenset({"PublishBatch"}),
                "Throttling",
                400,
                until=system.clock.seconds() + 20,
            )
        )
        # When 20 orders are placed, confirmed and cancelled (60 events) while it lasts
        place_orders(system, 20)
        system.run_for(20)
        assert system.wire.injected["sns_throttled"] > 0
        # Then, drained, all 60 are out, on both destinations, in order, each applied once
        drain_and_check(system)
        assert statuses(system) == {"OUT": 60}
        # And the path taken: the publisher handed nothing back (the mapping discarded nothing); EventBridge,
        # up all along, got each event once; what the publisher got onto the bus alone, the sweeper sent to
        # SNS only
        assert system.mapping.stats().discarded_records == 0
        on_the_bus = Counter(p.event_id for p in system.wire.published if p.destination == EVENTBRIDGE)
        assert len(on_the_bus) == 60
        assert set(on_the_bus.values()) == {1}
        bus_only = {p.event_id for p in system.wire.published if p.function == PUBLISHER} - {
            p.event_id for p in system.wire.published if p.destination == SNS and p.function == PUBLISHER
        }
        assert bus_only
        assert bus_only <= {
            p.event_id for p in system.wire.published if (p.function, p.destination) == (SWEEPER, SNS)
        }


def test_the_poison_queue_down_for_6_s_left_12_of_15() -> None:
    with running_system(seed=2) as system:
        # Given the poison queue refusing the functions' sends for 6 s
        system.wire.call_faults.append(
            CallFault(
                "poison_queue_down",
                "sqs",
                frozenset({"SendMessage"}),
                "ServiceUnavailable",
                503,
                frozenset({PUBLISHER, SWEEPER}),
                until=system.clock.seconds() + 6,
            )
        )
        # When 12 order events and 3 poison rows from another writer (15 rows) arrive meanwhile
        place_orders(system, 2)
        poison = [system.write_foreign_rows(f"inv-{n}", poison_first=True, count=1)[0] for n in range(3)]
        place_orders(system, 2, prefix="after-")
        system.run_for(6)
        assert system.wire.injected["poison_queue_down"] > 0
        # Then, drained, the 12 are out, the 3 poison rows FAILED with their reason and parked
        drain_and_check(system)
        assert statuses(system) == {"OUT": 12, "FAILED": 3}
        assert set(system.wire.poison_sent) >= set(poison)
        # And the path taken: the publisher left the poison rows PENDING without handing the batch back (the
        # mapping discarded nothing), and the sweeper sent them to the poison queue
        assert system.mapping.stats().discarded_records == 0
        assert system.wire.poisoned_by == {SWEEPER: 3}


def test_a_dynamodb_500_during_marking_left_30_published_rows_pending_forever() -> None:
    with running_system(seed=3) as system:
        # Given 30 events, and the publisher's row updates (settles: DeleteItem; parks: UpdateItem) answering
        # 500
        system.wire.call_faults.append(
            CallFault(
                "dynamodb_row_updates",
                "dynamodb",
                frozenset({"DeleteItem", "UpdateItem"}),
                "InternalServerError",
                500,
                frozenset({PUBLISHER}),
                until=system.clock.seconds() + 30,
            )
        )
        place_orders(system, 10)
        # When the publisher publishes them all and cannot settle one
        system.run_for(5)
        assert len({p.event_id for p in system.wire.published}) == 30
        assert statuses(system) == {"PENDING": 30}
        # Then, drained, the sweeper has reconciled every row: all 30 out, the re-publications counted
        drain_and_check(system)
        assert statuses(system) == {"OUT": 30}
        verdict = system.verdict()
        assert set(verdict.duplicates) == {CAUSE_ROW_UPDATE}
        # And it was the sweeper that re-published them and settled them: its settles returned, and each of
        # the 30 went out again from it
        assert len(swept_events(system)) == 30
        assert system.wire.calls[(SWEEPER, "dynamodb", "DeleteItem")] == 30
        assert system.wire.calls[(PUBLISHER, "dynamodb", "DeleteItem")] == 0


def swept_events(system: System) -> set[str]:
    """The events the sweeper published (on any destination)."""
    return {p.event_id for p in system.wire.published if p.function == SWEEPER}
