"""The order gate inside the engine: each aggregate in `seq` order, none before its predecessor is out."""

from __future__ import annotations

import pytest

from outbox.errors import ThrottledError
from outbox.model import RowKey
from outbox_publisher.candidates import Candidate
from outbox_publisher.gate import HoldReason, processing_order
from outbox_publisher.predecessors import PredecessorState
from outbox_publisher.report import Status
from outbox_publisher.routing import PoisonPolicy, Route, Router
from tests.support.events import event
from tests.unit.publisher.fakes import SNS_ONLY, FakeDeadline, candidates, harness, ids


def test_a_healthy_batch_reads_nothing_from_the_table() -> None:
    # Given first events and their successors all in one batch
    a1, b1, a2, b2 = event("A", 1), event("B", 1), event("A", 2), event("B", 2)
    h = harness(destinations=SNS_ONLY)

    # When they are published
    report = h.engine.publish(candidates(a1, b1, a2, b2))

    # Then no predecessor was read: each one is seq 1 or published earlier in the run
    assert h.predecessors.reads == []
    assert report.gate_reads == 0
    assert h.sns.accepted == ids(a1, b1, a2, b2)


def test_a_reversed_pair_in_one_batch_is_published_in_seq_order() -> None:
    # Given A#2 found before A#1 (two records of one transaction, reversed by the stream), with B#1 between
    a1, a2, b1 = event("A", 1), event("A", 2), event("B", 1)
    h = harness(destinations=SNS_ONLY)

    # When they are published in the order found
    report = h.engine.publish(candidates(a2, b1, a1))

    # Then A#1 took A#2's place: A#1 goes out before A#2, and never in the same call
    assert h.sns.calls == [ids(a1, b1), ids(a2)]
    # and the outcomes still answer the input positions
    assert [outcome.candidate.event for outcome in report.outcomes] == [a2, b1, a1]
    assert [outcome.status for outcome in report.outcomes] == [Status.PUBLISHED] * 3


def test_processing_order_keeps_each_aggregates_places() -> None:
    # Given A#3, B#1, A#1, C#1, A#2 as found
    found = candidates(event("A", 3), event("B", 1), event("A", 1), event("C", 1), event("A", 2))

    # When the gate orders them
    order = processing_order(found)

    # Then A's places (0, 2, 4) hold A#1, A#2, A#3; B and C stay where they were
    assert order == [2, 1, 4, 3, 0]


def test_predecessors_outside_the_run_are_read_in_one_call_for_many_aggregates() -> None:
    # Given the second event of twenty aggregates whose first events were published earlier
    seconds = [event(f"o-{n}", 2) for n in range(20)]
    h = harness(destinations=SNS_ONLY)

    # When they are published
    report = h.engine.publish(candidates(*seconds))

    # Then one read asked for all twenty predecessors, and everything went out
    assert h.predecessors.reads == [sorted(RowKey(e.aggregate_key, 1) for e in seconds)]
    assert report.gate_reads == 1
    assert report.count(Status.PUBLISHED) == 20


@pytest.mark.parametrize(
    ("state", "reason"),
    [
        (PredecessorState.PENDING, HoldReason.PREDECESSOR_PENDING),
        (PredecessorState.FAILED, HoldReason.PREDECESSOR_FAILED),
    ],
)
def test_an_event_whose_predecessor_is_not_out_is_held_with_its_successors_while_others_go(
    state: PredecessorState, reason: HoldReason
) -> None:
    # Given A#5 and A#6 whose predecessor A#4 is not out, and B#1
    a5, a6, b1 = event("A", 5), event("A", 6), event("B", 1)
    h = harness(destinations=SNS_ONLY)
    h.predecessors.known[RowKey(a5.aggregate_key, 4)] = state

    # When they are published
    report = h.engine.publish(candidates(a5, a6, b1))

    # Then A#5 is held for that reason and A#6 behind it; neither is sent nor settled
    assert [(o.status, o.code) for o in report.outcomes[:2]] == [
        (Status.HELD, reason.value),
        (Status.HELD, HoldReason.PREDECESSOR_HELD.value),
    ]
    assert h.sns.accepted == ids(b1)
    assert [update.key for update in h.updater.updates] == [RowKey(b1.aggregate_key, 1)]
    # and a hold is done for the run: nothing is handed back, the sweeper takes it from here
    assert report.retry == []
    assert reason.needs_operator is (state is not PredecessorState.PENDING)


def test_an_event_whose_predecessor_is_out_is_published() -> None:
    # Given A#5, whose predecessor is no longer in the table (its event is out)
    a5 = event("A", 5)
    h = harness(destinations=SNS_ONLY)
    h.predecessors.known[RowKey(a5.aggregate_key, 4)] = PredecessorState.OUT

    # When it is published
    report = h.engine.publish(candidates(a5))

    # Then it went out
    assert report.outcomes[0].status is Status.PUBLISHED
    assert h.sns.accepted == ids(a5)


