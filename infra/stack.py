"""OutboxStack: the sample app, the `Outbox` construct and the sample's own parts (Orders table and API,
sample consumers)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from aws_cdk import Aspects, CfnOutput, Stack
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import Construct

from infra.constants import STACK_ID
from infra.consumers import SampleConsumers
from infra.orders_api import OrdersApi, OrdersApiSettings
from infra.tables import SampleTables
from outbox import outputs
from outbox_cdk.checkov import ServiceKeyAcknowledgements
from outbox_cdk.errors import OutboxConstructError
from outbox_cdk.functions import powertools_layer
from outbox_cdk.outbox import Outbox, OutboxProps
from outbox_cdk.table import DataTableProps


@dataclass(frozen=True)
class OutboxStackProps:
    """Everything a deployer can tune; every field has a safe default."""

    # The pattern's own: its table, destinations, failure queues, stream mapping, routing, sweeper, alarms and
    # the customer-managed key (which, when asked for, keeps the sample's own data too).
    outbox: OutboxProps = field(default_factory=OutboxProps)
    # The sample's own tables: Orders, and the sample consumers' read models and inboxes.
    tables: DataTableProps = field(default_factory=DataTableProps)
    orders_api: OrdersApiSettings = field(default_factory=OrdersApiSettings)
    # An existing topic (e.g. your on-call topic) for every alarm action; None: the Outbox creates one.
    alarm_topic_arn: str | None = None
    # Off by default in the props; the CDK app (app.py) turns it on for the demo.
    sample_consumers: bool = False


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
        Aspects.of(self).add(ServiceKeyAcknowledgements())
        props = props or OutboxStackProps()
        outbox = props.outbox
        if props.alarm_topic_arn:
            existing = sns.Topic.from_topic_arn(self, "ExistingAlarmTopic", props.alarm_topic_arn)
            outbox = replace(outbox, alarm_topic=existing)
        self.outbox = Outbox(self, "Outbox", outbox)
        # The outbox's customer-managed key, when asked for, keeps the sample's own data too.
        self.key: kms.IKey | None = self.outbox.key
        tables, api = props.tables, props.orders_api
        if self.key is not None:
            tables = replace(tables, encryption_key=self.key)
            api = replace(api, function=replace(api.function, encryption_key=self.key))
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
                fifo_topic=props.outbox.destinations.fifo_topic,
                event_bus=self.outbox.event_bus,
                event_source=self.outbox.event_source,
                tables=tables,
                alarm_topic=self.outbox.alarm_topic,
                powertools_layer=layer,
                encryption_key=self.key,
            )
            for consumer in (self.sample_consumers.order_summary, self.sample_consumers.cancellations):
                self.outbox.operator_policy.allow_reading_dead_letters(consumer.dead_letter_queue)
                # Claim checks: the envelopes of large events, read where the outbox stored them.
                self.outbox.grant_read_payloads(consumer.role)
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
