"""How many kills a run makes (docs/local.md, "State that survives"): `LOCAL_CRASH_PROFILE=fast` (the default,
inside `make test`) kills twice; `long` (`make local-crash`) `LOCAL_CRASH_KILLS` times (20 by default)."""

from __future__ import annotations

import os
from dataclasses import dataclass

PROFILE_VARIABLE = "LOCAL_CRASH_PROFILE"
KILLS_VARIABLE = "LOCAL_CRASH_KILLS"
SEED_VARIABLE = "LOCAL_CRASH_SEED"
REPORT_VARIABLE = "LOCAL_CRASH_REPORT"
LONG_KILLS = 20
FAST_KILLS = 2
DEFAULT_SEED = 20261204


@dataclass(frozen=True)
class Profile:
    name: str
    kills: int
    seed: int
    rate: float
    """Requests a second to the HTTP API (places and confirms)."""
    running_s: tuple[float, float]
    """How long the runtime runs under load before a kill: drawn between these."""


def profile() -> Profile:
    seed = int(os.environ.get(SEED_VARIABLE, str(DEFAULT_SEED)))
    if os.environ.get(PROFILE_VARIABLE, "fast") == "long":
        return Profile("long", int(os.environ.get(KILLS_VARIABLE, str(LONG_KILLS))), seed, 8.0, (1.0, 6.0))
    return Profile("fast", FAST_KILLS, seed, 8.0, (1.0, 2.5))
