"""The publisher's and the sweeper's numbers and routes from the environment: typed refusals of what Python
itself would read, or overflow on (hardening catalogue findings)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from outbox.errors import ConfigurationError
from outbox.numbers import MAX_DURATION
from outbox_publisher.config import PublisherConfig
from outbox_sweeper.config import SweeperConfig

BASE = {
    "OUTBOX_TABLE_NAME": "outbox",
    "POISON_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/poison",
    "TOPIC_ARN": "arn:aws:sns:us-east-1:123456789012:outbox-events",
}
DURATIONS = (
    "SWEEP_GRACE_SECONDS",
    "SWEEP_BACKOFF_BASE_SECONDS",
    "SWEEP_BACKOFF_MAX_SECONDS",
    "SWEEP_FAIL_AFTER_SECONDS",
)
NUMBERS = (*DURATIONS, "SWEEP_MAX_ROWS", "SWEEP_MAX_ATTEMPTS", "SWEEP_SEGMENTS")


@pytest.mark.parametrize("name", DURATIONS)
@pytest.mark.parametrize(
    "raw",
    [
        pytest.param("1" + "0" * 12, id="10^12"),
        pytest.param("1" + "0" * 20, id="10^20"),
        pytest.param("9" * 5000, id="5000-digits"),
    ],
)
def test_a_huge_duration_in_the_environment_is_a_configuration_error_not_an_overflow(
    name: str, raw: str
) -> None:
    # Given a duration timedelta cannot hold, or that no time can be added to
    # When / Then the configuration is refused, naming the variable and its bound
    with pytest.raises(ConfigurationError, match=rf"^{name} must be at most "):
        SweeperConfig.from_env(BASE | {name: raw})


def test_more_segments_than_the_schedule_can_target_is_a_configuration_error() -> None:
    # Given 51 segments (the schedule targets each one: at most 50)
    # When / Then refused at start-up, naming the variable
    with pytest.raises(ConfigurationError, match=r"^SWEEP_SEGMENTS must be at most 50, got 51$"):
        SweeperConfig.from_env(BASE | {"SWEEP_SEGMENTS": "51"})


@pytest.mark.parametrize("name", NUMBERS)
@pytest.mark.parametrize("raw", ["\u0663\u0660\u0660", "\uff13\uff10\uff10", "1_000"])
def test_non_ascii_digits_in_the_environment_are_a_configuration_error(name: str, raw: str) -> None:
    # Given a number int() reads (300 in Arabic-Indic or fullwidth digits, 1_000) / When / Then refused
    with pytest.raises(
        ConfigurationError, match=rf"^{name} must be a whole number written with the digits 0-9$"
    ):
        SweeperConfig.from_env(BASE | {name: raw})


def test_the_longest_durations_are_taken() -> None:
    # Given / When
    seconds = str(int(MAX_DURATION.total_seconds()))
    publisher = PublisherConfig.from_env(BASE | {"SWEEP_GRACE_SECONDS": seconds})
    # Then
    assert publisher.sweep_grace == MAX_DURATION
    assert publisher.sweep_grace > timedelta(days=36_499)


@pytest.mark.parametrize("opening", ["[", '{"default":['])
def test_a_100000_deep_outbox_routes_is_a_configuration_error_not_a_recursion_error(opening: str) -> None:
    # Given routes nested past the JSON decoder's recursion limit
    routes = opening + "[" * 100_000 + "]" * 100_000 + ("]}" if opening.startswith("{") else "]")
    # When / Then
    with pytest.raises(ConfigurationError, match=r"^OUTBOX_ROUTES is nested too deeply for routing rules$"):
        PublisherConfig.from_env(BASE | {"OUTBOX_ROUTES": routes})
