"""The census of a scan (outbox_sweeper.census): counts, the oldest pending row, held aggregates and due rows,
from rows in scan order. Pure."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from outbox.model import RowKey
from outbox_sweeper.census import Census, DueRow, Figures, HeldAggregate
from tests.support.clock import START
from tests.support.events import event

GRACE = timedelta(seconds=60)
OLD = START - timedelta(minutes=5)
YOUNG = START - timedelta(seconds=10)


def row(aggregate: str, seq: int, *, occurred: Any = OLD, **attributes: Any) -> dict[str, Any]:
    """A row as the scan returns it (its key and the attributes the census reads)."""
    item = event(aggregate, seq).to_item()
    item["occurred_at"] = {"S": occurred.strftime("%Y-%m-%dT%H:%M:%S.000Z")} if occurred else {"S": "?"}
    for name, value in attributes.items():
        item[name] = value
    return item


def census(*items: dict[str, Any], limit: int = 500, resumed_after: RowKey | None = None) -> Census:
    taken = Census(now=START, grace=GRACE, due_limit=limit, resumed_after=resumed_after)
    for item in items:
        taken.add(item)
    return taken


def key(aggregate: str, seq: int) -> RowKey:
    return RowKey(f"Order#{aggregate}", seq)


def due(aggregate: str, seq: int, predecessor_out: bool, occurred: Any = OLD) -> DueRow:
    return DueRow(key(aggregate, seq), predecessor_out, occurred)


def test_each_aggregate_is_due_from_its_lowest_row_whose_predecessor_is_known_out() -> None:
    # Given two aggregates' pending rows, old enough, in scan order
    taken = census(row("A", 3), row("A", 4), row("B", 1))

    # Then all three are due; each aggregate's first row is known to have its predecessor out (no row below
    # it in the table), the next one's predecessor is in the run
    assert taken.due == [due("A", 3, True), due("A", 4, False), due("B", 1, True)]
    assert taken.figures() == Figures(pending=3, oldest_pending=OLD, oldest_unheld=OLD)


def test_a_failed_row_holds_its_aggregate_once_and_is_counted() -> None:
    # Given A#2 FAILED (indexed) with A#3 and A#4 behind it, B#1 FAILED alone, and C#1 pending
    failed = {
        "status": {"S": "FAILED"},
        "failed_shard": {"N": "3"},
        "failed_at": {"S": "2026-11-29T11:00:00.000Z"},
    }
    taken = census(row("A", 2, **failed), row("A", 3), row("A", 4), row("B", 1, **failed), row("C", 1))

    # Then A is held once (waiting seq 3 behind seq 2), nothing of A is due, B holds nothing, C is due
    assert taken.held == [HeldAggregate("Order#A", "3", "2")]
    assert taken.due == [due("C", 1, True)]
    figures = taken.figures()
    assert (figures.failed, figures.held_aggregates, figures.pending) == (2, 1, 3)
    assert figures.unindexed_failed == 0


def test_rows_that_let_their_successors_go_are_out() -> None:
    # Given A#1 PUBLISHED (kept by an earlier release), B#1 FAILED on a route that continues past poison
    released = {"status": {"S": "FAILED"}, "released_at": {"S": "2026-11-29T12:00:00.000Z"}}
    taken = census(row("A", 1, status={"S": "PUBLISHED"}), row("A", 2), row("B", 1, **released), row("B", 2))

    # Then the rows behind them are due, with their predecessors known out
    assert taken.due == [due("A", 2, True), due("B", 2, True)]
    figures = taken.figures()
    assert (figures.failed, figures.failed_released, figures.held_aggregates) == (0, 1, 0)


def test_a_row_that_is_not_due_holds_the_rows_after_it_back() -> None:
    # Given A#1 too young, B#1 backing off, C#1 leased by another path, each with a successor
    later = int((START + timedelta(minutes=1)).timestamp())
    taken = census(
        row("A", 1, occurred=YOUNG),
        row("A", 2),
        row("B", 1, next_attempt_at={"N": str(later)}),
        row("B", 2),
        row("C", 1, lease_until={"N": str(later)}),
        row("C", 2),
    )

    # Then nothing is due (the successors must not go first), and B#1 counts as backing off
    assert taken.due == []
    figures = taken.figures()
    assert (figures.pending, figures.backing_off) == (6, 1)
    assert figures.oldest_unheld == OLD


def test_a_lease_or_backoff_that_has_passed_holds_nothing() -> None:
    # Given A#1 whose backoff and lease both ended before now
    earlier = {"N": str(int((START - timedelta(seconds=1)).timestamp()))}
    taken = census(row("A", 1, next_attempt_at=earlier, lease_until=earlier))

    # Then it is due
    assert taken.due == [due("A", 1, True)]


def test_unreadable_or_far_future_dates_do_not_strand_a_row() -> None:
    # Given a row whose occurred_at cannot be read, and one dated two graces in the future
    taken = census(row("A", 1, occurred=None), row("B", 1, occurred=START + 2 * GRACE))

    # Then both are due; neither adds an age
    assert [due.key for due in taken.due] == [key("A", 1), key("B", 1)]
    assert taken.figures().oldest_pending is None


def test_the_outbox_own_items_are_not_rows() -> None:
    # Given an audit record and the sweeper's cursor between rows
    audit = {"aggregate_key": {"S": "#audit#Order#A"}, "seq": {"N": "1"}}
    cursor = {"aggregate_key": {"S": "#sweeper"}, "seq": {"N": "0"}}
    taken = census(audit, row("A", 1), cursor)

    # Then only the row counts
    assert taken.rows == 1
    assert taken.figures().pending == 1


def test_a_failed_row_another_writer_saved_without_the_index_attribute_is_named() -> None:
    # Given a FAILED row without `failed_shard` (another writer's backfill)
    taken = census(row("A", 1, status={"S": "FAILED"}))

    # Then it is counted and named, for the sweeper to add to the failed index
    assert taken.unindexed == [key("A", 1)]
    assert taken.figures().unindexed_failed == 1


def test_a_released_failed_row_without_the_index_attribute_is_named_too_and_holds_nothing() -> None:
    # Given a FAILED row another writer saved released (its route continues past poison), without
    # `failed_shard`, and the aggregate's next row
    released = {"S": "2026-11-28T12:00:00.000Z"}
    taken = census(row("A", 1, status={"S": "FAILED"}, released_at=released), row("A", 2))

    # Then it is named for the failed index (operators find it there), counted as released, and A#2 is due
    assert taken.unindexed == [key("A", 1)]
    figures = taken.figures()
    assert (figures.unindexed_failed, figures.failed_released, figures.failed) == (1, 1, 0)
    assert taken.due == [due("A", 2, predecessor_out=True)]


def test_a_resumed_scan_does_not_assume_the_first_aggregate_starts_there() -> None:
    # Given a scan resumed after A#3 (A's lower rows were read by an earlier run), then B
    taken = census(row("A", 4), row("B", 1), resumed_after=key("A", 3))

    # Then A#4's predecessor is not known out (the gate reads it); B#1's is
    assert taken.due == [due("A", 4, False), due("B", 1, True)]


def test_a_census_stops_taking_due_rows_at_its_limit_but_keeps_counting() -> None:
    # Given three due rows and a limit of two
    taken = census(row("A", 1), row("B", 1), row("C", 1), limit=2)

    # Then it is full with the first two, and counts all three
    assert taken.full
    assert [due.key for due in taken.due] == [key("A", 1), key("B", 1)]
    assert taken.figures().pending == 3


def test_a_census_that_keeps_no_due_rows_is_never_full() -> None:
    # Given the census `outbox status` takes (no due rows kept)
    taken = census(row("A", 1), row("B", 1), limit=0)

    # Then it took none and is not full: it reads the whole table
    assert taken.due == []
    assert not taken.full


def test_figures_add_up_across_runs_and_take_the_larger_estimate() -> None:
    # Given the figures of two parts of one pass
    first = Figures(pending=3, oldest_pending=OLD, held_aggregates=1, failed=1)
    second = Figures(pending=2, oldest_pending=YOUNG, oldest_unheld=YOUNG, backing_off=1)

    # Then together they add counts and keep the oldest dates; as estimates, each figure's larger one
    assert first.plus(second) == Figures(5, OLD, YOUNG, 1, 1, 0, 1, 0)
    assert second.at_least(first) == Figures(3, OLD, YOUNG, 1, 1, 0, 1, 0)


def test_rows_the_run_published_count_no_more() -> None:
    # Given two due rows, the older first, and a young row behind nothing
    older, newer = OLD - timedelta(minutes=5), OLD
    taken = census(row("A", 1, occurred=older), row("B", 1, occurred=newer), row("C", 1, occurred=YOUNG))

    # When the run published A#1 (it is out), and then A#1 and B#1
    after_one = taken.figures(out={key("A", 1)})
    after_both = taken.figures(out={key("A", 1), key("B", 1)})

    # Then each counts no more: the oldest pending row is the next one still in the table
    assert (taken.figures().pending, taken.figures().oldest_pending) == (3, older)
    assert (after_one.pending, after_one.oldest_pending, after_one.oldest_unheld) == (2, newer, newer)
    assert (after_both.pending, after_both.oldest_pending) == (1, YOUNG)
