"""One outbox across regions (DynamoDB global tables): the regions an outbox spans, checked at synth, and the
one place the functions' region settings come from.

`OutboxRegions` names the home region (which owns rows saved without `origin`), the replica regions (ring
order after home) and the takeover time. The `Outbox` construct in the home region's stack makes the outbox
table a global table with those replicas; `OutboxReplica` (outbox_cdk.replica) deploys the publisher, the
sweeper and their destinations in each replica region's stack. The model: docs/multi-region.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from aws_cdk import Duration, Stack, Token
from constructs import Construct

from outbox import stream_mapping as mapping
from outbox_cdk.errors import OutboxConstructError

# --- Names the functions read (outbox.regions.RegionSettings.from_env) ----------------------------
# STAND-IN until `outbox.regions` lands on main (issue 34, core): the lead imports them from there at merge.
ENV_OUTBOX_REGION: Final = "OUTBOX_REGION"
ENV_OUTBOX_REGIONS: Final = "OUTBOX_REGIONS"
ENV_OUTBOX_TAKEOVER_AFTER_SECONDS: Final = "OUTBOX_TAKEOVER_AFTER_SECONDS"
# The sweeper's schedule and timeout: the decisions' fence and margins count in them.
ENV_OUTBOX_SWEEP_INTERVAL_SECONDS: Final = "OUTBOX_SWEEP_INTERVAL_SECONDS"
ENV_OUTBOX_SWEEPER_TIMEOUT_SECONDS: Final = "OUTBOX_SWEEPER_TIMEOUT_SECONDS"
# The writer's (outbox.OutboxWriter's `origin`): the region whose writer saved the row.
ENV_OUTBOX_ORIGIN: Final = "OUTBOX_ORIGIN"
DEFAULT_TAKEOVER_AFTER_SECONDS: Final = 600
# The sweeper's region metrics (outbox.metrics; STAND-IN names as above), each with a `Region` dimension
# besides Powertools' `service`.
REGION_HEARTBEAT_AGE_SECONDS: Final = "RegionHeartbeatAgeSeconds"
TAKEOVER_IN_PROGRESS: Final = "TakeoverInProgress"
REGION_DIMENSION: Final = "Region"
# A sweeper that missed this many scheduled runs, plus one run's timeout, may still be alive: a takeover time
# shorter than that would take over a region whose sweeper is only late.
SWEEPS_BEFORE_TAKEOVER: Final = 3

# aws, aws-cn, aws-us-gov, ... region names: letters and digits between dashes (us-east-1, cn-north-1).
_REGION = re.compile(r"^[a-z]{2}(-[a-z0-9]+)+-\d+$")


@dataclass(frozen=True)
class OutboxRegions:
    """The regions one outbox spans, in ring order: `home` first, then `replicas`.

    `takeover_after`: how long a region's heartbeat may be silent before the next region in the ring takes
    its rows over (docs/multi-region.md, "The takeover time"); at least 3 sweep intervals plus the sweeper's
    timeout (checked by the `Outbox` construct, which knows both).
    `table_name`: the global table's name, the same in every region; a replica region's stack finds its
    replica by it (a name in another region's stack cannot be referenced). None: `<outbox name>-outbox` of
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
            if Token.is_unresolved(region) or not _REGION.match(region):
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
        least = SWEEPS_BEFORE_TAKEOVER * schedule.to_seconds() + timeout.to_seconds()
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
        """What the publisher and the sweeper of `region` are configured with (outbox.regions), the sweeper's
        schedule and timeout included: both functions decide with the same figures."""
        self.check_sweeper(sweep_interval, sweeper_timeout)
        return {
            ENV_OUTBOX_REGION: region,
            ENV_OUTBOX_REGIONS: ",".join(self.ring),
            ENV_OUTBOX_TAKEOVER_AFTER_SECONDS: str(self.takeover_after_seconds),
            ENV_OUTBOX_SWEEP_INTERVAL_SECONDS: str(int(sweep_interval.to_seconds())),
            ENV_OUTBOX_SWEEPER_TIMEOUT_SECONDS: str(int(sweeper_timeout.to_seconds())),
        }

    def filter_patterns(self, region: str) -> tuple[Mapping[str, object], ...]:
        """The publisher mapping's filter patterns in `region`: foreign-origin INSERTs filtered out."""
        return publisher_filter_patterns(region=region, home=region == self.home)


# ------------------------------------------------------------------------------------------------------
# STAND-IN for `outbox.stream_mapping.publisher_filter_patterns` (issue 34, core), same signature: the lead
# replaces this with an import at merge. The patterns follow the brief: the INSERT pattern carries `origin`
# (the home region's also passes rows without `origin`, which belong to home); the MODIFY pattern (a pending
# row rewritten: the writer contract) is unchanged.
def publisher_filter_patterns(
    region: str | None = None, *, home: bool = False
) -> tuple[Mapping[str, object], ...]:
    if region is None:
        return mapping.PUBLISHER_FILTER_PATTERNS
    insert, *others = mapping.PUBLISHER_FILTER_PATTERNS
    own: dict[str, object] = {**insert, "dynamodb": {"NewImage": {"origin": {"S": [region]}}}}
    patterns: list[Mapping[str, object]] = [own]
    if home:
        # `exists` applies to leaves only: on `origin` itself (a node holding {"S": ...}) `false` would match
        # every row; on `origin.S` it matches exactly the rows without an origin.
        patterns.append({**insert, "dynamodb": {"NewImage": {"origin": {"S": [{"exists": False}]}}}})
    return (*patterns, *others)
