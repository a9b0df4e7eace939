"""A consumer of outbox events through an inbox (`outbox_inbox`): its queue, dead-letter queue, function,
table and alarm, wired so that a message is never lost between them.

- The queue feeds the function with partial batch responses: only failed and gapped messages come back.
- The function writes its effects and inbox records in its own table (partition key `pk`, TTL
  `expires_at`), and sends to the dead-letter queue what can never be applied, with the reason.
- The queue's redrive policy moves a message that keeps failing (a crash, a bug) to the same dead-letter
  queue; its receive count is derived so that a gap's whole wait fits before it: a message waiting for its
  predecessor reaches the inbox's own verdict, with its reason, instead of the redrive's.
- An alarm fires on the dead-letter queue's first message (docs/runbook.md, "ConsumerDeadLetters").
- A stack output `<construct id>DeadLetterQueueUrl` names the dead-letter queue, for `outbox status` (which
  counts what every consumer gave up on) and for operators; `dead_letter_queue_output=False` leaves it out.

Feed it from the outbox's topic (`subscribe`, raw delivery, an optional event_type filter) or its bus
(`receive_from_rule`). A `strict` consumer must receive every event of an aggregate: give it no filter, or a
filter that passes every event type of the aggregate.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from aws_cdk import Aspects, CfnOutput, Duration, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from outbox import metrics, outputs
from outbox.errors import ConfigurationError
from outbox_cdk import constants as c
from outbox_cdk.checkov import Invocation, ServiceKeyAcknowledgements
from outbox_cdk.errors import OutboxConstructError
from outbox_cdk.functions import FunctionSettings, PythonFunction
from outbox_cdk.grants import grant_key_use
from outbox_cdk.monitoring import queue_depth, runbook_link, threshold_alarm
from outbox_cdk.queues import retain_if, secure_queue
from outbox_cdk.table import DataTableProps, data_table_options
from outbox_inbox import config as inbox_env
from outbox_inbox.batch import MIN_TIME_PER_RECORD_MS
from outbox_inbox.consumer import check_external_ordering
from outbox_inbox.inbox import (
    DEFAULT_DEDUPE_WINDOW_S,
    DEFAULT_MAX_GAP_WAIT_S,
    PARTITION_KEY,
    TTL_ATTRIBUTE,
    GapTimeout,
    Ordering,
)


def _default_consumer_function() -> FunctionSettings:
    return FunctionSettings(timeout=Duration.seconds(c.CONSUMER_TIMEOUT_SECONDS))


@dataclass(frozen=True)
class InboxConsumerProps:
    """How the consumer orders, waits and batches; every field has a safe default."""

    ordering: Ordering = Ordering.STRICT
    max_gap_wait: Duration = field(default_factory=lambda: Duration.seconds(DEFAULT_MAX_GAP_WAIT_S))
    on_gap_timeout: GapTimeout = GapTimeout.DEAD_LETTER
    dedupe_window: Duration = field(default_factory=lambda: Duration.seconds(DEFAULT_DEDUPE_WINDOW_S))
    fifo: bool = False
    """A FIFO queue (required to subscribe to a FIFO topic)."""
    batch_size: int = c.CONSUMER_BATCH_SIZE
    max_concurrency: int | None = None
    """The most invocations the queue's event source mapping runs at once (2-1000; None: as many as the
    backlog takes). A limit here, unlike reserved concurrency, does not throttle messages into the DLQ."""
    max_receive_count: int | None = None
    """None: derived from the gap wait and the visibility timeout (see the module doc)."""
    external_effects: bool = False
    effect_actions: Sequence[str] = ()
    """DynamoDB actions the effect needs on the table beyond PutItem and UpdateItem (e.g.
    `dynamodb:ConditionCheckItem`, `dynamodb:DeleteItem`): least privilege, named by the consumer."""
    """The handler makes calls outside DynamoDB through `outbox_inbox.external` (Powertools idempotency)."""
    function: FunctionSettings = field(default_factory=_default_consumer_function)
    table: DataTableProps = field(default_factory=DataTableProps)
    retention: Duration = field(default_factory=lambda: Duration.days(c.QUEUE_RETENTION_DAYS))
    queue_encryption_key: kms.IKey | None = None
    """The queue's and the dead-letter queue's (None: SSE-SQS). Its policy must let SNS or EventBridge
    deliver to them (outbox_cdk.encryption.OutboxKey's does); the function gets what it needs on it."""


class InboxConsumer(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        consumer_name: str,
        handler: str,
        vendored: Sequence[str],
        description: str,
        props: InboxConsumerProps | None = None,
        alarm_topic: sns.ITopic | None = None,
        powertools_layer: lambda_.ILayerVersion | None = None,
        dead_letter_queue_output: bool = True,
    ) -> None:
        super().__init__(scope, construct_id)
        # Like Outbox: a checkov scan of your app says why its key findings on what is built here don't apply.
        Aspects.of(self).add(ServiceKeyAcknowledgements())
        props = props or InboxConsumerProps()
        timeout_s = props.function.timeout.to_seconds()
        visibility_s = timeout_s * c.CONSUMER_VISIBILITY_TIMEOUT_FACTOR
        max_receive_count = props.max_receive_count or _receives_for(props.max_gap_wait, visibility_s)
        _check_receives(props, max_receive_count, visibility_s)
        _check_settings(props, timeout_s)
        if props.fifo and props.batch_size > 10:
            raise OutboxConstructError("a FIFO queue's event source takes at most 10 messages per batch")

        self.table = dynamodb.Table(
            self,
            "Table",
            partition_key=dynamodb.Attribute(name=PARTITION_KEY, type=dynamodb.AttributeType.STRING),
            **data_table_options(props.table, ttl_attribute=TTL_ATTRIBUTE),
        )
        self.dead_letter_queue = secure_queue(
            self,
            "DeadLetterQueue",
            retention=props.retention,
            fifo=props.fifo,
            encryption_key=props.queue_encryption_key,
        )
        # What it gave up on stays when the stack goes, like the table (DataTableProps.retain_data).
        retain_if(self.dead_letter_queue, props.table.retain_data)
        self.queue = secure_queue(
            self,
            "Queue",
            retention=props.retention,
            fifo=props.fifo,
            visibility_timeout=Duration.seconds(visibility_s),
            dead_letter_queue=sqs.DeadLetterQueue(
                max_receive_count=max_receive_count, queue=self.dead_letter_queue
            ),
            encryption_key=props.queue_encryption_key,
        )
        self._function = PythonFunction(
            self,
            "Handler",
            handler=handler,
            description=description,
            environment={
                inbox_env.TABLE_NAME: self.table.table_name,
                inbox_env.CONSUMER: consumer_name,
                inbox_env.ORDERING: props.ordering.value,
                inbox_env.DEDUPE_WINDOW_SECONDS: str(int(props.dedupe_window.to_seconds())),
                inbox_env.MAX_GAP_WAIT_SECONDS: str(int(props.max_gap_wait.to_seconds())),
                inbox_env.ON_GAP_TIMEOUT: props.on_gap_timeout.value,
                inbox_env.DEAD_LETTER_QUEUE_URL: self.dead_letter_queue.queue_url,
                c.ENV_POWERTOOLS_SERVICE_NAME: consumer_name,
                c.ENV_POWERTOOLS_METRICS_NAMESPACE: metrics.NAMESPACE,
                c.ENV_POWERTOOLS_LOG_LEVEL: c.LOG_LEVEL,
            },
            settings=props.function,
            layer=powertools_layer,
            vendored=vendored,
            invocation=Invocation.QUEUE,
        )
        self.function: lambda_.Function = self._function.function
        self.role: iam.Role = self._function.role
        external = c.INBOX_EXTERNAL_EFFECT_ACTIONS if props.external_effects else ()
        actions = sorted({*c.INBOX_TABLE_ACTIONS, *props.effect_actions, *external})
        self.role.add_to_policy(iam.PolicyStatement(actions=actions, resources=[self.table.table_arn]))
        grant_key_use(self.role, props.table.encryption_key, c.TABLE_KEY_ACTIONS, via=c.VIA_DYNAMODB)
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=list(c.QUEUE_SEND_ACTIONS), resources=[self.dead_letter_queue.queue_arn]
            )
        )
        grant_key_use(
            self.role, self.dead_letter_queue.encryption_master_key, c.QUEUE_KEY_ACTIONS, via=c.VIA_SQS
        )
        # The mapping made here rather than by CDK's SqsEventSource, which would grant kms:Decrypt on the
        # queue's key through any service.
        self.role.add_to_policy(
            iam.PolicyStatement(actions=list(c.QUEUE_CONSUME_ACTIONS), resources=[self.queue.queue_arn])
        )
        grant_key_use(self.role, self.queue.encryption_master_key, c.QUEUE_RECEIVE_KEY_ACTIONS, via=c.VIA_SQS)
        self.function.add_event_source_mapping(
            "QueueMapping",
            event_source_arn=self.queue.queue_arn,
            batch_size=props.batch_size,
            max_concurrency=props.max_concurrency,
            report_batch_item_failures=True,
        )
        self.dead_letter_alarm = threshold_alarm(
            self,
            "DeadLetterDepthAlarm",
            name=f"{Stack.of(self).stack_name}-{construct_id}DeadLetters",
            description=(
                f"Consumer {consumer_name} gave up on a message (its reason is on the message). "
                f"{runbook_link('ConsumerDeadLetters')}"
            ),
            metric=queue_depth(self.dead_letter_queue),
            threshold=c.QUEUE_DEPTH_THRESHOLD,
            topic=alarm_topic,
        )
        self.dead_letter_queue_output: CfnOutput | None = None
        if dead_letter_queue_output:
            self.dead_letter_queue_output = _dead_letter_queue_output(self, consumer_name)

    def subscribe(self, topic: sns.ITopic, *, event_types: Sequence[str] = ()) -> None:
        """Raw delivery from the outbox's topic (the body is the envelope), filtered on `event_type` when
        `event_types` are given (the publisher sets it as a message attribute). What SNS cannot deliver to the
        queue goes to the consumer's dead-letter queue, not nowhere."""
        policy = (
            {"event_type": sns.SubscriptionFilter.string_filter(allowlist=list(event_types))}
            if event_types
            else None
        )
        subscription = subscriptions.SqsSubscription(
            self.queue,
            raw_message_delivery=True,
            filter_policy=policy,
            dead_letter_queue=self.dead_letter_queue,
        )
        topic.add_subscription(subscription)

    def receive_from_rule(
        self, bus: events.IEventBus, pattern: events.EventPattern, *, description: str
    ) -> events.Rule:
        """An EventBridge rule on the outbox's bus that sends what matches `pattern` to the queue; what
        EventBridge cannot deliver goes to the consumer's dead-letter queue."""
        return route_to_queue(
            self,
            "Rule",
            bus,
            pattern,
            self.queue,
            description=description,
            dead_letters=self.dead_letter_queue,
        )


