"""The duplicates harness at a tiny size: it injects the failure it says, redelivers what the stream mapping
would, to the container it names, and counts exactly the events published twice. Counts, never timings."""

from __future__ import annotations

import pytest

from bench import duplicate_figures
from bench.cpu_figures import lambda_batch
from bench.duplicate_figures import FailureKind, Harness, Redelivery, redelivery
from outbox_publisher.waves import LOOKAHEAD
from tests.support.events import event


@pytest.mark.parametrize("lookahead", [LOOKAHEAD, 0])
@pytest.mark.parametrize("kind", ["entry", "call"])
def test_a_destination_failure_hands_nothing_back_so_nothing_is_published_twice(
    lookahead: int, kind: FailureKind
) -> None:
    # Given A#1, A#2, B#1 and SNS failing A#1 for the whole first invocation
    a1, a2, b1 = event("A", 1), event("A", 2), event("B", 1)
    batch = lambda_batch([a1, a2, b1])

    # When the publisher runs it
    trial = Harness(lookahead).trial(batch, a1.event_id, kind)

    # Then nothing comes back from the stream (A#1 waits, parked, for the sweeper), so nothing goes out twice
    assert (trial.redelivered, trial.duplicates) == (0, 0)


@pytest.mark.parametrize(
    ("lookahead", "to", "duplicates"),
    [
        # waves send B#1 with A#1, then time runs out before A#2: the stream resends A#2 and B#1 ...
        (LOOKAHEAD, "same", 0),  # ... and the container that settled B#1 skips its record
        (LOOKAHEAD, "elsewhere", 1),  # ... and a container that remembers nothing publishes B#1 again
        # the contiguous cut ends the first call at A#2: B#1 never went out before the stop
        (0, "same", 0),
        (0, "elsewhere", 0),
    ],
)
def test_running_out_of_time_costs_what_the_window_had_sent_beyond_the_stop_to_a_container_that_forgot_it(
    lookahead: int, to: Redelivery, duplicates: int
) -> None:
    # Given A#1, A#2, B#1 and an invocation that runs out of time once the call carrying A#1 is answered
    a1, a2, b1 = event("A", 1), event("A", 2), event("B", 1)
    batch = lambda_batch([a1, a2, b1])

    # When the publisher runs it and the stream redelivers what it handed back
    trial = Harness(lookahead).trial(batch, a1.event_id, "stop", to)

    # Then A#2 and B#1 come back, and only what the first run had published and the container forgot goes
    # out again
    assert trial.redelivered == 2
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

    # Then each failure has a mean and a max for ours and the baseline, from 12 positions
    figures = {figure.key: figure for figure in group.figures}
    cases = [name for name, _, _ in duplicate_figures.CASES]
    assert set(figures) == {
        *(f"duplicates.{case}.{statistic}" for case in cases for statistic in ("mean", "max")),
        "duplicates.calls",
    }
    detail = figures["duplicates.stop.elsewhere.mean"].detail
    assert len(detail["ours_by_position"]) == len(detail["contiguous_by_position"]) == 12
    # And a destination's failure never makes a duplicate, nor a stop redelivered to the container that
    # settled what it had sent
    for case in ("entry", "call", "stop.same"):
        assert figures[f"duplicates.{case}.max"].ours == 0
