"""The priced table of events of any size (bench.payload_sizes): the paths' lines follow the design."""

from __future__ import annotations

import pytest

from bench import payload_sizes, prices
from bench.payload_sizes import PATHS, SIZES, cost

KB = 1024


def test_the_retention_priced_is_the_constructs() -> None:
    # The bucket's retention, as the constructs set it (the bench keeps a copy to import no CDK)
    from outbox_cdk.constants import PAYLOAD_RETENTION_DAYS

    assert payload_sizes.PAYLOAD_RETENTION_DAYS == PAYLOAD_RETENTION_DAYS


def test_a_small_event_costs_the_same_with_or_without_a_store() -> None:
    # Given a 1 KB event, below the threshold
    # Then every path prices the same lines: no S3 at all
    priced = [cost(SIZES["1 KB"], path) for path in PATHS]
    assert all(lines is not None and not any(name.startswith("S3") for name in lines) for lines in priced)
    assert len({sum(lines.values()) for lines in priced if lines is not None}) == 1


def test_a_100_kb_event_is_cheaper_stored_and_goes_whole_to_both_destinations() -> None:
    row_only, stored, _ = (cost(100 * KB, path) for path in PATHS)
    assert row_only is not None
    assert stored is not None
    # Then the stored path pays an S3 PUT and the publisher's GET, no consumer GET (no claim check)
    assert stored["S3 GET (consumers' claim checks)"] == 0
    assert stored["S3 PUT"] > 0
    # and costs less than the 100 KB row's write and settle
    assert sum(stored.values()) < sum(row_only.values()) / 10


@pytest.mark.parametrize("path", PATHS, ids=lambda path: path.name)
def test_a_1_mb_event_needs_a_store(path: payload_sizes.Path) -> None:
    lines = cost(SIZES["1 MB"], path)
    assert (lines is None) == (not path.store)


def test_a_1_mb_event_on_a_1_mib_topic_pays_sns_for_every_chunk() -> None:
    _, small_topic, large_topic = (cost(SIZES["1 MB"], path) for path in PATHS)
    assert small_topic is not None
    assert large_topic is not None
    # A claim check on both destinations (two consumer GETs) against a whole message on SNS (one)
    claim_gets = "S3 GET (consumers' claim checks)"
    assert small_topic[claim_gets] == pytest.approx(2 * large_topic[claim_gets])
    # and the whole message is 16 chunks of 64 KB, the pointer a tenth of a batched request
    assert large_topic["SNS publish"] == pytest.approx(16 * prices.SNS_REQUEST.per_unit)
    assert small_topic["SNS publish"] == pytest.approx(prices.SNS_REQUEST.per_unit / 10)
