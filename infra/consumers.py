"""Sample consumers of the outbox's topic and bus.

- Two inbox consumers (`outbox_cdk.consumers.InboxConsumer`), each with its queue, dead-letter queue,
  function, table and alarm:
  - order summary: subscribed to the topic (raw delivery, a filter on every Order event type), `strict`
    ordering, maintains one summary item per order;
  - cancellations: a bus rule routes OrderCancelled only, `latest` ordering (it sees seq 3 without seqs 1
    and 2, by design), keeps one item per cancelled order.
- Two inspection queues the demo reads to check what was delivered, in which order: a raw subscription on
  the topic and a rule on every event of the bus. Nothing processes them.
"""

from __future__ import annotations

from dataclasses import replace

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from infra import constants as sample
from order_consumers.projections import CANCELLED_EVENT_TYPE, ORDER_EVENT_TYPES
from outbox_cdk import constants as c
from outbox_cdk.checkov import acknowledge_aws_apis_only
from outbox_cdk.consumers import InboxConsumer, InboxConsumerProps, route_to_queue
from outbox_cdk.nag import acknowledge
from outbox_cdk.queues import secure_queue
from outbox_cdk.table import DataTableProps
from outbox_inbox.inbox import Ordering


class SampleConsumers(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        topic: sns.ITopic,
        fifo_topic: bool,
        event_bus: events.IEventBus,
        event_source: str,
        tables: DataTableProps,
        alarm_topic: sns.ITopic,
        powertools_layer: lambda_.ILayerVersion,
        encryption_key: kms.IKey | None = None,
    ) -> None:
        """`encryption_key`: the customer-managed key of their queues and log groups (their tables take theirs
        from `tables`); None: AWS's own keys."""
        super().__init__(scope, construct_id)
        function = replace(InboxConsumerProps().function, encryption_key=encryption_key)
        self.order_summary = InboxConsumer(
            self,
            "OrderSummary",
            consumer_name=sample.ORDER_SUMMARY_CONSUMER,
            handler=sample.ORDER_SUMMARY_HANDLER,
            vendored=sample.CONSUMER_PACKAGES,
            description="Sample consumer: the order-summary read model (strict order, every Order event)",
            # A FIFO topic only delivers to FIFO queues.
            props=InboxConsumerProps(
                ordering=Ordering.STRICT,
                fifo=fifo_topic,
                table=tables,
                function=function,
                queue_encryption_key=encryption_key,
            ),
            alarm_topic=alarm_topic,
            powertools_layer=powertools_layer,
        )
        self.order_summary.subscribe(topic, event_types=ORDER_EVENT_TYPES)
        self.cancellations = InboxConsumer(
            self,
            "Cancellations",
            consumer_name=sample.CANCELLATIONS_CONSUMER,
            handler=sample.CANCELLATIONS_HANDLER,
            vendored=sample.CONSUMER_PACKAGES,
            description="Sample consumer: the cancellations ledger (OrderCancelled only, latest order)",
            props=InboxConsumerProps(
                ordering=Ordering.LATEST,
                table=tables,
                function=function,
                queue_encryption_key=encryption_key,
            ),
            alarm_topic=alarm_topic,
            powertools_layer=powertools_layer,
        )
        # The sample's handlers call DynamoDB and SQS alone (their tables, their dead-letter queues).
        for consumer in (self.order_summary, self.cancellations):
            acknowledge_aws_apis_only(consumer.function)
        self.cancellations.receive_from_rule(
            event_bus,
            events.EventPattern(source=[event_source], detail_type=[CANCELLED_EVENT_TYPE]),
            description="Sample consumer: OrderCancelled events to the cancellations ledger",
        )

        retention = Duration.days(c.QUEUE_RETENTION_DAYS)
        self.topic_queue = secure_queue(
            self, "TopicConsumerQueue", retention=retention, fifo=fifo_topic, encryption_key=encryption_key
        )
        # Raw delivery: the queue gets the envelope itself, not wrapped in an SNS notification.
        topic.add_subscription(subscriptions.SqsSubscription(self.topic_queue, raw_message_delivery=True))
        self.bus_queue = secure_queue(
            self, "BusConsumerQueue", retention=retention, encryption_key=encryption_key
        )
        self.rule = route_to_queue(
            self,
            "BusConsumerRule",
            event_bus,
            events.EventPattern(source=[event_source]),
            self.bus_queue,
            description="Sample inspection queue: every outbox event from this source",
        )
        for queue in (self.topic_queue, self.bus_queue):
            acknowledge(
                queue,
                "AwsSolutions-SQS3",
                "Sample inspection queue that the demo only reads; nothing processes its messages, so "
                "none can fail. The inbox consumers beside it have their own dead-letter queues.",
            )
