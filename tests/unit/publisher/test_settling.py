"""The verdict on an event from its deliveries (outbox_publisher.settling.judge): pure, so each rule alone."""

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
from outbox_publisher.settling import judge

SNS, EVENTBRIDGE = Destination.SNS, Destination.EVENTBRIDGE
OK = Delivery(True, 1)
THROTTLED = Delivery(False, 3, "Throttling", FailureKind.TRANSIENT)
REFUSED = Delivery(False, 1, "InvalidParameter", FailureKind.PERMANENT)
NOT_TRIED = Delivery(False, 0, "DeadlineExceeded", FailureKind.TRANSIENT)


def member(*, last_chance: bool = False) -> Planned:
    candidate = SimpleNamespace(last_chance=last_chance)
    return cast("Planned", SimpleNamespace(destinations=(SNS, EVENTBRIDGE), candidate=candidate))


def test_delivered_everywhere_is_published_even_after_a_stop() -> None:
    for stopped in (False, True):
        verdict = judge(member(), {SNS: OK, EVENTBRIDGE: Delivery(True, 2)}, stopped=stopped)
        assert (verdict.status, verdict.attempts, verdict.delivered_to) == (
            Status.PUBLISHED,
            2,
            (SNS, EVENTBRIDGE),
        )


def test_not_delivered_everywhere_after_a_stop_is_not_attempted() -> None:
    verdict = judge(member(), {SNS: OK}, stopped=True)
    assert (verdict.status, verdict.delivered_to) == (Status.NOT_ATTEMPTED, (SNS,))


@pytest.mark.parametrize("last_chance", [False, True])
def test_a_refusal_for_good_is_poison_whatever_else_failed(last_chance: bool) -> None:
    verdict = judge(member(last_chance=last_chance), {SNS: THROTTLED, EVENTBRIDGE: REFUSED}, stopped=False)
    assert verdict.status is Status.POISONED
    assert verdict.rejection is not None
    assert (verdict.rejection.reason, verdict.rejection.code) == (
        PoisonReason.REJECTED,
        "eventbridge:InvalidParameter",
    )
    assert verdict.attempts == 3


def test_a_tried_last_chance_that_failed_transiently_gives_up() -> None:
    verdict = judge(member(last_chance=True), {SNS: OK, EVENTBRIDGE: THROTTLED}, stopped=False)
    assert verdict.rejection is not None
    assert (verdict.status, verdict.rejection.reason) == (Status.POISONED, PoisonReason.GAVE_UP)
    assert verdict.delivered_to == (SNS,)


@pytest.mark.parametrize("last_chance", [False, True])
def test_a_transient_failure_stops_the_run_tried_only_if_an_attempt_was_made(last_chance: bool) -> None:
    failed = judge(member(), {SNS: THROTTLED}, stopped=False)
    assert (failed.status, failed.failed_on, failed.code, failed.tried) == (
        Status.FAILED,
        SNS,
        "sns:Throttling",
        True,
    )
    untried = judge(member(last_chance=last_chance), {SNS: NOT_TRIED}, stopped=False)
    assert (untried.status, untried.rejection, untried.tried) == (Status.FAILED, None, False)
