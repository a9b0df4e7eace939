"""The demo's order check: per aggregate, first deliveries must be 1, 2, 3... in that order."""

from __future__ import annotations

from outbox_cli.watching import Delivery, QueueWatcher


def watcher_with(*deliveries: tuple[str, int]) -> QueueWatcher:
    watcher = QueueWatcher(sqs=None, url="", label="test", unwrap=lambda body: body)
    watcher.deliveries = [
        Delivery(f"{aggregate}-{seq}", "E", aggregate, seq, "2026-11-29T12:00:00.000Z", 0)
        for aggregate, seq in deliveries
    ]
    return watcher


def test_in_order_with_duplicates_and_interleaving_is_in_order() -> None:
    # Given A 1, B 1, A 2, A 1 again (a duplicate), B 2
    watcher = watcher_with(("A", 1), ("B", 1), ("A", 2), ("A", 1), ("B", 2))

    # Then nothing is out of order
    assert watcher.out_of_order() == []


def test_an_event_before_its_predecessor_or_without_it_is_out_of_order() -> None:
    # Given A's 2 before its 1, and B's 2 with no 1 at all
    watcher = watcher_with(("A", 2), ("A", 1), ("B", 2))

    # Then both aggregates are reported
    assert watcher.out_of_order() == ["A", "B"]