def _dead_letter_queue_output(consumer: InboxConsumer, consumer_name: str) -> CfnOutput:
    # A direct child of the stack, so its key is exactly `<construct id>DeadLetterQueueUrl`.
    stack = Stack.of(consumer)
    key = f"{consumer.node.id}{outputs.DEAD_LETTER_QUEUE_URL_SUFFIX}"
    if stack.node.try_find_child(key) is not None:
        raise OutboxConstructError(
            f"the stack already has an output or construct {key!r}: give the consumer at "
            f"{consumer.node.path} another id, or pass dead_letter_queue_output=False and write its output "
            "yourself"
        )
    return CfnOutput(
        stack,
        key,
        value=consumer.dead_letter_queue.queue_url,
        description=f"What consumer {consumer_name} gave up on, each with its reason",
    )


def route_to_queue(
    scope: Construct,
    construct_id: str,
    bus: events.IEventBus,
    pattern: events.EventPattern,
    queue: sqs.IQueue,
    *,
    description: str,
    dead_letters: sqs.IQueue | None = None,
) -> events.Rule:
    """A rule on `bus` sending what matches `pattern` to `queue` (what it cannot deliver: `dead_letters`).

    Only this rule may send to the queue (`aws:SourceArn`). CDK's target drops that condition for a queue
    under a customer-managed key (its replacement, `aws:SourceAccount`, needs a feature flag), so such a queue
    is targeted through a view of it without its key, and its policy gets the rule's statement here.
    """
    encrypted = queue.encryption_master_key is not None
    target_queue = (
        sqs.Queue.from_queue_attributes(
            scope, f"{construct_id}Target", queue_arn=queue.queue_arn, queue_url=queue.queue_url
        )
        if encrypted
        else queue
    )
    rule = events.Rule(
        scope,
        construct_id,
        event_bus=bus,
        description=description,
        event_pattern=pattern,
        targets=[targets.SqsQueue(target_queue, dead_letter_queue=dead_letters)],
    )
    if encrypted:
        queue.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal("events.amazonaws.com")],
                actions=list(c.QUEUE_SEND_ACTIONS),
                resources=[queue.queue_arn],
                conditions={"ArnEquals": {"aws:SourceArn": rule.rule_arn}},
            )
        )
    # Ref and GetAtt Name resolve to the same bus name on AWS; GetAtt also lets a local
    # CloudFormation emulator (moto) create the rule, which it cannot do from a Ref.
    cfn_bus = bus.node.default_child
    cfn_rule = rule.node.default_child
    if isinstance(cfn_bus, events.CfnEventBus) and isinstance(cfn_rule, events.CfnRule):
        cfn_rule.event_bus_name = cfn_bus.attr_name
    return rule


