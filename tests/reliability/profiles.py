"""How many random schedules a run plays, and from which seed (docs/RELIABILITY.md)."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

PROFILE_VARIABLE = "RELIABILITY_PROFILE"
SCHEDULES_VARIABLE = "RELIABILITY_SCHEDULES"
SEED_VARIABLE = "RELIABILITY_SEED"
REGION_SCHEDULES_VARIABLE = "RELIABILITY_REGION_SCHEDULES"
FAST = "fast"
LONG = "long"
DEFAULT_SEED = 20261129
LONG_SCHEDULES = 1000
FAST_SCHEDULES = 24
FAST_PLAYED_FIRST_PER_SHARD = 1
"""The fast profile's schedules written by hand (tests/reliability/test_fault_schedules.py, PLAYED_FIRST):
each shard plays one before its generated ones, which are that many fewer, so the profile stays at 24."""
REGION_LONG_SCHEDULES = 200
REGION_FAST_SCHEDULES = 4
"""The two-region schedules (tests/reliability/test_region_schedules.py): each plays two regions' worth of
functions over a takeover time or more, so fewer make the same wall time."""


@dataclass(frozen=True)
class Profile:
    name: str
    shards: int
    """Independent Hypothesis runs (seed, seed + 1, ...): pytest-xdist spreads them over the cores."""
    per_shard: int
    seed: int

    @property
    def schedules(self) -> int:
        return self.shards * self.per_shard


def profile() -> Profile:
    name = os.environ.get(PROFILE_VARIABLE, FAST)
    seed = int(os.environ.get(SEED_VARIABLE, str(DEFAULT_SEED)))
    if name == LONG:
        total = int(os.environ.get(SCHEDULES_VARIABLE, str(LONG_SCHEDULES)))
        shards = 8
        return Profile(LONG, shards, max(1, math.ceil(total / shards)), seed)
    return Profile(FAST, 2, FAST_SCHEDULES // 2 - FAST_PLAYED_FIRST_PER_SHARD, seed)


def region_profile() -> Profile:
    """The two-region schedules' profile: the same variables choose it, `RELIABILITY_REGION_SCHEDULES` sets
    the long one's count; the fast one plays the hand-written schedules first, one per shard."""
    name = os.environ.get(PROFILE_VARIABLE, FAST)
    seed = int(os.environ.get(SEED_VARIABLE, str(DEFAULT_SEED)))
    if name == LONG:
        total = int(os.environ.get(REGION_SCHEDULES_VARIABLE, str(REGION_LONG_SCHEDULES)))
        shards = 8
        return Profile(LONG, shards, max(1, math.ceil(total / shards)), seed)
    return Profile(FAST, 2, REGION_FAST_SCHEDULES // 2 - FAST_PLAYED_FIRST_PER_SHARD, seed)
