"""The bad-input catalogue's Hypothesis profiles (loaded by tests/hardening/conftest.py).

`fast` (the default, what `make test` runs): few examples per test, derandomized so every run generates the
same inputs, and no deadline (a shared 2-core machine is no place for timing flakes). `fuzz` (`make fuzz`,
`HARDENING_PROFILE=fuzz`): enough examples for well over 10,000 generated inputs in all, new ones each run.
Neither keeps an example database; Hypothesis' own cache goes under build/ (ignored by git).
"""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis.configuration import set_hypothesis_home_dir

PROFILE_VARIABLE = "HARDENING_PROFILE"
FAST = "fast"
FUZZ = "fuzz"

set_hypothesis_home_dir(Path(__file__).resolve().parents[2] / "build" / "hypothesis")

# Each test builds its moto world once and reuses it for every example, putting the tables back after each.
_SHARED_WORLD = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
settings.register_profile(
    FAST,
    max_examples=15,
    derandomize=True,
    deadline=None,
    database=None,
    print_blob=False,
    suppress_health_check=_SHARED_WORLD,
)
settings.register_profile(
    FUZZ,
    max_examples=400,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=_SHARED_WORLD,
)
settings.load_profile(os.environ.get(PROFILE_VARIABLE, FAST))


def examples(weight: float) -> settings:
    """This test's share of the profile's examples: cheap entry points get more, those that publish fewer."""
    return settings(max_examples=max(1, round(settings().max_examples * weight)))