def _check_settings(props: InboxConsumerProps, timeout_s: float) -> None:
    if timeout_s < MIN_TIME_PER_RECORD_MS / 1000:
        raise OutboxConstructError(
            f"a consumer function needs a timeout of at least {MIN_TIME_PER_RECORD_MS // 1000} s (one "
            f"record's calls at their longest): with {int(timeout_s)} s, every record after the first "
            "is handed back"
        )
    limits = c.CONSUMER_MAX_CONCURRENCY_LIMITS
    if props.max_concurrency is not None and not limits[0] <= props.max_concurrency <= limits[1]:
        raise OutboxConstructError(
            f"max_concurrency must be from {limits[0]} to {limits[1]} (SQS event source mappings' limits), "
            f"got {props.max_concurrency}"
        )
    reserved = props.function.reserved_concurrency
    if props.max_concurrency is not None and reserved is not None and props.max_concurrency > reserved:
        raise OutboxConstructError(
            f"max_concurrency {props.max_concurrency} is above the function's reserved concurrency "
            f"{reserved}: the mapping would be throttled, and throttled receives push messages to the "
            "dead-letter queue"
        )
    if props.external_effects:
        try:
            check_external_ordering(props.ordering, props.on_gap_timeout)
        except ConfigurationError as error:
            raise OutboxConstructError(str(error)) from None


def _receives_for(max_gap_wait: Duration, visibility_s: float) -> int:
    return math.ceil(max_gap_wait.to_seconds() / visibility_s) + c.CONSUMER_SPARE_RECEIVES


def _check_receives(props: InboxConsumerProps, max_receive_count: int, visibility_s: float) -> None:
    needed = _receives_for(props.max_gap_wait, visibility_s) - c.CONSUMER_SPARE_RECEIVES + 1
    if props.ordering is Ordering.STRICT and max_receive_count < needed:
        raise OutboxConstructError(
            f"max_receive_count {max_receive_count} would move a message waiting for its predecessor to the "
            f"dead-letter queue before its {int(props.max_gap_wait.to_seconds())} s wait ends "
            f"(visibility {int(visibility_s)} s): at least {needed} are needed"
        )
