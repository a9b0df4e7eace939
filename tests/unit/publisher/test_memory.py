"""What the publisher remembers settling and parking (outbox_publisher.memory): bounded, and by event."""

from __future__ import annotations

import pytest

from outbox.model import RowKey
from outbox_publisher.memory import RowMemory


def test_a_settled_row_is_remembered_by_its_key_and_event() -> None:
    # Given a row settled with its event
    rows = RowMemory()
    rows.settled_row(RowKey("Order#A", 1), "e-1")

    # Then its key is known settled, and so is that event, but not another event in the same slot
    assert RowKey("Order#A", 1) in rows
    assert rows.settled(RowKey("Order#A", 1), "e-1")
    assert not rows.settled(RowKey("Order#A", 1), "e-2")
    assert not rows.settled(RowKey("Order#A", 1), None)
    assert RowKey("Order#A", 2) not in rows


def test_the_oldest_rows_are_forgotten_first() -> None:
    # Given room for two rows, and three settled, the first one settled again in between
    rows = RowMemory(capacity=2)
    rows.settled_row(RowKey("Order#A", 1), "e-1")
    rows.settled_row(RowKey("Order#B", 1), "e-2")
    rows.settled_row(RowKey("Order#A", 1), "e-1")
    rows.settled_row(RowKey("Order#C", 1), "e-3")

    # Then B (the least recent) was forgotten
    assert RowKey("Order#B", 1) not in rows
    assert RowKey("Order#A", 1) in rows
    assert RowKey("Order#C", 1) in rows


def test_no_room_remembers_nothing_and_less_is_refused() -> None:
    rows = RowMemory(capacity=0)
    rows.settled_row(RowKey("Order#A", 1), "e-1")
    assert RowKey("Order#A", 1) not in rows
    with pytest.raises(ValueError, match="capacity"):
        RowMemory(capacity=-1)


def test_a_parked_row_is_remembered_with_the_destinations_that_took_its_event() -> None:
    # Given a row parked (SNS took its event), and another settled after it was parked
    rows = RowMemory()
    rows.parked_row(RowKey("Order#A", 1), "e-1", frozenset({"sns"}))
    rows.parked_row(RowKey("Order#B", 1), "e-2", frozenset({"sns"}))
    rows.settled_row(RowKey("Order#B", 1), "e-2")

    # Then A's event is known taken by SNS (not another event in its slot), and A is not settled; B is
    assert rows.delivered_to(RowKey("Order#A", 1), "e-1") == frozenset({"sns"})
    assert rows.delivered_to(RowKey("Order#A", 1), "e-9") == frozenset()
    assert RowKey("Order#A", 1) not in rows
    assert not rows.settled(RowKey("Order#A", 1), "e-1")
    assert RowKey("Order#B", 1) in rows
    assert rows.delivered_to(RowKey("Order#B", 1), "e-2") == frozenset()
