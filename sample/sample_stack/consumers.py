"""Sample consumers: one SQS queue on the topic, one on the bus. The local demo reads them."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from outbox_cdk import constants as c
from outbox_cdk.nag import acknowledge
from outbox_cdk.queues import secure_queue


class SampleConsumers(Construct):
    """A raw-delivery SQS subscription on the topic (FIFO for a FIFO topic) and an EventBridge
    rule on the bus, matching the outbox event source, that targets a second queue."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        topic: sns.ITopic,
        fifo_topic: bool,
        event_bus: events.IEventBus,
        event_source: str,
    ) -> None:
        super().__init__(scope, construct_id)
        retention = Duration.days(c.QUEUE_RETENTION_DAYS)
        # A FIFO topic only delivers to FIFO queues.
        self.topic_queue = secure_queue(self, "TopicConsumerQueue", retention=retention, fifo=fifo_topic)
        # Raw delivery: consumers get the envelope itself, not wrapped in an SNS notification.
        topic.add_subscription(subscriptions.SqsSubscription(self.topic_queue, raw_message_delivery=True))

        self.bus_queue = secure_queue(self, "BusConsumerQueue", retention=retention)
        self.rule = events.Rule(
            self,
            "BusConsumerRule",
            event_bus=event_bus,
            description="Sample consumer: every outbox event from this source",
            event_pattern=events.EventPattern(source=[event_source]),
            targets=[targets.SqsQueue(self.bus_queue)],
        )
        # Ref and GetAtt Name resolve to the same bus name on AWS; GetAtt also lets a local
        # CloudFormation emulator (moto) create the rule, which it cannot do from a Ref.
        cfn_bus = event_bus.node.default_child
        cfn_rule = self.rule.node.default_child
        if isinstance(cfn_bus, events.CfnEventBus) and isinstance(cfn_rule, events.CfnRule):
            cfn_rule.event_bus_name = cfn_bus.attr_name

        for queue in (self.topic_queue, self.bus_queue):
            acknowledge(
                queue,
                "AwsSolutions-SQS3",
                "Sample consumer queue that the demo only inspects; nothing processes its "
                "messages, so none can fail. Real consumers define their own redrive policy.",
            )
