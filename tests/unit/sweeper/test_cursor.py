"""The sweeper's saved cursor as it is stored (outbox_sweeper.cursor): what survives a round trip, and what
starts a new pass."""

from __future__ import annotations

from datetime import timedelta

from outbox.model import RowKey
from outbox_sweeper.census import Figures
from outbox_sweeper.cursor import Cursor, decode, encode
from tests.support.clock import START


def test_a_cursor_round_trips_with_its_position_and_both_passes_figures() -> None:
    # Given a pass half done, with the last complete pass's figures
    cursor = Cursor(
        3,
        RowKey("Order#A", 7).item(),
        Figures(pending=10, oldest_pending=START - timedelta(hours=2), held_aggregates=1),
        Figures(pending=12, oldest_pending=START - timedelta(hours=3), oldest_unheld=START, failed=2),
    )

    # When it is stored and read back
    read = decode(encode(cursor), 3)

    # Then nothing is lost
    assert read == cursor


def test_a_cursor_saved_for_another_number_of_segments_starts_a_new_pass() -> None:
    # Given a cursor saved with two segments
    saved = encode(Cursor(2, RowKey("Order#A", 7).item(), Figures(pending=4), Figures(pending=9)))

    # When read with three
    read = decode(saved, 3)

    # Then the pass starts over (a position means nothing in another split), keeping the last figures
    assert read == Cursor(3, None, Figures(), Figures(pending=9))


def test_an_unreadable_cursor_starts_a_new_pass() -> None:
    # Given a cursor item someone changed by hand
    saved = encode(Cursor(1, None, Figures(pending=4)))
    saved["segments"] = {"S": "one"}

    # When read / Then a fresh cursor
    assert decode(saved, 1) == Cursor(1)
