"""The metrics the outbox functions emit: one namespace, a `service` dimension per outbox and function,
fixed metric names.

The handlers emit them (Powertools EMF) and the CDK monitoring construct builds alarms and the dashboard
on them, both from these names: a renamed metric cannot leave an alarm watching nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

NAMESPACE: Final = "Outbox"
SERVICE_DIMENSION: Final = "service"

# Each function reads its service name from POWERTOOLS_SERVICE_NAME, which the constructs set per outbox
# (`service_name`), so two outboxes in one account and region never add up; these are the names a function
# run without it (a test, a hand-made deployment) reports under.
PUBLISHER_SERVICE: Final = "outbox-publisher"
SWEEPER_SERVICE: Final = "outbox-sweeper"

ENV_SERVICE_NAME: Final = "POWERTOOLS_SERVICE_NAME"
PUBLISHER: Final = "publisher"
SWEEPER: Final = "sweeper"


def service_name(outbox_name: str, function: str) -> str:
    """The `service` dimension of one outbox's `function` (PUBLISHER, SWEEPER): `<outbox name>-<function>`.
    An outbox's name is its dashboard's name (the stack's `DashboardName` output), so a tool that knows the
    stack knows each function's service."""
    return f"{outbox_name}-{function}"


def configured_service(env: Mapping[str, str], default: str) -> str:
    """The service a function reports under: POWERTOOLS_SERVICE_NAME as its construct set it, else
    `default` (PUBLISHER_SERVICE, SWEEPER_SERVICE)."""
    return env.get(ENV_SERVICE_NAME, "").strip() or default


# Emitted by the publisher on every invocation.
EVENTS_PUBLISHED: Final = "EventsPublished"
EVENTS_FAILED: Final = "EventsFailed"
"""Records handed back to the stream mapping (the run could not attempt them: no time, the gate's reads
failed)."""
UNDELIVERED_EVENTS: Final = "UndeliveredEvents"
"""Events a destination did not take after the retries: left PENDING for the sweeper."""
POISON_EVENTS: Final = "PoisonEvents"
RECORDS_SKIPPED: Final = "RecordsSkipped"
ROW_UPDATE_FAILURES: Final = "RowUpdateFailures"
"""Rows DynamoDB did not settle, mark FAILED or park: left PENDING, for the sweeper (a duplicate)."""
ROWS_ALREADY_MOVED: Final = "RowsAlreadyMoved"
PUBLISH_LATENCY_MS: Final = "PublishLatencyMs"
HELD_EVENTS: Final = "HeldEvents"
"""Events the order gate kept back (left PENDING for later)."""
CONFIGURATION_ERRORS: Final = "ConfigurationErrors"
"""Invocations failed because a record showed the wiring is wrong (another table, no new image)."""
WRITER_CONTRACT_VIOLATIONS: Final = "WriterContractViolations"
"""Another writer broke the row contract: a slot rewritten, an event_id reused (the publisher; the sweeper
too, for an event_id reused within its run)."""

# Emitted by the sweeper on every run, also when there is nothing to do.
OLDEST_PENDING_AGE_SECONDS: Final = "OldestPendingAgeSeconds"
PENDING_EVENTS: Final = "PendingEvents"
HELD_AGGREGATES: Final = "HeldAggregates"
"""Aggregates whose next event waits behind a FAILED one: they need an operator."""
SWEPT_EVENTS: Final = "SweptEvents"
BACKED_OFF_EVENTS: Final = "BackedOffEvents"
GAVE_UP_EVENTS: Final = "GaveUpEvents"

# Emitted by the sweeper of an outbox across regions (outbox_publisher.regions) on every run, with a `Region`
# dimension (each region's sweeper reports its own view).
REGION_DIMENSION: Final = "Region"
REGION_HEARTBEAT_AGE_SECONDS: Final = "RegionHeartbeatAgeSeconds"
"""The oldest peer heartbeat's age this region read: past the takeover time, a peer is presumed lost."""
TAKEOVER_IN_PROGRESS: Final = "TakeoverInProgress"
"""Origins this region holds for lost regions (0 while every region publishes its own)."""
LATE_REPLICA_EVENTS: Final = "LateReplicaEvents"
"""Rows marked FAILED (`LateReplica`): they replicated after a taker published a later event of their
aggregate. Each needs an operator (docs/multi-region.md, runbook)."""
TAKEN_OVER_DUPLICATES_AVOIDED: Final = "TakenOverDuplicatesAvoided"
"""Rows a taker published, found PENDING after the return (their settle had not replicated): settled without
publishing."""
