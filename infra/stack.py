"""OutboxStack: the sample app, the `Outbox` construct and the sample's own parts (Orders table and API,
sample consumers)."""

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
from outbox_cdk.destinations import DestinationsProps
from outbox_cdk.errors import OutboxConstructError
from outbox_cdk.functions import FunctionSettings, powertools_layer
from outbox_cdk.monitoring import AlarmThresholds
from outbox_cdk.outbox import Outbox, OutboxProps
from outbox_cdk.publisher import StreamMappingProps
from outbox_cdk.queues import FailureQueuesProps
from outbox_cdk.sweeper import SweeperSettings
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
    # One customer-managed key (the Outbox's `OutboxKey`) for every table, queue, topic, log group, the bus
    # and its archive, the sample's own included. False: AWS's own keys, as each construct defaults to.
    customer_managed_key: bool = False
    # Sizing of the publisher function. None: the construct's (512 MB, 60 s).
    publisher_function: FunctionSettings | None = None


def _outbox_props(props: OutboxStackProps, alarm_topic: sns.ITopic | None) -> OutboxProps:
    return OutboxProps(
        table_props=props.tables,
        destinations=props.destinations,
        queues=props.queues,
        stream=props.stream,
        routes=props.publisher_routes,
        default_destinations=props.publisher_default_destinations,
        sweep_grace_seconds=props.sweep_grace_seconds,
        publisher_function=props.publisher_function,
        sweeper=props.sweeper,
        alarm_topic=alarm_topic,
        alarm_thresholds=props.alarm_thresholds,
        customer_managed_key=props.customer_managed_key,
    )


class OutboxStack(Stack):
    """The `Outbox` construct (table, publisher, sweeper, destinations, failure queues, monitoring, operator
    policy, its outputs), and the sample's own parts: the Orders table and API, the sample consumers."""

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
        alarm_topic = (
            sns.Topic.from_topic_arn(self, "ExistingAlarmTopic", props.alarm_topic_arn)
            if props.alarm_topic_arn
            else None
        )
        self.outbox = Outbox(self, "Outbox", _outbox_props(props, alarm_topic))
        # The outbox's customer-managed key, when asked for, keeps the sample's own data too.
        self.key: kms.IKey | None = self.outbox.key
        tables, api = props.tables, props.orders_api
        if self.key is not None:
            tables = replace(tables, encryption_key=self.key)
            api = replace(api, function=replace(api.function, log_encryption_key=self.key))
        layer = powertools_layer(self)
        self.tables = SampleTables(self, "Tables", tables)
        self.orders_api = OrdersApi(
            self,
            "OrdersApi",
            orders_table=self.tables.orders_table,
            outbox_table=self.outbox.table,
            settings=api,
            powertools_layer=layer,
        )
        self.sample_consumers: SampleConsumers | None = None
        if props.sample_consumers:
            if self.outbox.topic is None or self.outbox.event_bus is None:
                raise OutboxConstructError("the sample consumers need both the topic and the event bus")
            self.sample_consumers = SampleConsumers(
                self,
                "SampleConsumers",
                topic=self.outbox.topic,
                fifo_topic=props.destinations.fifo_topic,
                event_bus=self.outbox.event_bus,
                event_source=self.outbox.event_source,
                tables=tables,
                alarm_topic=self.outbox.alarm_topic,
                powertools_layer=layer,
                encryption_key=self.key,
            )
            for consumer in (self.sample_consumers.order_summary, self.sample_consumers.cancellations):
                self.outbox.operator_policy.allow_reading_dead_letters(consumer.dead_letter_queue)
        self._outputs()

    def _outputs(self) -> None:
        """The sample's own outputs; the outbox's are the `Outbox` construct's, each consumer's dead-letter
        queue its `InboxConsumer`'s."""
        described: dict[str, tuple[str, str]] = {
            outputs.ORDERS_TABLE_NAME: (self.tables.orders_table.table_name, "Orders table"),
            outputs.API_URL: (self.orders_api.url, "Base URL of the Orders HTTP API"),
            outputs.ORDERS_API_FUNCTION_NAME: (self.orders_api.function.function_name, "Orders API function"),
        }
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
            described[outputs.CANCELLATIONS_TABLE_NAME] = (
                cancellations.table.table_name,
                "Sample cancellations consumer's table (its ledger and inbox)",
            )
        # Direct children of the stack, so each logical ID is exactly the documented name.
        for name, (value, description) in described.items():
            CfnOutput(self, name, value=value, description=description)
