"""Random fault schedules on one outbox across two regions (Hypothesis, seeded, failing examples kept in
tests/reliability/examples): writes in both regions interleaved with region losses, returns and replication
lag; then the faults clear, the system drains, and every promise must hold on the union of both regions'
destinations, the replicas agreeing (tests.reliability.region_schedules). `make test` plays the fast profile,
`make reliability` the long one (tests/reliability/profiles.py, `region_profile`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, example, given, seed, settings
from hypothesis.database import DirectoryBasedExampleDatabase

from tests.reliability import tally
from tests.reliability.profiles import FAST, region_profile
from tests.reliability.region_schedules import run_region_schedule, schedules
from tests.reliability.schedules import Step, describe

PROFILE = region_profile()
EXAMPLES = DirectoryBasedExampleDatabase(str(Path(__file__).parent / "examples"))
PLAYED_FIRST: dict[int, tuple[tuple[int, list[Step]], tuple[str, ...]]] = {
    # The fast profile plays these first, so `make test` always meets a takeover and a return:
    # shard 0, the home region cut the moment its publisher's batch was accepted (in flight), past the
    # takeover time, with writes on both sides and half the writes replicating late; shard 1, the other
    # region cut off while the home region's writes out lag, and brought back by a return step.
    # shard -> (the schedule, the kinds that must take effect in it)
    0: (
        (
            5,
            [
                Step("write", order=0),
                Step("write", order=1),
                Step("fault", kind="replication_lag", seconds=30.0, nth=3),
                Step("write", order=2),
                Step("fault", kind="region_loss", seconds=420.0, nth=3),
                Step("write", order=0),
                Step("write", order=3),
                Step("wait", seconds=400.0),
                Step("write", order=1),
            ],
        ),
        ("region_loss", "region_return", "replication_lag"),
    ),
    1: (
        (
            9,
            [
                Step("write", order=1),
                Step("write", order=3),
                Step("fault", kind="region_loss", seconds=900.0, nth=2),
                Step("fault", kind="replication_lag", seconds=120.0, nth=1),
                Step("write", order=2),
                Step("write", order=4),
                Step("wait", seconds=400.0),
                Step("fault", kind="region_return"),
                Step("write", order=3),
            ],
        ),
        ("region_loss", "region_return", "replication_lag"),
    ),
}
MUST_TAKE_EFFECT = {describe(*schedule): kinds for schedule, kinds in PLAYED_FIRST.values()}


@pytest.mark.parametrize("shard", range(PROFILE.shards))
def test_random_region_schedules_keep_every_promise(shard: int) -> None:
    # Given a seeded stream of two-region schedules (this shard's seed), the saved failing examples first
    @seed(PROFILE.seed + 1000 + shard)
    @settings(
        max_examples=PROFILE.per_shard,
        deadline=None,
        database=EXAMPLES,
        derandomize=False,
        print_blob=True,
        phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink),
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
    )
    @given(schedules())
    def schedule_keeps_every_promise(schedule: tuple[int, list[Step]]) -> None:
        # When it is played, its faults cleared and the two regions drained
        result, verdict, regions = run_region_schedule(*schedule)
        tally.record({**result.to_json(), **regions, "shard": shard, "schedule": describe(*schedule)})
        # Then nothing was lost, invented or reordered, no copy but the documented ones, the replicas agree,
        # and the drain ended
        assert result.drained, f"not drained after the drain limit: {describe(*schedule)}"
        assert not result.violations, "\n".join([describe(*schedule), *result.violations])
        assert verdict.ok
        # and what a hand-written schedule is there for took effect
        idle = [kind for kind in MUST_TAKE_EFFECT.get(describe(*schedule), ()) if not result.effective[kind]]
        assert not idle, f"armed for nothing: {idle}"

    if PROFILE.name == FAST and shard in PLAYED_FIRST:
        schedule_keeps_every_promise = example(PLAYED_FIRST[shard][0])(schedule_keeps_every_promise)
    schedule_keeps_every_promise()


HAND_FOUND: list[tuple[int, list[Step]]] = [
    # Found by the long profile: two rows of one aggregate of the lost region (seq 2 and 3) had not
    # replicated when the taker published seq 4; each is marked FAILED (LateReplica) in a later sweep than the
    # other. The drain must wait for the operator's skip of both (the runbook), not end with one FAILED.
    (
        1,
        [
            Step("write", order=0),
            Step("write", order=1),
            Step("fault", kind="replication_lag", seconds=5.0, nth=1),
            Step("wait", seconds=2.0),
            Step("write", order=1, nth=3),
            Step("fault", kind="region_loss", seconds=420.0, nth=2),
        ],
    ),
]


@pytest.mark.parametrize("schedule", HAND_FOUND, ids=lambda schedule: f"seed-{schedule[0]}")
def test_hand_found_region_schedules_keep_every_promise(schedule: tuple[int, list[Step]]) -> None:
    result, verdict, regions = run_region_schedule(*schedule)
    assert result.drained
    assert verdict.ok
    assert not result.violations, "\n".join(result.violations)
    assert sum(figures["late_replicas"] for figures in regions["regions"].values()) == 2