def test_a_predecessor_the_caller_read_needs_no_read() -> None:
    # Given B#3 whose predecessor the caller already knows is out (the sweeper's scan saw none below it)
    b3 = event("B", 3)
    known = Candidate.from_row("2", b3.to_item()).but(predecessor=PredecessorState.OUT)
    h = harness(destinations=SNS_ONLY)

    # When it is published
    report = h.engine.publish([known])

    # Then it went out without a read
    assert h.predecessors.reads == []
    assert h.sns.accepted == ids(b3)
    assert report.count(Status.PUBLISHED) == 1


def test_a_predecessor_this_engine_settled_needs_no_read() -> None:
    # Given A#1 published and settled by this engine in one run
    a1, a2 = event("A", 1), event("A", 2)
    h = harness(destinations=SNS_ONLY)
    h.engine.publish(candidates(a1))

    # When A#2 comes in a later run (its predecessor outside the run)
    report = h.engine.publish(candidates(a2))

    # Then the engine knew A#1 is out: nothing was read, A#2 went out
    assert h.predecessors.reads == []
    assert report.gate_reads == 0
    assert h.sns.accepted == ids(a1, a2)


def test_a_predecessor_whose_settle_dynamodb_refused_is_read_again() -> None:
    # Given A#1 published, but its row not settled (its condition no longer held: moved on meanwhile)
    a1, a2 = event("A", 1), event("A", 2)
    h = harness(destinations=SNS_ONLY)
    h.updater.refuse.add(RowKey(a1.aggregate_key, 1))
    h.engine.publish(candidates(a1))
    h.predecessors.known[RowKey(a1.aggregate_key, 1)] = PredecessorState.PENDING

    # When A#2 comes in a later run
    report = h.engine.publish(candidates(a2))

    # Then the engine did not take A#1 for out: it read it, and held A#2 behind it
    assert h.predecessors.reads == [[RowKey(a1.aggregate_key, 1)]]
    assert report.outcomes[0].status is Status.HELD


def test_a_failed_read_stops_at_the_first_event_that_needs_it() -> None:
    # Given B#1 (needs nothing), then A#2 (needs A#1, outside the run), then C#1; the read is throttled
    b1, a2, c1 = event("B", 1), event("A", 2), event("C", 1)
    h = harness(destinations=SNS_ONLY)
    h.predecessors.error = ThrottledError("BatchGetItem left keys unprocessed")

    # When they are published
    report = h.engine.publish(candidates(b1, a2, c1))

    # Then B#1 went out, and the run stopped at A#2: it and everything after it are handed back
    assert h.sns.accepted == ids(b1)
    assert [(o.status, o.code) for o in report.outcomes] == [
        (Status.PUBLISHED, None),
        (Status.NOT_ATTEMPTED, "GateReadFailed"),
        (Status.NOT_ATTEMPTED, None),
    ]
    assert report.first_not_done == 1


def test_no_read_starts_without_the_safety_margin_left() -> None:
    # Given A#2 needing a read and an invocation with 1 s left
    a2 = event("A", 2)
    h = harness(destinations=SNS_ONLY)

    # When it is published
    report = h.engine.publish(candidates(a2), FakeDeadline(1_000))

    # Then nothing was read or sent, and A#2 is handed back
    assert h.predecessors.reads == []
    assert h.sns.calls == []
    assert report.outcomes[0].status is Status.NOT_ATTEMPTED


def test_a_poison_event_waits_for_its_predecessor_like_any_event() -> None:
    # Given A#2 unreadable (poison) whose predecessor A#1 is still PENDING, and A#3, on a route that
    # continues past poison
    router = Router((Route(SNS_ONLY, aggregate_type="Order", on_poison=PoisonPolicy.CONTINUE),), SNS_ONLY)
    h = harness(router=router, destinations=SNS_ONLY)
    a2, a3 = event("A", 2), event("A", 3)
    h.predecessors.known[RowKey(a2.aggregate_key, 1)] = PredecessorState.PENDING
    unreadable = Candidate.from_row("1", a2.to_item() | {"payload": {"S": "not json"}})

    # When they are published
    report = h.engine.publish([unreadable, *candidates(a3)])

    # Then A#2 is held, not poisoned (poisoning it would let A#3 go), and A#3 behind it
    assert [(o.status, o.code) for o in report.outcomes] == [
        (Status.HELD, HoldReason.PREDECESSOR_PENDING.value),
        (Status.HELD, HoldReason.PREDECESSOR_HELD.value),
    ]
    assert h.poison.messages == []
    assert h.sns.calls == []
