"""The duplicates harness at a tiny size: it injects the failure it says, redelivers what the stream mapping
would, and counts exactly the events published twice. Counts, never timings."""

from __future__ import annotations

import pytest

from bench import duplicate_figures
from bench.cpu_figures import lambda_batch
from bench.duplicate_figures import FailureKind, Harness, redelivery
from outbox_publisher.waves import LOOKAHEAD
from tests.support.events import event


@pytest.mark.parametrize(
    ("lookahead", "kind", "duplicates"),
    [
        # waves take B#1 with A#1: A#1 fails, the stream resends from A#1, and B#1 goes out twice
        (LOOKAHEAD, "entry", 1),
        (LOOKAHEAD, "call", 0),  # the whole call failed: B#1 was not out either
        # the contiguous cut ends the first call at A#2: B#1 never went out before the failure
        (0, "entry", 0),
        (0, "call", 0),
    ],
)
def test_a_failure_on_the_first_event_costs_what_the_window_had_sent_beyond_it(
    lookahead: int, kind: FailureKind, duplicates: int
) -> None:
    # Given A#1, A#2, B#1 and a failure on A#1 for the whole first invocation
    a1, a2, b1 = event("A", 1), event("A", 2), event("B", 1)
    batch = lambda_batch([a1, a2, b1])

    # When the publisher runs it and the stream redelivers what it handed back
    trial = Harness(lookahead).trial(batch, a1.event_id, kind)

    # Then all three records come back, and only what the first run had published is published again
    assert trial.redelivered == 3
    assert trial.duplicates == duplicates


def test_the_stream_resends_from_the_lowest_sequence_number_handed_back() -> None:
    # Given a batch of four records, two handed back
    batch = lambda_batch([event("A", 1), event("B", 1), event("C", 1), event("D", 1)])
    numbers = [record["dynamodb"]["SequenceNumber"] for record in batch["Records"]]

    # When it is redelivered, Then every record from the lowest one handed back comes again
    again = redelivery(batch, [numbers[3], numbers[1]])
    assert [record["dynamodb"]["SequenceNumber"] for record in again["Records"]] == numbers[1:]


def test_the_group_reports_ours_against_the_contiguous_cut_at_every_position() -> None:
    # When the figures are measured on 12 records over 3 aggregates
    (group,) = duplicate_figures.measure(records=12, aggregates=3)

    # Then each failure kind has a mean and a max for ours and the baseline, from 12 positions
    figures = {figure.key: figure for figure in group.figures}
    assert set(figures) == {
        "duplicates.entry.mean",
        "duplicates.entry.max",
        "duplicates.call.mean",
        "duplicates.call.max",
        "duplicates.calls",
    }
    detail = figures["duplicates.entry.mean"].detail
    assert len(detail["ours_by_position"]) == len(detail["contiguous_by_position"]) == 12
    # And the contiguous cut never re-sends anything after a whole failed call
    assert figures["duplicates.call.max"].baseline == 0
