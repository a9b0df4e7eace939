"""How far calls reach ahead (the engine's waves and `lookahead`), and what a failure then leaves behind."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from outbox.errors import ThrottledError
from outbox_publisher.engine import PublishingEngine
from outbox_publisher.messages import Message
from outbox_publisher.ports import EntryResult
from outbox_publisher.report import Status
from outbox_publisher.routing import Router
from tests.support.events import event
from tests.unit.publisher.fakes import (
    SNS_ONLY,
    FakeDeadline,
    FakePoisonQueue,
    FakePredecessors,
    FakeUpdater,
    candidates,
    harness,
    ids,
)


def test_waves_pair_the_aggregates_that_the_contiguous_cut_keeps_apart() -> None:
    # Given A#1, A#2, B#1, B#2 in stream order
    a1, a2, b1, b2 = event("A", 1), event("A", 2), event("B", 1), event("B", 2)
    waves, contiguous = harness(destinations=SNS_ONLY), harness(destinations=SNS_ONLY, lookahead=0)

    # When the default engine and one with lookahead 0 publish them
    waves.engine.publish(candidates(a1, a2, b1, b2))
    contiguous.engine.publish(candidates(a1, a2, b1, b2))

    # Then waves need two calls, the contiguous cut three (each call ends at a repeated aggregate)
    assert waves.sns.calls == [ids(a1, b1), ids(a2, b2)]
    assert contiguous.sns.calls == [ids(a1), ids(a2, b1), ids(b2)]


def test_a_window_lets_a_wave_reach_only_that_far_past_the_first_unsettled_event() -> None:
    # Given A#1, A#2, A#3 then B#1: B#1 is three places past A#1
    a1, a2, a3, b1 = event("A", 1), event("A", 2), event("A", 3), event("B", 1)
    narrow, wide = harness(destinations=SNS_ONLY, lookahead=2), harness(destinations=SNS_ONLY, lookahead=4)

    # When engines with windows of 2 and 4 publish them
    narrow.engine.publish(candidates(a1, a2, a3, b1))
    wide.engine.publish(candidates(a1, a2, a3, b1))

    # Then the window of 4 takes B#1 with A#1; the window of 2 only once A#3 is within two places of the
    # first unsettled event
    assert wide.sns.calls == [ids(a1, b1), ids(a2), ids(a3)]
    assert narrow.sns.calls == [ids(a1), ids(a2), ids(a3, b1)]


@pytest.mark.parametrize(("lookahead", "sent_before_the_stop"), [(4, True), (0, False)])
def test_a_stop_hands_back_what_waves_had_already_published_further_on(
    lookahead: int, sent_before_the_stop: bool
) -> None:
    # Given A#1, A#2, B#1, and an invocation whose time runs out after the first call
    a1, a2, b1 = event("A", 1), event("A", 2), event("B", 1)
    h = harness(destinations=SNS_ONLY, lookahead=lookahead)
    deadline = FakeDeadline(remaining=60_000)
    sns_publish = h.sns.publish

    def last_call(messages: Sequence[Message]) -> list[EntryResult]:
        deadline.remaining = 1_000
        return sns_publish(messages)

    h.sns.publish = last_call  # type: ignore[method-assign]

    # When they are published
    report = h.engine.publish(candidates(a1, a2, b1), deadline)

    # Then the run stops at A#2 and nothing of A goes after it; B#1 went out only if a wave reached it, and
    # then it is handed back all the same (in stream order it comes after the stop)
    assert report.stopped_at == 1
    assert [o.status for o in report.outcomes][:2] == [Status.PUBLISHED, Status.NOT_ATTEMPTED]
    assert (b1.event_id in h.sns.accepted) is sent_before_the_stop
    assert a2.event_id not in h.sns.accepted
    assert report.outcomes[2].status is (Status.PUBLISHED if sent_before_the_stop else Status.NOT_ATTEMPTED)
    assert [o.candidate.event for o in report.retry] == [a2, b1]


def test_a_negative_lookahead_is_refused() -> None:
    # When an engine is built with a negative window, Then it refuses
    with pytest.raises(ValueError, match="lookahead"):
        PublishingEngine(
            destinations={},
            router=Router.everything_to(()),
            poison_queue=FakePoisonQueue(),
            updater=FakeUpdater(),
            predecessors=FakePredecessors(),
            lookahead=-1,
        )


def test_a_stop_late_in_the_batch_does_not_hold_back_the_events_before_it() -> None:
    # Given five events of a hot aggregate H, then X#2 (its predecessor must be read, and the read fails),
    # then Y#1: the first wave reaches X#2 long before H#2..H#5
    hot = [event("H", seq) for seq in range(1, 6)]
    x2, y1 = event("X", 2), event("Y", 1)
    h = harness(destinations=SNS_ONLY)
    h.predecessors.error = ThrottledError("BatchGetItem left keys unprocessed")

    # When they are published
    report = h.engine.publish(candidates(*hot, x2, y1))

    # Then the run goes on with every event before X#2 (in order, one call each), none after it: the stream
    # hands back from X#2 and no event before it waits for a redelivery
    assert [o.status for o in report.outcomes[:5]] == [Status.PUBLISHED] * 5
    assert report.stopped_at == 5
    assert (report.outcomes[5].status, report.outcomes[5].code) == (Status.NOT_ATTEMPTED, "GateReadFailed")
    assert [o.candidate.event.event_id for o in report.retry if o.candidate.event] == [
        x2.event_id,
        y1.event_id,
    ]
    hot_ids = [e.event_id for e in hot]
    assert [entry for call in h.sns.calls for entry in call if entry in hot_ids] == hot_ids
