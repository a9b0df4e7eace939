"""Random fault schedules (Hypothesis, seeded, failing examples kept in tests/reliability/examples): order
commands interleaved with faults; then the faults clear, the system drains on the virtual clock, and every
promise must hold (tests.reliability.invariants). `make test` plays the fast profile; `make reliability` the
long one (tests/reliability/profiles.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis.database import DirectoryBasedExampleDatabase

from tests.reliability import tally
from tests.reliability.profiles import profile
from tests.reliability.schedules import Step, describe, run_schedule, schedules

PROFILE = profile()
EXAMPLES = DirectoryBasedExampleDatabase(str(Path(__file__).parent / "examples"))


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

    schedule_keeps_every_promise()
