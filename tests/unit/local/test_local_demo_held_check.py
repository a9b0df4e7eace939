"""`outbox demo`'s "the second event is held" check asks what must hold, not how fast the machine is: the
second event of the stranded order never arrives before the first; both arriving, in order, because the
sweeper's grace already passed, is right too."""

from __future__ import annotations

from outbox_cli.demo import _arrived_first
from outbox_cli.watching import Delivery


def delivery(event_id: str, seq: int) -> Delivery:
    return Delivery(event_id, "OrderEvent", "order-1", seq, "2026-01-01T00:00:00.000Z", 0)


def test_the_second_event_arriving_without_or_before_the_first_is_ahead() -> None:
    # Given the stranded order's first event "placed" and second "confirmed"
    # When only the second arrived, or arrived before the first, Then it is ahead
    assert _arrived_first([delivery("confirmed", 2)], "confirmed", "placed")
    assert _arrived_first([delivery("confirmed", 2), delivery("placed", 1)], "confirmed", "placed")


def test_nothing_yet_or_both_in_order_is_not_ahead() -> None:
    # When nothing arrived, or the sweeper already delivered both, first then second, Then it is not ahead
    assert not _arrived_first([], "confirmed", "placed")
    assert not _arrived_first([delivery("placed", 1), delivery("confirmed", 2)], "confirmed", "placed")
