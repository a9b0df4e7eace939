"""`Outbox`: the whole pattern in one construct, in the style of the AWS Solutions Constructs.

One line in a stack of yours (`Outbox(self, "Outbox")`) gives the outbox table (with the `failed` index the
operations commands read), the publisher on its stream, the sweeper, an SNS topic and an EventBridge bus, the
two failure queues, alarms and a dashboard, the operator policy, and the stack outputs the `outbox` commands
find it by. Every part takes safe defaults; `OutboxProps` overrides them, or passes your own table, topic, bus
or alarm topic instead of the one created here. The finer constructs (`OutboxPublisher`, `OutboxSweeper`,
`OutboxMonitoring`, ...) stay for those who compose the parts themselves.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import cast

from aws_cdk import Aspects, CfnOutput, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from outbox import outputs
from outbox.region_settings import ENV_ORIGIN
from outbox_cdk import constants as c
from outbox_cdk.checkov import ServiceKeyAcknowledgements
from outbox_cdk.destinations import DestinationsProps, OutboxDestinations
from outbox_cdk.encryption import OutboxKey
from outbox_cdk.errors import OutboxConstructError
from outbox_cdk.functions import FunctionSettings, powertools_layer
from outbox_cdk.grants import grant_key_use
from outbox_cdk.monitoring import AlarmThresholds, OutboxMonitoring, RegionWatch
from outbox_cdk.naming import outbox_name_for
from outbox_cdk.operators import OperatorAccess, OutboxOperatorPolicy
from outbox_cdk.payloads import (
    OutboxPayloadBucket,
    PayloadStoreProps,
    grant_payload_reads,
    grant_payload_writes,
)
from outbox_cdk.publisher import (
    OutboxPublisher,
    PublisherSettings,
    StreamMappingProps,
    default_publisher_function,
)
from outbox_cdk.queues import FailureQueues, FailureQueuesProps
from outbox_cdk.regions import OutboxRegions
from outbox_cdk.schema_registry import OutboxSchemaRegistry, SchemaRegistryProps
from outbox_cdk.sweeper import OutboxSweeper, SweeperSettings, default_sweeper_function
from outbox_cdk.table import DataTableProps, OutboxGlobalTable, OutboxTable
from outbox_publisher.config import DEFAULT_SWEEP_GRACE_SECONDS, ENV_OUTBOX_TABLE_NAME
from outbox_publisher.messages import (
    EVENTBRIDGE_MAX_CONFIGURABLE_BYTES,
    SNS_MAX_CONFIGURABLE_BYTES,
    SNS_MIN_CONFIGURABLE_BYTES,
)
from outbox_publisher.routing import Destination, Route

# Output keys are CloudFormation logical IDs: letters and digits only.
_OUTPUTS_PREFIX = re.compile(r"^[A-Za-z0-9]*$")


@dataclass(frozen=True)
class OutboxProps:
    """Everything the pattern lets you tune; every field has a safe default."""

    # Your own outbox table (the row contract's keys, a stream with new images; `add_failed_index` for the
    # `outbox failed` commands). None: an `OutboxTable` created here, with `table_props`.
    table: dynamodb.ITable | None = None
    table_props: DataTableProps | None = None
    # What is created here: an SNS topic and an EventBridge bus by default, either or both.
    destinations: DestinationsProps = field(default_factory=DestinationsProps)
    # Your own topic or bus, used instead of the one `destinations` would create.
    topic: sns.ITopic | None = None
    event_bus: events.IEventBus | None = None
    queues: FailureQueuesProps = field(default_factory=FailureQueuesProps)
    stream: StreamMappingProps = field(default_factory=StreamMappingProps)
    # The publisher's routing (outbox_publisher.routing); none: every event to every destination.
    routes: Sequence[Route] = ()
    default_destinations: Sequence[Destination] | None = None
    # Age at which the sweeper takes a PENDING row the stream has not published.
    sweep_grace_seconds: int = DEFAULT_SWEEP_GRACE_SECONDS
    # Sizing of the publisher function. None: 512 MB, 60 s.
    publisher_function: FunctionSettings | None = None
    sweeper: SweeperSettings = field(default_factory=SweeperSettings)
    # An existing topic (e.g. your on-call topic) for every alarm action; None creates one.
    alarm_topic: sns.ITopic | None = None
    alarm_thresholds: AlarmThresholds = field(default_factory=AlarmThresholds)
    operator_access: OperatorAccess = OperatorAccess.OPERATOR
    # One customer-managed key (`OutboxKey`, created here) for the table, queues, topic, bus, archive, alarm
    # topic and log groups. False: AWS's own keys, as each part defaults to.
    customer_managed_key: bool = False
    # Or a key of yours for all of them; its policy must let the AWS services use it
    # (`outbox_cdk.encryption.allow_outbox_services`).
    encryption_key: kms.IKey | None = None
    # Names the metrics' `service`, the alarms and the dashboard (outbox_cdk.naming). None: the stack's name
    # and the construct's path, so two stacks or two outboxes in one stack never share it.
    outbox_name: str | None = None
    # Prefix of every stack output written here: a second outbox in one stack needs its own
    # (`outbox status --outbox PREFIX` selects it).
    outputs_prefix: str = ""
    # Schemas: publish the writer's schema files to an EventBridge schema registry for consumers to
    # discover (outbox_cdk.schema_registry). None: no registry.
    schema_registry: SchemaRegistryProps | None = None
    # --- Large payloads (outbox_cdk.payloads; docs/contracts.md, "Claim checks") ---
    # A payload store: envelopes larger than its threshold go to S3 (your bucket or one created here), the
    # row names them. None: every row holds its payload (DynamoDB's 400 KB item limit).
    payloads: PayloadStoreProps | None = None
    # The created topic's MaximumMessageSize (1,024 to 1,048,576; None: SNS's 262,144), which the publisher
    # is told; above 256 KiB a topic takes only SQS, Lambda and Firehose subscriptions, at most 100. With a
    # topic of yours, its size as you set it.
    topic_max_message_bytes: int | None = None
    # PutEvents' entry limit (None: the API reference's 262,144; the AWS Compute Blog reports 1 MB).
    eventbridge_max_entry_bytes: int | None = None
    # --- One outbox across regions (outbox_cdk.regions; docs/deploy.md, "Several regions") ---
    # The home region, the replica regions and the takeover time. In the home region's stack the outbox
    # table becomes a global table with a replica in each; each replica region's stack holds an
    # `OutboxReplica` (outbox_cdk.replica). None: one region, as before.
    regions: OutboxRegions | None = None

    def __post_init__(self) -> None:
        if self.regions is not None:
            self.regions.refuse_unsupported(
                customer_key=self.customer_managed_key or self.encryption_key is not None,
                payloads=self.payloads is not None,
            )
        if self.table is not None and self.table_props is not None:
            raise OutboxConstructError(
                "pass either table (your own) or table_props (for the one created here), not both"
            )
        if self.customer_managed_key and self.encryption_key is not None:
            raise OutboxConstructError(
                "pass either customer_managed_key=True (a key created here) or encryption_key (yours), "
                "not both"
            )
        size = self.topic_max_message_bytes
        if size is not None and not SNS_MIN_CONFIGURABLE_BYTES <= size <= SNS_MAX_CONFIGURABLE_BYTES:
            raise OutboxConstructError(
                f"topic_max_message_bytes must be between {SNS_MIN_CONFIGURABLE_BYTES} and "
                f"{SNS_MAX_CONFIGURABLE_BYTES}"
            )
        entry = self.eventbridge_max_entry_bytes
        if entry is not None and not 0 < entry <= EVENTBRIDGE_MAX_CONFIGURABLE_BYTES:
            raise OutboxConstructError(
                f"eventbridge_max_entry_bytes must be between 1 and {EVENTBRIDGE_MAX_CONFIGURABLE_BYTES}"
            )
        if not _OUTPUTS_PREFIX.match(self.outputs_prefix):
            raise OutboxConstructError(
                f"outputs_prefix {self.outputs_prefix!r} must be letters and digits only: it begins each "
                "output's key, a CloudFormation logical ID"
            )


def under_key(props: OutboxProps, key: kms.IKey) -> OutboxProps:
    """`props` with everything the outbox keeps at rest under `key`: each part takes it where it creates
    something that holds data (the monitoring takes it for the alarm topic it creates)."""

    def functions_under_key(settings: FunctionSettings) -> FunctionSettings:
        return replace(settings, encryption_key=key)

    return replace(
        props,
        table_props=(
            None
            if props.table is not None
            else replace(props.table_props or DataTableProps(), encryption_key=key)
        ),
        queues=replace(props.queues, encryption_key=key),
        payloads=(
            replace(props.payloads, encryption_key=key)
            if props.payloads is not None and props.payloads.bucket is None
            else props.payloads
        ),
        destinations=replace(props.destinations, encryption_key=key),
        publisher_function=functions_under_key(props.publisher_function or default_publisher_function()),
        sweeper=replace(
            props.sweeper, function=functions_under_key(props.sweeper.function or default_sweeper_function())
        ),
    )


class Outbox(Construct):
    """The Transactional Outbox on DynamoDB Streams: table, publisher, sweeper, destinations, failure queues,
    monitoring, operator policy and the stack outputs the `outbox` commands read.

    Give a writer function of yours what the library's writer needs: ``outbox.grant_write(function)`` and
    ``outbox.writer_environment`` (the table's name under ``OUTBOX_TABLE_NAME``; with regions, the writer's
    region under ``OUTBOX_ORIGIN``).
    """

    def __init__(self, scope: Construct, construct_id: str, props: OutboxProps | None = None) -> None:
        super().__init__(scope, construct_id)
        # A user who scans their app with checkov sees why each of its findings on what is built here does
        # not apply (outbox_cdk.checkov).
        Aspects.of(self).add(ServiceKeyAcknowledgements())
        props = props or OutboxProps()
        self.outputs_prefix = props.outputs_prefix
        _claim_outputs(self, props.outputs_prefix)
        self.outbox_name = outbox_name_for(self, props.outbox_name)
        self.key: kms.IKey | None = props.encryption_key
        if props.customer_managed_key:
            # Kept on stack deletion like the table: without it, what the table retains could not be read.
            retain = (props.table_props or DataTableProps()).retain_data
            self.key = OutboxKey(self, "Key", retain=retain).key
        if self.key is not None:
            props = under_key(props, self.key)
        layer = powertools_layer(self)

        self.regions = props.regions
        self.region: str | None = None
        """The stack's region, with regions configured."""
        self.global_table_name: str | None = None
        """The global table's name (with regions): what each replica region's `OutboxReplica` takes."""
        if props.regions is not None:
            sweeper = props.sweeper
            self.region = props.regions.check_stack(
                self,
                table_given=props.table is not None,
                schedule=sweeper.schedule,
                timeout=(sweeper.function or default_sweeper_function()).timeout,
            )
        self.table: dynamodb.ITable = props.table or self._create_table(props)
        self.destinations: OutboxDestinations | None = None
        create_topic = props.destinations.topic and props.topic is None
        create_bus = props.destinations.event_bus and props.event_bus is None
        if create_topic or create_bus:
            self.destinations = OutboxDestinations(
                self, "Destinations", replace(props.destinations, topic=create_topic, event_bus=create_bus)
            )
        created = self.destinations
        self.topic: sns.ITopic | None = props.topic or (created.topic if created else None)
        self.event_bus: events.IEventBus | None = props.event_bus or (created.event_bus if created else None)
        self.event_source = props.destinations.event_source
        if created is not None and created.topic is not None and props.topic_max_message_bytes is not None:
            cfn_topic = cast(sns.CfnTopic, created.topic.node.default_child)
            cfn_topic.maximum_message_size = props.topic_max_message_bytes
        self.payloads: OutboxPayloadBucket | None = (
            OutboxPayloadBucket(self, "Payloads", props.payloads) if props.payloads is not None else None
        )
        self.payload_bucket: s3.IBucket | None = self.payloads.bucket if self.payloads is not None else None
        self.failure_queues = FailureQueues(self, "FailureQueues", props.queues)
        self.poison_queue: sqs.IQueue = self.failure_queues.poison_queue
        self.on_failure_queue: sqs.IQueue = self.failure_queues.on_failure_queue
        self.publisher = OutboxPublisher(
            self,
            "Publisher",
            table=self.table,
            topic=self.topic,
            event_bus=self.event_bus,
            poison_queue=self.poison_queue,
            on_failure_queue=self.on_failure_queue,
            settings=PublisherSettings(
                event_source=self.event_source,
                routes=props.routes,
                default_destinations=props.default_destinations,
                sweep_grace_seconds=props.sweep_grace_seconds,
                stream=props.stream,
                function=props.publisher_function,
                topic_max_message_bytes=props.topic_max_message_bytes,
                eventbridge_max_entry_bytes=props.eventbridge_max_entry_bytes,
                regions=props.regions,
                sweep_schedule=props.sweeper.schedule,
                sweeper_timeout=(props.sweeper.function or default_sweeper_function()).timeout,
            ),
            powertools_layer=layer,
            outbox_name=self.outbox_name,
            payload_bucket=self.payload_bucket,
        )
        self.sweeper = OutboxSweeper(
            self, "Sweeper", publisher=self.publisher, settings=props.sweeper, powertools_layer=layer
        )
        self.monitoring = OutboxMonitoring(
            self,
            "Monitoring",
            publisher_function=self.publisher.function,
            sweeper_function=self.sweeper.function,
            poison_queue=self.poison_queue,
            on_failure_queue=self.on_failure_queue,
            alarm_topic=props.alarm_topic,
            thresholds=props.alarm_thresholds,
            encryption_key=self.key,
            outbox_name=self.outbox_name,
            region=(
                RegionWatch(self.region, props.regions.takeover_after_seconds)
                if props.regions is not None and self.region is not None
                else None
            ),
        )
        self.alarm_topic: sns.ITopic = self.monitoring.alarm_topic
        # Attach it to the role your operators assume to run `outbox redrive` / `skip` (docs/operations.md).
        self.operator_policy = OutboxOperatorPolicy(
            self, "OperatorPolicy", publisher=self.publisher, access=props.operator_access
        )
        self.schema_registry: OutboxSchemaRegistry | None = None
        if props.schema_registry is not None:
            self.schema_registry = OutboxSchemaRegistry(self, "SchemaRegistry", props.schema_registry)
        self.outputs: dict[str, CfnOutput] = self._outputs()

    def _create_table(self, props: OutboxProps) -> dynamodb.ITable:
        if props.regions is None:
            return OutboxTable(self, "Table", props.table_props)
        self.global_table_name = props.regions.table_name or f"{self.outbox_name}-table"
        return OutboxGlobalTable(
            self,
            "Table",
            props.table_props,
            replica_regions=props.regions.replicas,
            table_name=self.global_table_name,
        )

    @property
    def writer_environment(self) -> Mapping[str, str]:
        """The environment a writer function needs: the outbox table's name under the variable the library's
        functions read (``OUTBOX_TABLE_NAME``), and with a payload store its bucket, prefix and threshold
        (outbox.s3_payloads.PayloadStoreConfig)."""
        environment = {ENV_OUTBOX_TABLE_NAME: self.table.table_name}
        if self.region is not None:
            # With regions, the writer stamps each row with its region (outbox.OutboxWriter's origin).
            environment[ENV_ORIGIN] = self.region
        if self.payloads is not None:
            environment.update(self.payloads.writer_environment)
        return environment

    def grant_write(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let `grantee` append outbox rows (`outbox.OutboxWriter`: a conditional Put in its transaction)
        and nothing else: ``dynamodb:PutItem`` on the table, and the key's few actions when it has one; with a
        payload store, ``s3:PutObject`` on its envelopes."""
        grant = iam.Grant.add_to_principal(
            grantee=grantee, actions=list(c.WRITER_TABLE_ACTIONS), resource_arns=[self.table.table_arn]
        )
        grant_key_use(grantee, self.table.encryption_key, c.TABLE_KEY_ACTIONS, via=c.VIA_DYNAMODB)
        if self.payload_bucket is not None:
            grant_payload_writes(grantee, self.payload_bucket)
        return grant

    def grant_read_payloads(self, grantee: iam.IGrantable) -> None:
        """Let a consumer of yours resolve claim checks (`outbox_inbox.envelope_of`): read the stored
        envelopes, nothing else. Nothing to grant without a payload store."""
        if self.payload_bucket is not None:
            grant_payload_reads(grantee, self.payload_bucket)

    def _outputs(self) -> dict[str, CfnOutput]:
        described: dict[str, tuple[str, str]] = {
            outputs.OUTBOX_TABLE_NAME: (self.table.table_name, "Outbox table"),
            # The publisher refuses a table without a stream (outbox_cdk.table.check_outbox_table).
            outputs.OUTBOX_TABLE_STREAM_ARN: (
                str(self.table.table_stream_arn),
                "Stream of the Outbox table (the publisher's event source)",
            ),
        }
        if self.topic is not None:
            described[outputs.TOPIC_ARN] = (self.topic.topic_arn, "SNS topic events are published to")
        if self.event_bus is not None:
            described[outputs.EVENT_BUS_NAME] = (
                self.event_bus.event_bus_name,
                "EventBridge bus events are put on",
            )
            described[outputs.EVENT_SOURCE] = (self.event_source, "EventBridge Source of every outbox event")
        described.update(
            {
                outputs.POISON_QUEUE_URL: (
                    self.poison_queue.queue_url,
                    "Full events that can never be published",
                ),
                outputs.ON_FAILURE_QUEUE_URL: (
                    self.on_failure_queue.queue_url,
                    "Stream batches the mapping gave up on (metadata only)",
                ),
                outputs.ALARM_TOPIC_ARN: (self.alarm_topic.topic_arn, "Topic every alarm notifies"),
                outputs.PUBLISHER_FUNCTION_NAME: (
                    self.publisher.function.function_name,
                    "Outbox publisher function",
                ),
                outputs.SWEEPER_FUNCTION_NAME: (
                    self.sweeper.function.function_name,
                    "Outbox sweeper function (scheduled)",
                ),
                outputs.DASHBOARD_NAME: (
                    self.monitoring.dashboard.dashboard_name,
                    "CloudWatch dashboard (its name is the outbox's name, which begins its metrics' service "
                    "names)",
                ),
                outputs.OPERATOR_POLICY_ARN: (
                    self.operator_policy.managed_policy_arn,
                    "Managed policy for the roles that run `outbox` operations on this outbox",
                ),
            }
        )
        if self.regions is not None:
            described[outputs.OUTBOX_REGIONS] = (
                ",".join(self.regions.ring),
                "The outbox's regions in ring order, home first",
            )
            described[outputs.TAKEOVER_AFTER_SECONDS] = (
                str(self.regions.takeover_after_seconds),
                "Seconds a region's heartbeat may be silent before another region takes its rows over",
            )
        # Direct children of the stack, so each logical ID is exactly the documented name (prefixed).
        stack = Stack.of(self)
        return {
            name: CfnOutput(stack, f"{self.outputs_prefix}{name}", value=value, description=description)
            for name, (value, description) in described.items()
        }


def _claim_outputs(outbox: Outbox, prefix: str) -> None:
    """Refuse, before anything is built, an outbox whose outputs another already wrote in this stack."""
    stack = Stack.of(outbox)
    taken = [
        name
        for name in (*outputs.OUTBOX_OUTPUTS, *outputs.REGION_OUTPUTS)
        if stack.node.try_find_child(f"{prefix}{name}") is not None
    ]
    if taken:
        shown = f"{prefix!r}" if prefix else "no prefix"
        raise OutboxConstructError(
            f"the outbox at {outbox.node.path} would write outputs that stack {stack.stack_name} already "
            f"has ({prefix}{taken[0]}, ...): another outbox there uses {shown}; give each outbox in one "
            "stack its own outputs_prefix (OutboxProps(outputs_prefix=...)), which "
            "`outbox <command> --outbox PREFIX` selects"
        )
