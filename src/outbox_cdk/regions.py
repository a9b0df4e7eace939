"""One outbox across regions (DynamoDB global tables): the regions an outbox spans, checked at synth, and the
one place the functions' region settings come from.

`OutboxRegions` names the home region (which owns rows saved without `origin`), the replica regions (ring
order after home) and the takeover time. The `Outbox` construct in the home region's stack makes the outbox
table a global table with those replicas; `OutboxReplica` (outbox_cdk.replica) deploys the publisher, the
sweeper and their destinations in each replica region's stack. The model: docs/multi-region.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from aws_cdk import Duration, Stack, Token
from constructs import Construct

from outbox.event_rules import is_region_name
from outbox.region_settings import (
    DEFAULT_TAKEOVER_AFTER_SECONDS,
    SWEEPS_BEFORE_TAKEOVER,
    RegionSettings,
    least_takeover_after,
)
from outbox.stream_mapping import publisher_filter_patterns
from outbox_cdk.errors import OutboxConstructError


@dataclass(frozen=True)
class OutboxRegions:
    """The regions one outbox spans, in ring order: `home` first, then `replicas`.

    `takeover_after`: how long a region's heartbeat may be silent before the next region in the ring takes
    its rows over (docs/multi-region.md, "The takeover time"); at least 3 sweep intervals plus the sweeper's
    timeout (checked by the `Outbox` construct, which knows both).
    `table_name`: the global table's name, the same in every region; a replica region's stack finds its
    replica by it (a name in another region's stack cannot be referenced). None: `<outbox name>-table` of
    the home stack's outbox.
    """

    home: str
    replicas: Sequence[str]
    takeover_after: Duration = field(default_factory=lambda: Duration.seconds(DEFAULT_TAKEOVER_AFTER_SECONDS))
    table_name: str | None = None

    def __post_init__(self) -> None:
        # A tuple, so that the dataclass stays hashable and nothing shares a caller's list.
        object.__setattr__(self, "replicas", tuple(self.replicas))
        for region in self.ring:
            if Token.is_unresolved(region) or not is_region_name(region):
                raise OutboxConstructError(
                    f"regions: {region!r} is not a region name (like us-east-1): each region of a global "
                    "table is named in the template"
                )
        if not self.replicas:
            raise OutboxConstructError(
                "regions: name at least one replica region besides home (without replicas, leave "
                "OutboxProps.regions unset: a single-region outbox)"
            )
        if len(set(self.ring)) != len(self.ring):
            raise OutboxConstructError(
                f"regions: home and replicas must be distinct regions, got {', '.join(self.ring)}"
            )
        if Token.is_unresolved(self.takeover_after.to_seconds()) or self.takeover_after.to_seconds() < 1:
            raise OutboxConstructError("regions: takeover_after must be a concrete duration of at least 1 s")

    @property
    def ring(self) -> tuple[str, ...]:
        """Every region, home first: the order in which a lost region's rows pass to the next."""
        return (self.home, *self.replicas)

    @property
    def takeover_after_seconds(self) -> int:
        return int(self.takeover_after.to_seconds())

    def check_sweeper(self, schedule: Duration, timeout: Duration) -> None:
        """Refuse a takeover time a merely late sweeper could reach: a region is presumed lost after it, so
        it must exceed several missed runs (`SWEEPS_BEFORE_TAKEOVER` x the schedule) and one run's timeout."""
        least = least_takeover_after(
            timedelta(seconds=schedule.to_seconds()), timedelta(seconds=timeout.to_seconds())
        ).total_seconds()
        if self.takeover_after.to_seconds() < least:
            raise OutboxConstructError(
                f"regions: takeover_after is {self.takeover_after_seconds} s; it must be at least "
                f"{SWEEPS_BEFORE_TAKEOVER} x the sweep schedule ({int(schedule.to_seconds())} s) + the "
                f"sweeper's timeout ({int(timeout.to_seconds())} s) = {int(least)} s, or a late sweeper's "
                "region would be taken over while it still publishes"
            )

    def region_of(self, scope: Construct) -> str:
        """The concrete region of `scope`'s stack, which must be one of these regions."""
        stack = Stack.of(scope)
        region = stack.region
        if Token.is_unresolved(region):
            raise OutboxConstructError(
                f"regions: stack {stack.stack_name} has no concrete region; a multi-region outbox's stacks "
                f"each need one (Stack(..., env=Environment(region='{self.home}')))"
            )
        if region not in self.ring:
            raise OutboxConstructError(
                f"regions: stack {stack.stack_name} is in {region}, not one of this outbox's regions "
                f"({', '.join(self.ring)})"
            )
        return region

    def check_stack(
        self, scope: Construct, *, table_given: bool, schedule: Duration, timeout: Duration
    ) -> str:
        """The region of an `Outbox` in `scope`, checked: the home region's creates the global table, a
        replica region's is given the replica (`OutboxReplica`); the sweeper's schedule and timeout fit the
        takeover time (`check_sweeper`)."""
        region = self.region_of(scope)
        self.check_sweeper(schedule, timeout)
        if region == self.home and table_given:
            raise OutboxConstructError(
                "regions: in the home region the outbox creates the global table itself (its replicas are "
                "the regions'); leave table unset"
            )
        if region != self.home and not table_given:
            raise OutboxConstructError(
                f"regions: stack {Stack.of(scope).stack_name} is in replica region {region}: use "
                "OutboxReplica there (outbox_cdk.replica), which finds the replica of the home region's table"
            )
        return region

    @staticmethod
    def refuse_unsupported(*, customer_key: bool, payloads: bool) -> None:
        """What a multi-region outbox does not support yet, refused with why."""
        if customer_key:
            raise OutboxConstructError(
                "regions: a customer-managed key is not supported with regions yet (each replica region "
                "needs a key of its own, which one stack cannot create): leave customer_managed_key and "
                "encryption_key unset, AWS's managed keys then encrypt every region"
            )
        if payloads:
            raise OutboxConstructError(
                "regions: a payload store is not supported with regions yet (its bucket is in one region, "
                "where another region's publisher taking its rows over could not read it): leave payloads "
                "unset"
            )

    def function_environment(
        self, region: str, *, sweep_interval: Duration, sweeper_timeout: Duration
    ) -> dict[str, str]:
        """What the publisher and the sweeper of `region` are configured with (outbox.region_settings), the
        sweeper's schedule and timeout included: both functions decide with the same figures."""
        self.check_sweeper(sweep_interval, sweeper_timeout)
        return RegionSettings(
            region=region,
            regions=tuple(self.ring),
            takeover_after=timedelta(seconds=self.takeover_after_seconds),
            sweep_interval=timedelta(seconds=sweep_interval.to_seconds()),
            sweeper_timeout=timedelta(seconds=sweeper_timeout.to_seconds()),
        ).environment()

    def filter_patterns(self, region: str) -> tuple[Mapping[str, object], ...]:
        """The publisher mapping's filter patterns in `region`: foreign-origin INSERTs filtered out."""
        return publisher_filter_patterns(region=region, home=region == self.home)
