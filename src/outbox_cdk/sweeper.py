"""The outbox sweeper: a scheduled Lambda that publishes what the stream did not (outbox_sweeper).

`OutboxSweeper` is built from an `OutboxPublisher`: it publishes with the very same configuration (table,
topic, bus, routes, event source, grace, poison queue), so an event is announced the same way
whichever path publishes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from aws_cdk import Duration, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from outbox import metrics
from outbox.errors import ConfigurationError
from outbox_cdk import constants as c
from outbox_cdk.checkov import Invocation, acknowledge_aws_apis_only
from outbox_cdk.errors import OutboxConstructError
from outbox_cdk.functions import FunctionSettings, PythonFunction
from outbox_cdk.grants import grant_publishing
from outbox_cdk.payloads import grant_payload_reads
from outbox_cdk.publisher import OutboxPublisher
from outbox_sweeper.config import SweepSettings


def default_sweeper_function() -> FunctionSettings:
    # No reserved concurrency needed: runs that overlap never take each other's rows (each owns its leases),
    # and reserving would fail in accounts at the minimum unreserved concurrency.
    return FunctionSettings(
        memory_mb=c.SWEEPER_MEMORY_MB, timeout=Duration.seconds(c.SWEEPER_TIMEOUT_SECONDS)
    )


@dataclass(frozen=True)
class SweeperSettings:
    """How often and how the sweeper sweeps; every field has a safe default."""

    # EventBridge's rate: whole minutes, at least one.
    schedule: Duration = field(default_factory=lambda: Duration.minutes(c.SWEEP_SCHEDULE_MINUTES))
    # Rows per run, segments swept in parallel, backoff and the cutoffs after which a row that keeps failing
    # becomes FAILED.
    sweep: SweepSettings = field(default_factory=SweepSettings)
    # Sizing of the function. None: 512 MB, 120 s.
    function: FunctionSettings | None = None

    def __post_init__(self) -> None:
        minutes = self.schedule.to_seconds() / 60
        if minutes < 1 or minutes != int(minutes):
            raise OutboxConstructError("the sweep schedule must be a whole number of minutes, at least 1")
        timeout = (self.function or default_sweeper_function()).timeout.to_seconds()
        if timeout < c.SWEEPER_MIN_TIMEOUT_SECONDS:
            raise OutboxConstructError(
                f"the sweeper's timeout must be at least {c.SWEEPER_MIN_TIMEOUT_SECONDS} s: a run keeps 30 s "
                "after reading the table and the publishing engine's margin at the end"
            )


class OutboxSweeper(Construct):
    """The sweeper Lambda, its schedule, and exactly the permissions it uses.

    The role may: ``Scan`` the table, ``GetItem`` and ``PutItem`` on it (its saved position, kept in the
    table), ``BatchGetItem``, ``DeleteItem`` and ``UpdateItem`` (predecessors' states, settling, claims,
    backoff, FAILED marks, adding FAILED rows to the failed index); ``sns:Publish`` on the topic,
    ``events:PutEvents`` on the bus, ``sqs:SendMessage`` on the poison queue; and the few key actions on
    customer-managed keys of the table and the poison queue. With regions, also ``BatchGetItem`` on the
    table's replica in each other region of the ring (the takers' `#taken#` records, read where they wrote
    them).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        publisher: OutboxPublisher,
        settings: SweeperSettings | None = None,
        powertools_layer: lambda_.ILayerVersion | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        settings = settings or SweeperSettings()
        _check_regional_timing(publisher, settings)
        self.publisher = publisher
        self.service = metrics.service_name(publisher.outbox_name, metrics.SWEEPER)
        try:
            sweep_environment = settings.sweep.environment()
        except ConfigurationError as error:
            raise OutboxConstructError(f"sweeper: {error}") from None
        environment = {
            **publisher.environment,
            **sweep_environment,
            c.ENV_POWERTOOLS_SERVICE_NAME: self.service,
        }
        self.function: lambda_.Function = PythonFunction(
            self,
            "Sweeper",
            handler=c.SWEEPER_HANDLER,
            description="Outbox sweeper: publishes rows left PENDING, in order per aggregate",
            environment=environment,
            settings=settings.function or default_sweeper_function(),
            layer=powertools_layer,
            invocation=Invocation.SCHEDULE,
        ).function
        acknowledge_aws_apis_only(self.function)
        # A failed run is not retried by Lambda: the next scheduled run does it (and a retry would overlap).
        self.function.configure_async_invoke(retry_attempts=0)
        self._grant()
        # One target per segment of the table, each invoking the sweeper for its segment (`{"segment": n}`),
        # so the segments are swept in parallel; as many rules as that takes.
        segment_targets = [
            targets.LambdaFunction(
                self.function,
                retry_attempts=0,
                event=events.RuleTargetInput.from_object({"segment": segment}),
            )
            for segment in range(settings.sweep.segments)
        ]
        per_rule = c.SCHEDULE_TARGETS_PER_RULE
        self.schedules = [
            events.Rule(
                self,
                "Schedule" if start == 0 else f"Schedule{start // per_rule}",
                description="Runs the outbox sweeper",
                schedule=events.Schedule.rate(settings.schedule),
                targets=segment_targets[start : start + per_rule],
            )
            for start in range(0, len(segment_targets), per_rule)
        ]
        self.schedule = self.schedules[0]

    def _grant(self) -> None:
        publisher = self.publisher
        table = publisher.table
        grant_publishing(
            self.function,
            [
                (c.SWEEPER_OUTBOX_TABLE_ACTIONS, table.table_arn),
                (c.QUEUE_SEND_ACTIONS, publisher.poison_queue.queue_arn),
            ],
            topic=publisher.topic,
            event_bus=publisher.event_bus,
            keys=[
                (table.encryption_key, c.TABLE_KEY_ACTIONS, c.VIA_DYNAMODB),
                (publisher.poison_queue.encryption_master_key, c.QUEUE_KEY_ACTIONS, c.VIA_SQS),
            ],
        )
        if publisher.payload_bucket is not None:
            grant_payload_reads(self.function, publisher.payload_bucket)
        regions = publisher.settings.regions
        if regions is not None and publisher.region is not None:
            # The `#taken#` records a taker wrote, read in its own replica (docs/multi-region.md): read
            # only, on the table's replica in each other region of the ring, nothing else there.
            stack = Stack.of(self)
            peers = [region for region in regions.ring if region != publisher.region]
            self.function.add_to_role_policy(
                iam.PolicyStatement(
                    actions=list(c.SWEEPER_PEER_REPLICA_ACTIONS),
                    resources=[
                        stack.format_arn(
                            service="dynamodb", region=peer, resource="table", resource_name=table.table_name
                        )
                        for peer in peers
                    ],
                )
            )


def _check_regional_timing(publisher: OutboxPublisher, settings: SweeperSettings) -> None:
    """With regions, the publisher was told this sweeper's schedule and timeout (the region decisions of both
    functions count in them): refuse a sweeper that differs."""
    told = publisher.settings
    if told.regions is None:
        return
    timeout = (settings.function or default_sweeper_function()).timeout
    if (told.sweep_schedule.to_seconds(), told.sweeper_timeout.to_seconds()) != (
        settings.schedule.to_seconds(),
        timeout.to_seconds(),
    ):
        raise OutboxConstructError(
            "regions: the publisher's settings (sweep_schedule, sweeper_timeout) must be this sweeper's "
            f"schedule ({int(settings.schedule.to_seconds())} s) and timeout "
            f"({int(timeout.to_seconds())} s): both functions count the region decisions in them"
        )
