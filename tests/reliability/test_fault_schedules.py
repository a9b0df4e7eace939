"""Random fault schedules (Hypothesis, seeded, failing examples kept in tests/reliability/examples): order
commands interleaved with faults; then the faults clear, the system drains on the virtual clock, and every
promise must hold (tests.reliability.invariants). `make test` plays the fast profile; `make reliability` the
long one (tests/reliability/profiles.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, example, given, seed, settings
from hypothesis.database import DirectoryBasedExampleDatabase

from tests.reliability import tally
from tests.reliability.profiles import FAST, profile
from tests.reliability.schedules import Step, describe, run_schedule, schedules

PROFILE = profile()
EXAMPLES = DirectoryBasedExampleDatabase(str(Path(__file__).parent / "examples"))
PLAYED_FIRST: dict[int, tuple[tuple[int, list[Step]], tuple[str, ...]]] = {
    # The fast profile plays these first in its shards, so `make test` always meets stored envelopes and S3
    # faults: shard 0, S3 failing the reads of an aggregate of stored envelopes (100 KB inline, 300 KB a claim
    # check on the bus) while orders go on, then a 1.2 MB one (claim checks on both); shard 1, a stored
    # envelope deleted after its row committed (FAILED, restored and redriven) while S3 throttles.
    # shard -> (the schedule, the kinds that must take effect in it)
    0: (
        (
            7,
            [
                Step("place", order=1),
                Step("fault", kind="s3_5xx", seconds=20.0, nth=1),
                Step("wait", seconds=10.0),
                Step("confirm", order=0),
                Step("fault", kind="large_payloads", seconds=2.0, nth=2),
                Step("cancel", order=0),
            ],
        ),
        ("s3_5xx", "large_payloads"),
    ),
    1: (
        (
            11,
            [
                Step("place", order=2),
                Step("fault", kind="s3_missing", seconds=2.0, redrive=True),
                Step("fault", kind="s3_throttled", seconds=6.0, nth=3),
                Step("wait", seconds=2.0),
                Step("cancel", order=0),
            ],
        ),
        ("s3_missing", "s3_throttled", "operator_redrive"),
    ),
}
MUST_TAKE_EFFECT = {describe(*schedule): kinds for schedule, kinds in PLAYED_FIRST.values()}


@pytest.mark.parametrize("shard", range(PROFILE.shards))
def test_random_fault_schedules_keep_every_promise(shard: int) -> None:
    # Given a seeded stream of schedules (this shard's seed), the saved failing examples replayed first
    @seed(PROFILE.seed + shard)
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
        # When it is played, its faults cleared and the system drained
        result, verdict = run_schedule(*schedule)
        tally.record({**result.to_json(), "shard": shard, "schedule": describe(*schedule)})
        # Then nothing was lost, invented, reordered or applied twice, and the drain ended
        assert result.drained, f"not drained after the drain limit: {describe(*schedule)}"
        assert verdict.ok, "\n".join([describe(*schedule), *verdict.violations()])
        # and what a hand-written schedule is there for took effect
        idle = [kind for kind in MUST_TAKE_EFFECT.get(describe(*schedule), ()) if not result.effective[kind]]
        assert not idle, f"armed for nothing: {idle}"

    if PROFILE.name == FAST and shard in PLAYED_FIRST:
        schedule_keeps_every_promise = example(PLAYED_FIRST[shard][0])(schedule_keeps_every_promise)
    schedule_keeps_every_promise()
