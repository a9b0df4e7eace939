"""The settings of an outbox across regions (docs/multi-region.md, "Configuration"): read from the environment
once and validated there (ConfigurationError naming the variable). `outbox_publisher.regions` re-exports
them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Final

from outbox.config import optional, positive_duration
from outbox.errors import ConfigurationError
from outbox.event_rules import is_region_name

ENV_REGION: Final = "OUTBOX_REGION"

ENV_REGIONS: Final = "OUTBOX_REGIONS"

ENV_TAKEOVER_AFTER_SECONDS: Final = "OUTBOX_TAKEOVER_AFTER_SECONDS"

ENV_SWEEP_INTERVAL_SECONDS: Final = "OUTBOX_SWEEP_INTERVAL_SECONDS"
"""The sweeper's schedule (the construct sets it): the fence and margins below are counted in it."""

ENV_SWEEPER_TIMEOUT_SECONDS: Final = "OUTBOX_SWEEPER_TIMEOUT_SECONDS"
"""The sweeper function's timeout (the construct sets it): the longest a run that began can still publish."""

ENV_ORIGIN: Final = "OUTBOX_ORIGIN"
"""The writer's region, for `OutboxWriter(origin=writer_origin(os.environ))`."""

ENV_AWS_REGION: Final = "AWS_REGION"

DEFAULT_TAKEOVER_AFTER_SECONDS: Final = 600

DEFAULT_SWEEP_INTERVAL_SECONDS: Final = 60

DEFAULT_SWEEPER_TIMEOUT_SECONDS: Final = 120

MIN_REGIONS: Final = 2


SWEEPS_BEFORE_TAKEOVER: Final = 3
"""A sweeper that missed this many scheduled runs, plus one run's timeout, may still be alive: a takeover time
shorter than that would take over a region whose sweeper is only late."""


def least_takeover_after(sweep_interval: timedelta, sweeper_timeout: timedelta) -> timedelta:
    """The shortest takeover time these sweeper settings allow (the functions and the construct check it)."""
    return SWEEPS_BEFORE_TAKEOVER * sweep_interval + sweeper_timeout


@dataclass(frozen=True, slots=True)
class RegionSettings:
    """The regions of one outbox and the times its decisions count in, validated once (ConfigurationError)."""

    region: str
    regions: tuple[str, ...]
    """Ring order; the first is the home region, which owns rows saved without `origin`."""
    takeover_after: timedelta = timedelta(seconds=DEFAULT_TAKEOVER_AFTER_SECONDS)
    sweep_interval: timedelta = timedelta(seconds=DEFAULT_SWEEP_INTERVAL_SECONDS)
    sweeper_timeout: timedelta = timedelta(seconds=DEFAULT_SWEEPER_TIMEOUT_SECONDS)

    def __post_init__(self) -> None:
        for name in (self.region, *self.regions):
            if not is_region_name(name):
                raise ConfigurationError(
                    f"{name!r} is not an AWS region's name ({ENV_REGIONS}, {ENV_REGION})"
                )
        if len(set(self.regions)) != len(self.regions):
            raise ConfigurationError(f"{ENV_REGIONS} names a region twice: {','.join(self.regions)}")
        if len(self.regions) < MIN_REGIONS:
            raise ConfigurationError(
                f"{ENV_REGIONS} must name {MIN_REGIONS} regions at least; unset it for a single-region outbox"
            )
        if self.region not in self.regions:
            raise ConfigurationError(f"{ENV_REGION} {self.region} is not one of {ENV_REGIONS}")
        least = least_takeover_after(self.sweep_interval, self.sweeper_timeout)
        if self.takeover_after < least:
            raise ConfigurationError(
                f"{ENV_TAKEOVER_AFTER_SECONDS} must be at least {SWEEPS_BEFORE_TAKEOVER} x the sweep "
                f"interval + the sweeper's timeout ({int(least.total_seconds())} s)"
            )

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> RegionSettings | None:
        """The settings, or None when `OUTBOX_REGIONS` is unset (a single-region outbox)."""
        listed = optional(env, ENV_REGIONS)
        if listed is None:
            return None
        regions = tuple(name.strip() for name in listed.split(","))
        if any(not name for name in regions):
            raise ConfigurationError(f"{ENV_REGIONS} has an empty entry: {listed!r}")
        region = optional(env, ENV_REGION) or optional(env, ENV_AWS_REGION)
        if region is None:
            raise ConfigurationError(f"set {ENV_REGION} (or {ENV_AWS_REGION}) with {ENV_REGIONS}")
        second = timedelta(seconds=1)
        return cls(
            region=region,
            regions=regions,
            takeover_after=positive_duration(
                env, ENV_TAKEOVER_AFTER_SECONDS, unit=second, default=DEFAULT_TAKEOVER_AFTER_SECONDS
            ),
            sweep_interval=positive_duration(
                env, ENV_SWEEP_INTERVAL_SECONDS, unit=second, default=DEFAULT_SWEEP_INTERVAL_SECONDS
            ),
            sweeper_timeout=positive_duration(
                env, ENV_SWEEPER_TIMEOUT_SECONDS, unit=second, default=DEFAULT_SWEEPER_TIMEOUT_SECONDS
            ),
        )

    def environment(self) -> dict[str, str]:
        """These settings as the variables `from_env` reads (the constructs set them)."""
        return {
            ENV_REGION: self.region,
            ENV_REGIONS: ",".join(self.regions),
            ENV_TAKEOVER_AFTER_SECONDS: str(int(self.takeover_after.total_seconds())),
            ENV_SWEEP_INTERVAL_SECONDS: str(int(self.sweep_interval.total_seconds())),
            ENV_SWEEPER_TIMEOUT_SECONDS: str(int(self.sweeper_timeout.total_seconds())),
        }

    @property
    def home(self) -> str:
        return self.regions[0]

    @property
    def peers(self) -> tuple[str, ...]:
        return tuple(name for name in self.regions if name != self.region)

    @property
    def fence(self) -> timedelta:
        """A region whose own last beat is older than this did not run: it was cut off, or is new."""
        return 2 * self.sweep_interval

    @property
    def margin(self) -> timedelta:
        """After a handback: the taker's last run (the sweeper's timeout) and replication settle."""
        return self.sweeper_timeout + 2 * self.sweep_interval

    def after(self, region: str) -> tuple[str, ...]:
        """The other regions in ring order, starting after `region`."""
        at = self.regions.index(region)
        return self.regions[at + 1 :] + self.regions[:at]

    def origin_region(self, origin: str | None) -> str:
        """The region a row's `origin` names; a row without one, or naming no region of the ring, is the
        home region's."""
        return origin if origin is not None and origin in self.regions else self.home


def writer_origin(env: Mapping[str, str]) -> str | None:
    """The writer's `origin` from `OUTBOX_ORIGIN` (None when unset); ConfigurationError when malformed."""
    origin = optional(env, ENV_ORIGIN)
    if origin is not None and not is_region_name(origin):
        raise ConfigurationError(f"{ENV_ORIGIN} must be an AWS region's name, got {origin!r}")
    return origin
