"""The sweeper's numbers at their edges: its settings from the environment (a number Python would read as
float, infinite or not at all is a ConfigurationError naming the variable, at start-up), the back-off after
any number of failed sweeps (never past the cap, never an OverflowError) and the counts a row carries."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from outbox.config import MAX_COUNT
from outbox.errors import ConfigurationError
from outbox_sweeper.config import SweeperConfig, SweepSettings
from outbox_sweeper.sweep import backoff, stored_count

BASE = {
    "OUTBOX_TABLE_NAME": "outbox",
    "POISON_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/poison",
    "TOPIC_ARN": "arn:aws:sns:us-east-1:123456789012:outbox-events",
}
NUMBERS = (
    "SWEEP_GRACE_SECONDS",
    "SWEEP_MAX_ROWS",
    "SWEEP_SEGMENTS",
    "SWEEP_BACKOFF_BASE_SECONDS",
    "SWEEP_BACKOFF_MAX_SECONDS",
    "SWEEP_MAX_ATTEMPTS",
    "SWEEP_FAIL_AFTER_SECONDS",
)


@pytest.mark.parametrize("name", NUMBERS)
@pytest.mark.parametrize(
    "raw", ["1e400", "-1e400", "inf", "Infinity", "nan", "NaN", "1.5", "-1", "0x10", "1e3", "\u00b2"]
)
def test_a_number_float_would_read_is_a_configuration_error_naming_the_variable(name: str, raw: str) -> None:
    # Given a setting float() reads (or reads as infinite, or not a number) / When / Then refused at start-up
    with pytest.raises(
        ConfigurationError, match=rf"^{name} must be a whole number written with the digits 0-9$"
    ):
        SweeperConfig.from_env(BASE | {name: raw})


@pytest.mark.parametrize("name", NUMBERS)
def test_zero_is_a_configuration_error_naming_the_variable(name: str) -> None:
    with pytest.raises(ConfigurationError, match=rf"^{name} must be (positive, got 0|at least)"):
        SweeperConfig.from_env(BASE | {name: "0"})


def test_a_cap_below_the_base_is_a_configuration_error() -> None:
    env = BASE | {"SWEEP_BACKOFF_BASE_SECONDS": "60", "SWEEP_BACKOFF_MAX_SECONDS": "59"}
    with pytest.raises(ConfigurationError, match="SWEEP_BACKOFF_MAX_SECONDS must be at least"):
        SweeperConfig.from_env(env)


def test_the_largest_attempts_are_taken() -> None:
    config = SweeperConfig.from_env(BASE | {"SWEEP_MAX_ATTEMPTS": str(MAX_COUNT)})
    assert config.sweep.max_attempts == MAX_COUNT
    with pytest.raises(ConfigurationError, match=rf"^SWEEP_MAX_ATTEMPTS must be at most {MAX_COUNT}$"):
        SweeperConfig.from_env(BASE | {"SWEEP_MAX_ATTEMPTS": str(MAX_COUNT + 1)})


SETTINGS = SweepSettings(backoff_base=timedelta(seconds=30), backoff_max=timedelta(seconds=900))


@pytest.mark.parametrize(
    ("failures", "ceiling"),
    [
        (0, 30),
        (1, 30),
        (2, 60),
        (5, 480),
        (6, 900),
        (40, 900),
        (10**6, 900),
        (MAX_COUNT, 900),
        (10**126, 900),
    ],
)
def test_the_backoff_doubles_from_the_base_up_to_the_cap_for_any_number_of_failed_sweeps(
    failures: int, ceiling: int
) -> None:
    # Given a row's failed sweeps, up to far more than a timedelta can double / When / Then half to all of it
    assert backoff(failures, SETTINGS, 0.0) == timedelta(seconds=ceiling / 2)
    assert backoff(failures, SETTINGS, 0.999999) <= timedelta(seconds=ceiling)


def test_the_backoff_at_the_longest_settings_stays_a_timedelta() -> None:
    # Given the longest base and cap a setting takes (100 years) / When / Then
    longest = SweepSettings(backoff_base=timedelta(days=36_500), backoff_max=timedelta(days=36_500))
    assert backoff(10**126, longest, 0.5) == timedelta(days=36_500) * 0.75


@pytest.mark.parametrize(
    ("stored", "count"),
    [
        ({"N": "7"}, 7),
        ({"N": "9.9E+125"}, MAX_COUNT),
        ({"N": "1e400"}, MAX_COUNT),
        ({"N": "Infinity"}, MAX_COUNT),
        ({"N": "9" * 5000}, MAX_COUNT),
        ({"N": "-1e400"}, 0),
        ({"N": "NaN"}, 0),
        ({"N": "sNaN"}, 0),
        ({"N": "2.5"}, 2),
        ({"N": "many"}, 0),
        ({"S": "7"}, 0),
        ({"N": None}, 0),
        ("7", 0),
    ],
)
def test_a_count_a_row_carries_is_read_between_0_and_max_count_never_raising(stored: Any, count: int) -> None:
    # Given a row's attempts as another writer may have stored them / When / Then
    assert stored_count({"attempts": stored}, "attempts") == count
    assert stored_count({}, "attempts") == 0
