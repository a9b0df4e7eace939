"""The verdict on an event from its deliveries (outbox_publisher.verdicts.judge): pure, so each rule alone."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

import pytest

from outbox_publisher.delivery import Delivery
from outbox_publisher.errors import FailureKind
from outbox_publisher.planning import Planned
from outbox_publisher.poison import PoisonReason
from outbox_publisher.report import Status
from outbox_publisher.routing import Destination
from outbox_publisher.verdicts import judge

SNS, EVENTBRIDGE = Destination.SNS, Destination.EVENTBRIDGE
OK = Delivery(True, 1)
THROTTLED = Delivery(False, 3, "Throttling", FailureKind.TRANSIENT)
BLOCKED = Delivery(False, 1, "AuthorizationError", FailureKind.BLOCKED)
REFUSED = Delivery(False, 1, "InvalidParameter", FailureKind.PERMANENT)
NOT_TRIED = Delivery(False, 0, "DeadlineExceeded", FailureKind.TRANSIENT)


def member(
    *, last_chance: bool = False, destinations: tuple[Destination, ...] = (SNS, EVENTBRIDGE)
) -> Planned:
    candidate = SimpleNamespace(last_chance=last_chance)
    return cast("Planned", SimpleNamespace(destinations=destinations, candidate=candidate))


def test_delivered_to_every_destination_it_still_needed_is_published() -> None:
    # Given an event that needed both destinations, and one that needed only the bus (SNS took it earlier)
    # When both took what they needed
    both = judge(member(), {SNS: OK, EVENTBRIDGE: Delivery(True, 2)})
    bus_only = judge(member(destinations=(EVENTBRIDGE,)), {EVENTBRIDGE: OK})

    # Then both are published, with the most attempts any destination took
    assert (both.status, both.attempts, both.delivered_to) == (Status.PUBLISHED, 2, (SNS, EVENTBRIDGE))
    assert (bus_only.status, bus_only.delivered_to) == (Status.PUBLISHED, (EVENTBRIDGE,))


@pytest.mark.parametrize("last_chance", [False, True])
def test_a_refusal_for_good_is_poison_whatever_else_failed(last_chance: bool) -> None:
    verdict = judge(member(last_chance=last_chance), {SNS: THROTTLED, EVENTBRIDGE: REFUSED})
    assert verdict.status is Status.POISONED
    assert verdict.rejection is not None
    assert (verdict.rejection.reason, verdict.rejection.code) == (
        PoisonReason.REJECTED,
        "eventbridge:InvalidParameter",
    )
    assert verdict.attempts == 3


def test_a_tried_last_chance_that_failed_transiently_gives_up_keeping_what_took_it() -> None:
    verdict = judge(member(last_chance=True), {SNS: OK, EVENTBRIDGE: THROTTLED})
    assert verdict.rejection is not None
    assert (verdict.status, verdict.rejection.reason) == (Status.POISONED, PoisonReason.GAVE_UP)
    assert verdict.delivered_to == (SNS,)


@pytest.mark.parametrize("failure", [THROTTLED, BLOCKED], ids=["transient", "blocked"])
def test_a_destination_that_did_not_take_it_leaves_it_undelivered_with_what_took_it(
    failure: Delivery,
) -> None:
    # Given SNS took the event and EventBridge did not (throttled past the retries, or refusing all calls)
    verdict = judge(member(), {SNS: OK, EVENTBRIDGE: failure})

    # Then it is undelivered (left PENDING for the sweeper), naming the destination that did not take it
    assert (verdict.status, verdict.delivered_to, verdict.rejection) == (Status.UNDELIVERED, (SNS,), None)
    assert verdict.code == f"eventbridge:{failure.code}"


def test_a_transient_failure_everywhere_is_undelivered_with_nothing_delivered() -> None:
    verdict = judge(member(), {SNS: THROTTLED, EVENTBRIDGE: THROTTLED})
    assert (verdict.status, verdict.delivered_to, verdict.code) == (Status.UNDELIVERED, (), "sns:Throttling")
    assert verdict.tried


@pytest.mark.parametrize("last_chance", [False, True])
def test_an_event_tried_nowhere_is_not_attempted_never_given_up(last_chance: bool) -> None:
    # Given the run had no time to send the event anywhere
    verdict = judge(member(last_chance=last_chance), {SNS: NOT_TRIED, EVENTBRIDGE: NOT_TRIED})

    # Then nothing failed: it is not attempted (handed back), not poison, whatever its last chance
    assert (verdict.status, verdict.rejection, verdict.attempts) == (Status.NOT_ATTEMPTED, None, 0)


def test_an_event_one_destination_took_before_time_ran_out_is_undelivered_not_handed_back() -> None:
    # Given SNS took it and the run had no time left to try EventBridge
    verdict = judge(member(last_chance=True), {SNS: OK, EVENTBRIDGE: NOT_TRIED})

    # Then it is undelivered (its row will record SNS), not given up, and not tried: nothing failed
    assert (verdict.status, verdict.delivered_to, verdict.rejection) == (Status.UNDELIVERED, (SNS,), None)
    assert not verdict.tried


@pytest.mark.parametrize("last_chance", [False, True])
def test_an_event_not_sent_to_a_destination_down_for_the_run_is_undelivered_untried(
    last_chance: bool,
) -> None:
    # Given an event EventBridge took, not sent to SNS (down since an earlier call of the run)
    down = Delivery(False, 0, "InternalError", FailureKind.TRANSIENT, destination_down=True)

    # When it is judged, with or without SNS tried for any other destination
    verdict = judge(member(last_chance=last_chance), {SNS: down, EVENTBRIDGE: OK})
    alone = judge(member(last_chance=last_chance, destinations=(SNS,)), {SNS: down})

    # Then it is left PENDING, not tried, never given up, and never mistaken for a run out of time
    assert (verdict.status, verdict.tried, verdict.delivered_to) == (
        Status.UNDELIVERED,
        False,
        (EVENTBRIDGE,),
    )
    assert (alone.status, alone.tried) == (Status.UNDELIVERED, False)
