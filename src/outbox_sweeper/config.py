"""The sweeper's configuration: the publisher's (same table, destinations, routes, poison queue), plus
how it sweeps (`SWEEP_*`, each with its default in docs/publisher.md's configuration table). Parsed from the
environment once, at start-up, and validated there: a bad value is a configuration error naming its variable.

Both cutoffs (`SWEEP_MAX_ATTEMPTS`, `SWEEP_FAIL_AFTER_SECONDS`) only turn a row that fails once more into a
FAILED one: no row is failed without a try.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

from outbox.config import positive_duration, positive_int
from outbox.errors import ConfigurationError
from outbox_publisher.config import DEFAULT_SWEEP_GRACE_SECONDS, PublisherConfig

DEFAULT_SWEEP_GRACE = timedelta(seconds=DEFAULT_SWEEP_GRACE_SECONDS)
"""The age past which the sweeper takes a PENDING row, unless its function is configured otherwise (what
`outbox status` assumes unless told `--sweep-grace`)."""

ENV_SWEEP_MAX_ROWS = "SWEEP_MAX_ROWS"
ENV_SWEEP_SEGMENTS = "SWEEP_SEGMENTS"
ENV_SWEEP_BACKOFF_BASE_SECONDS = "SWEEP_BACKOFF_BASE_SECONDS"
ENV_SWEEP_BACKOFF_MAX_SECONDS = "SWEEP_BACKOFF_MAX_SECONDS"
ENV_SWEEP_MAX_ATTEMPTS = "SWEEP_MAX_ATTEMPTS"
ENV_SWEEP_FAIL_AFTER_SECONDS = "SWEEP_FAIL_AFTER_SECONDS"

DEFAULT_MAX_ROWS = 500
DEFAULT_SEGMENTS = 1
MAX_SEGMENTS = 50
"""Each segment is a target of the schedule (outbox_cdk.sweeper: 5 a rule): fifty is ten rules."""
DEFAULT_BACKOFF_BASE_SECONDS = 30
DEFAULT_BACKOFF_MAX_SECONDS = 900
DEFAULT_MAX_ATTEMPTS = 100
DEFAULT_FAIL_AFTER_SECONDS = 86_400


@dataclass(frozen=True, slots=True)
class SweepSettings:
    max_rows: int = DEFAULT_MAX_ROWS
    segments: int = DEFAULT_SEGMENTS
    backoff_base: timedelta = timedelta(seconds=DEFAULT_BACKOFF_BASE_SECONDS)
    backoff_max: timedelta = timedelta(seconds=DEFAULT_BACKOFF_MAX_SECONDS)
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    fail_after: timedelta = timedelta(seconds=DEFAULT_FAIL_AFTER_SECONDS)

    def __post_init__(self) -> None:
        for name, value in self.environment().items():
            if int(value) <= 0:
                raise ConfigurationError(f"{name} must be positive, got {value}")
        if self.segments > MAX_SEGMENTS:
            raise ConfigurationError(
                f"{ENV_SWEEP_SEGMENTS} must be at most {MAX_SEGMENTS}, got {self.segments}"
            )
        if self.backoff_max < self.backoff_base:
            raise ConfigurationError(
                f"{ENV_SWEEP_BACKOFF_MAX_SECONDS} must be at least {ENV_SWEEP_BACKOFF_BASE_SECONDS}"
            )

    def environment(self) -> dict[str, str]:
        """These settings as the variables `from_env` reads (the CDK construct sets them)."""
        return {
            ENV_SWEEP_MAX_ROWS: str(self.max_rows),
            ENV_SWEEP_SEGMENTS: str(self.segments),
            ENV_SWEEP_BACKOFF_BASE_SECONDS: _seconds(self.backoff_base),
            ENV_SWEEP_BACKOFF_MAX_SECONDS: _seconds(self.backoff_max),
            ENV_SWEEP_MAX_ATTEMPTS: str(self.max_attempts),
            ENV_SWEEP_FAIL_AFTER_SECONDS: _seconds(self.fail_after),
        }


@dataclass(frozen=True, slots=True)
class SweeperConfig:
    publisher: PublisherConfig
    sweep: SweepSettings

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> SweeperConfig:
        return cls(
            publisher=PublisherConfig.from_env(env),
            sweep=SweepSettings(
                max_rows=positive_int(env, ENV_SWEEP_MAX_ROWS, default=DEFAULT_MAX_ROWS),
                segments=positive_int(env, ENV_SWEEP_SEGMENTS, default=DEFAULT_SEGMENTS),
                backoff_base=_duration(env, ENV_SWEEP_BACKOFF_BASE_SECONDS, DEFAULT_BACKOFF_BASE_SECONDS),
                backoff_max=_duration(env, ENV_SWEEP_BACKOFF_MAX_SECONDS, DEFAULT_BACKOFF_MAX_SECONDS),
                max_attempts=positive_int(env, ENV_SWEEP_MAX_ATTEMPTS, default=DEFAULT_MAX_ATTEMPTS),
                fail_after=_duration(env, ENV_SWEEP_FAIL_AFTER_SECONDS, DEFAULT_FAIL_AFTER_SECONDS),
            ),
        )


def _duration(env: Mapping[str, str], name: str, default: int) -> timedelta:
    return positive_duration(env, name, unit=timedelta(seconds=1), default=default)


def _seconds(delta: timedelta) -> str:
    seconds = delta.total_seconds()
    if seconds != int(seconds):
        raise ConfigurationError(f"sweep durations are whole seconds, got {seconds}")
    return str(int(seconds))
