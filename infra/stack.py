"""OutboxStack: composes the capability constructs and exports the names users need."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_sns as sns
from constructs import Construct

from infra import constants as c
from infra.destinations import DestinationsProps, OutboxDestinations
from infra.lambda_common import powertools_layer
from infra.monitoring import AlarmThresholds, OutboxMonitoring
from infra.orders_api import OrdersApi, OrdersApiSettings
from infra.publisher import OutboxPublisher, PublisherSettings, StreamMappingProps
from infra.queues import FailureQueues, FailureQueuesProps
from infra.sample_consumers import SampleConsumers
from infra.tables import OutboxTables, TablesProps


@dataclass(frozen=True)
class OutboxStackProps:
    """Everything a deployer can tune; every field has a safe default."""

    tables: TablesProps = field(default_factory=TablesProps)
    destinations: DestinationsProps = field(default_factory=DestinationsProps)
    queues: FailureQueuesProps = field(default_factory=FailureQueuesProps)
    orders_api: OrdersApiSettings = field(default_factory=OrdersApiSettings)
    stream: StreamMappingProps = field(default_factory=StreamMappingProps)
    # JSON routing config for the publisher; None sends every event to every destination.
    publisher_routes: dict[str, object] | None = None
    published_retention_days: int = c.DEFAULT_PUBLISHED_RETENTION_DAYS
    # An existing topic (e.g. your on-call topic) for every alarm action; None creates one.
    alarm_topic_arn: str | None = None
    alarm_thresholds: AlarmThresholds = field(default_factory=AlarmThresholds)
    # Off by default in the library; app.py turns it on for the demo.
    sample_consumers: bool = False


class OutboxStack(Stack):
    """Tables, Orders API, publisher, destinations, failure queues, monitoring (and sample consumers)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str = c.STACK_ID,
        *,
        props: OutboxStackProps | None = None,
        **stack_kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **stack_kwargs)
        props = props or OutboxStackProps()
        layer = powertools_layer(self)

        self.tables = OutboxTables(self, "Tables", props.tables)
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
            outbox_table=self.tables.outbox_table,
            topic=self.destinations.topic,
            event_bus=self.destinations.event_bus,
            poison_queue=self.queues.poison_queue,
            on_failure_queue=self.queues.on_failure_queue,
            settings=PublisherSettings(
                event_source=self.destinations.event_source,
                routes=props.publisher_routes,
                published_retention_days=props.published_retention_days,
                stream=props.stream,
            ),
            powertools_layer=layer,
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
            poison_queue=self.queues.poison_queue,
            on_failure_queue=self.queues.on_failure_queue,
            alarm_topic=alarm_topic,
            thresholds=props.alarm_thresholds,
        )
        self.sample_consumers: SampleConsumers | None = None
        if props.sample_consumers:
            self.sample_consumers = SampleConsumers(
                self,
                "SampleConsumers",
                topic=self.destinations.topic,
                fifo_topic=self.destinations.fifo,
                event_bus=self.destinations.event_bus,
                event_source=self.destinations.event_source,
            )
        self._outputs()

    def _outputs(self) -> None:
        outputs = {
            c.OUTPUT_ORDERS_TABLE_NAME: (self.tables.orders_table.table_name, "Orders table"),
            c.OUTPUT_OUTBOX_TABLE_NAME: (self.tables.outbox_table.table_name, "Outbox table"),
            c.OUTPUT_OUTBOX_TABLE_STREAM_ARN: (
                self.tables.outbox_table.table_stream_arn or "",
                "Stream of the Outbox table (the publisher's event source)",
            ),
            c.OUTPUT_API_URL: (self.orders_api.url, "Base URL of the Orders HTTP API"),
            c.OUTPUT_TOPIC_ARN: (self.destinations.topic.topic_arn, "SNS topic events are published to"),
            c.OUTPUT_EVENT_BUS_NAME: (
                self.destinations.event_bus.event_bus_name,
                "EventBridge bus events are put on",
            ),
            c.OUTPUT_EVENT_SOURCE: (
                self.destinations.event_source,
                "EventBridge Source of every outbox event",
            ),
            c.OUTPUT_POISON_QUEUE_URL: (
                self.queues.poison_queue.queue_url,
                "Full events that can never be published",
            ),
            c.OUTPUT_ON_FAILURE_QUEUE_URL: (
                self.queues.on_failure_queue.queue_url,
                "Stream batches the mapping gave up on (metadata only)",
            ),
            c.OUTPUT_ALARM_TOPIC_ARN: (self.monitoring.alarm_topic.topic_arn, "Topic every alarm notifies"),
            c.OUTPUT_ORDERS_API_FUNCTION_NAME: (
                self.orders_api.function.function_name,
                "Orders API function",
            ),
            c.OUTPUT_PUBLISHER_FUNCTION_NAME: (
                self.publisher.function.function_name,
                "Outbox publisher function",
            ),
            c.OUTPUT_DASHBOARD_NAME: (self.monitoring.dashboard.dashboard_name, "CloudWatch dashboard"),
        }
        if self.sample_consumers is not None:
            outputs[c.OUTPUT_SAMPLE_TOPIC_CONSUMER_QUEUE_URL] = (
                self.sample_consumers.topic_queue.queue_url,
                "Sample queue subscribed to the topic (raw delivery)",
            )
            outputs[c.OUTPUT_SAMPLE_BUS_CONSUMER_QUEUE_URL] = (
                self.sample_consumers.bus_queue.queue_url,
                "Sample queue targeted by the bus rule",
            )
        # Direct children of the stack, so each logical ID is exactly the documented name.
        for name, (value, description) in outputs.items():
            CfnOutput(self, name, value=value, description=description)
