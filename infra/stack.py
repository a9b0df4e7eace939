"""OutboxStack: the sample app, composed of the reusable outbox constructs and the sample's own parts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import Construct

from infra.constants import STACK_ID
from infra.consumers import SampleConsumers
from infra.orders_api import OrdersApi, OrdersApiSettings
from infra.tables import SampleTables
from outbox import outputs
from outbox_cdk.destinations import DestinationsProps, OutboxDestinations
from outbox_cdk.encryption import OutboxKey
from outbox_cdk.errors import OutboxConstructError
from outbox_cdk.functions import FunctionSettings, powertools_layer
from outbox_cdk.monitoring import AlarmThresholds, OutboxMonitoring
from outbox_cdk.operators import OutboxOperatorPolicy
from outbox_cdk.publisher import (
    OutboxPublisher,
    PublisherSettings,
    StreamMappingProps,
    default_publisher_function,
)
from outbox_cdk.queues import FailureQueues, FailureQueuesProps
from outbox_cdk.sweeper import OutboxSweeper, SweeperSettings, default_sweeper_function
from outbox_cdk.table import DataTableProps
from outbox_publisher.config import DEFAULT_SWEEP_GRACE_SECONDS
from outbox_publisher.routing import Destination, Route


@dataclass(frozen=True)
class OutboxStackProps:
    """Everything a deployer can tune; every field has a safe default."""

    tables: DataTableProps = field(default_factory=DataTableProps)
    destinations: DestinationsProps = field(default_factory=DestinationsProps)
    queues: FailureQueuesProps = field(default_factory=FailureQueuesProps)
    orders_api: OrdersApiSettings = field(default_factory=OrdersApiSettings)
    stream: StreamMappingProps = field(default_factory=StreamMappingProps)
    # The publisher's routing (outbox_publisher.routing); none: every event to every destination.
    publisher_routes: Sequence[Route] = ()
    publisher_default_destinations: Sequence[Destination] | None = None
    # Age at which the sweeper takes a PENDING row the stream has not published.
    sweep_grace_seconds: int = DEFAULT_SWEEP_GRACE_SECONDS
    sweeper: SweeperSettings = field(default_factory=SweeperSettings)
    # An existing topic (e.g. your on-call topic) for every alarm action; None creates one.
    alarm_topic_arn: str | None = None
    alarm_thresholds: AlarmThresholds = field(default_factory=AlarmThresholds)
    # Off by default in the props; the CDK app (app.py) turns it on for the demo.
    sample_consumers: bool = False
    # One customer-managed key (outbox_cdk.encryption.OutboxKey) for every table, queue, topic, log group, the
    # bus and its archive. False: AWS's own keys, as each construct defaults to.
    customer_managed_key: bool = False
    # Sizing of the publisher function. None: the construct's (512 MB, 60 s).
    publisher_function: FunctionSettings | None = None


def under_key(props: OutboxStackProps, key: kms.IKey) -> OutboxStackProps:
    """`props` with everything the stack keeps at rest under `key`: each construct takes it where it creates
    something that holds data (the monitoring and the sample consumers take it from the stack)."""

    def logs_under_key(settings: FunctionSettings) -> FunctionSettings:
        return replace(settings, log_encryption_key=key)

    return replace(
        props,
        tables=replace(props.tables, encryption_key=key),
        queues=replace(props.queues, encryption_key=key),
        destinations=replace(props.destinations, encryption_key=key),
        orders_api=replace(props.orders_api, function=logs_under_key(props.orders_api.function)),
        publisher_function=logs_under_key(props.publisher_function or default_publisher_function()),
        sweeper=replace(
            props.sweeper, function=logs_under_key(props.sweeper.function or default_sweeper_function())
        ),
    )


class OutboxStack(Stack):
    """Tables, Orders API, publisher, sweeper, destinations, failure queues, monitoring, sample consumers."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str = STACK_ID,
        *,
        props: OutboxStackProps | None = None,
        **stack_kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **stack_kwargs)
        props = props or OutboxStackProps()
        layer = powertools_layer(self)
        self.key: kms.IKey | None = None
        if props.customer_managed_key:
            # Kept on stack deletion like the tables: without it, what they retain could not be read.
            self.key = OutboxKey(self, "DataKey", retain=props.tables.retain_data).key
            props = under_key(props, self.key)

        self.tables = SampleTables(self, "Tables", props.tables)
        self.queues = FailureQueues(self, "FailureQueues", props.queues)
        self.destinations = OutboxDestinations(self, "Destinations", props.destinations)
        self.orders_api = OrdersApi(
            self,
            "OrdersApi",
            orders_table=self.tables.orders_table,
            outbox_table=self.tables.outbox_table,
            settings=props.orders_api,
            powertools_layer=layer,
        )
        self.publisher = OutboxPublisher(
            self,
            "Publisher",
            table=self.tables.outbox_table,
            topic=self.destinations.topic,
            event_bus=self.destinations.event_bus,
            poison_queue=self.queues.poison_queue,
            on_failure_queue=self.queues.on_failure_queue,
            settings=PublisherSettings(
                event_source=self.destinations.event_source,
                routes=props.publisher_routes,
                default_destinations=props.publisher_default_destinations,
                sweep_grace_seconds=props.sweep_grace_seconds,
                stream=props.stream,
                function=props.publisher_function,
            ),
            powertools_layer=layer,
        )
        self.sweeper = OutboxSweeper(
            self, "Sweeper", publisher=self.publisher, settings=props.sweeper, powertools_layer=layer
        )
        alarm_topic = (
            sns.Topic.from_topic_arn(self, "ExistingAlarmTopic", props.alarm_topic_arn)
            if props.alarm_topic_arn
            else None
        )
        self.monitoring = OutboxMonitoring(
            self,
            "Monitoring",
            publisher_function=self.publisher.function,
            sweeper_function=self.sweeper.function,
            poison_queue=self.queues.poison_queue,
            on_failure_queue=self.queues.on_failure_queue,
            alarm_topic=alarm_topic,
            thresholds=props.alarm_thresholds,
            encryption_key=self.key,
        )
        # Attach to the role your operators assume to run `outbox redrive` / `skip` (docs/operations.md).
        self.operator_policy = OutboxOperatorPolicy(self, "OperatorPolicy", publisher=self.publisher)
        self.sample_consumers: SampleConsumers | None = None
        if props.sample_consumers:
            if self.destinations.topic is None or self.destinations.event_bus is None:
                raise OutboxConstructError("the sample consumers need both the topic and the event bus")
            self.sample_consumers = SampleConsumers(
                self,
                "SampleConsumers",
                topic=self.destinations.topic,
                fifo_topic=self.destinations.fifo,
                event_bus=self.destinations.event_bus,
                event_source=self.destinations.event_source,
                tables=props.tables,
                alarm_topic=self.monitoring.alarm_topic,
                powertools_layer=layer,
                encryption_key=self.key,
            )
        self._outputs()

    def _outputs(self) -> None:
        table = self.tables.outbox_table
        described: dict[str, tuple[str, str]] = {
            outputs.ORDERS_TABLE_NAME: (self.tables.orders_table.table_name, "Orders table"),
            outputs.OUTBOX_TABLE_NAME: (table.table_name, "Outbox table"),
            outputs.OUTBOX_TABLE_STREAM_ARN: (
                table.table_stream_arn or "",
                "Stream of the Outbox table (the publisher's event source)",
            ),
            outputs.API_URL: (self.orders_api.url, "Base URL of the Orders HTTP API"),
        }
        if self.destinations.topic is not None:
            described[outputs.TOPIC_ARN] = (
                self.destinations.topic.topic_arn,
                "SNS topic events are published to",
            )
        if self.destinations.event_bus is not None:
            described[outputs.EVENT_BUS_NAME] = (
                self.destinations.event_bus.event_bus_name,
                "EventBridge bus events are put on",
            )
            described[outputs.EVENT_SOURCE] = (
                self.destinations.event_source,
                "EventBridge Source of every outbox event",
            )
        described.update(
            {
                outputs.POISON_QUEUE_URL: (
                    self.queues.poison_queue.queue_url,
                    "Full events that can never be published",
                ),
                outputs.ON_FAILURE_QUEUE_URL: (
                    self.queues.on_failure_queue.queue_url,
                    "Stream batches the mapping gave up on (metadata only)",
                ),
                outputs.ALARM_TOPIC_ARN: (
                    self.monitoring.alarm_topic.topic_arn,
                    "Topic every alarm notifies",
                ),
                outputs.ORDERS_API_FUNCTION_NAME: (
                    self.orders_api.function.function_name,
                    "Orders API function",
                ),
                outputs.PUBLISHER_FUNCTION_NAME: (
                    self.publisher.function.function_name,
                    "Outbox publisher function",
                ),
                outputs.SWEEPER_FUNCTION_NAME: (
                    self.sweeper.function.function_name,
                    "Outbox sweeper function (scheduled)",
                ),
                outputs.DASHBOARD_NAME: (self.monitoring.dashboard.dashboard_name, "CloudWatch dashboard"),
                outputs.OPERATOR_POLICY_ARN: (
                    self.operator_policy.managed_policy_arn,
                    "Managed policy for the roles that run `outbox` operations on this stack",
                ),
            }
        )
        if self.sample_consumers is not None:
            described[outputs.SAMPLE_TOPIC_CONSUMER_QUEUE_URL] = (
                self.sample_consumers.topic_queue.queue_url,
                "Sample queue subscribed to the topic (raw delivery)",
            )
            described[outputs.SAMPLE_BUS_CONSUMER_QUEUE_URL] = (
                self.sample_consumers.bus_queue.queue_url,
                "Sample queue targeted by the bus rule",
            )
            summary, cancellations = self.sample_consumers.order_summary, self.sample_consumers.cancellations
            described[outputs.ORDER_SUMMARY_TABLE_NAME] = (
                summary.table.table_name,
                "Sample order-summary consumer's table (its read model and inbox)",
            )
            described[outputs.ORDER_SUMMARY_DEAD_LETTER_QUEUE_URL] = (
                summary.dead_letter_queue.queue_url,
                "What the order-summary consumer gave up on, each with its reason",
            )
            described[outputs.CANCELLATIONS_TABLE_NAME] = (
                cancellations.table.table_name,
                "Sample cancellations consumer's table (its ledger and inbox)",
            )
            described[outputs.CANCELLATIONS_DEAD_LETTER_QUEUE_URL] = (
                cancellations.dead_letter_queue.queue_url,
                "What the cancellations consumer gave up on, each with its reason",
            )
        # Direct children of the stack, so each logical ID is exactly the documented name.
        for name, (value, description) in described.items():
            CfnOutput(self, name, value=value, description=description)
