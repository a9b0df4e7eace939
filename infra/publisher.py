"""The outbox publisher: a Lambda function fed by the Outbox table's stream.

``OutboxPublisher`` is the reusable piece: point it at any table whose stream carries outbox rows
(NEW_IMAGE or NEW_AND_OLD_IMAGES) and at your own topic, bus and queues.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import cast

from aws_cdk import Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra import constants as c
from infra.lambda_common import FunctionSettings, PythonFunction

# Lambda's documented bounds for DynamoDB stream mappings.
_MAX_BATCH_SIZE = 10_000
_MAX_RETRY_ATTEMPTS = 10_000
_MIN_RECORD_AGE_SECONDS = 60
_MAX_RECORD_AGE_SECONDS = 604_800
_MAX_PARALLELIZATION_FACTOR = 10
_MAX_BATCHING_WINDOW_SECONDS = 300


@dataclass(frozen=True)
class StreamMappingProps:
    """How Lambda reads the stream. Defaults follow GUIDE §3 and are all bounded.

    ``parallelization_factor`` > 1 runs that many concurrent batches per shard. Lambda still keeps
    records of one partition key (one aggregate) in order, so per-aggregate order survives, but
    events of *different* aggregates in one shard may then be published in any order relative to
    each other, and throughput downstream (SNS, EventBridge) grows by the same factor.
    """

    batch_size: int = c.STREAM_BATCH_SIZE
    max_batching_window: Duration = field(
        default_factory=lambda: Duration.seconds(c.STREAM_MAX_BATCHING_WINDOW_SECONDS)
    )
    retry_attempts: int = c.STREAM_MAX_RETRY_ATTEMPTS
    max_record_age: Duration = field(
        default_factory=lambda: Duration.seconds(c.STREAM_MAX_RECORD_AGE_SECONDS)
    )
    parallelization_factor: int = c.STREAM_PARALLELIZATION_FACTOR
    bisect_batch_on_error: bool = True
    enabled: bool = True

    def __post_init__(self) -> None:
        record_age = self.max_record_age.to_seconds()
        checks = {
            "batch_size must be 1..10000": 1 <= self.batch_size <= _MAX_BATCH_SIZE,
            # -1 (infinite) is what lets one poison record block a shard for a whole day.
            "retry_attempts must be 0..10000 (never infinite)": 0
            <= self.retry_attempts
            <= _MAX_RETRY_ATTEMPTS,
            "max_record_age must be 60..604800 s (never infinite)": _MIN_RECORD_AGE_SECONDS
            <= record_age
            <= _MAX_RECORD_AGE_SECONDS,
            "parallelization_factor must be 1..10": 1
            <= self.parallelization_factor
            <= _MAX_PARALLELIZATION_FACTOR,
            "max_batching_window must be 0..300 s": 0
            <= self.max_batching_window.to_seconds()
            <= _MAX_BATCHING_WINDOW_SECONDS,
        }
        failed = [message for message, ok in checks.items() if not ok]
        if failed:
            raise ValueError("; ".join(failed))


def _default_publisher_function() -> FunctionSettings:
    # No reserved concurrency: a stream mapping already runs at most shards x parallelization
    # factor copies, and a lower reservation would throttle the pollers and grow IteratorAge.
    return FunctionSettings(
        memory_mb=c.PUBLISHER_MEMORY_MB,
        timeout=Duration.seconds(c.PUBLISHER_TIMEOUT_SECONDS),
    )


@dataclass(frozen=True)
class PublisherSettings:
    """Tunables of the publisher (resources are passed to the construct separately)."""

    event_source: str = c.DEFAULT_EVENT_SOURCE
    # JSON routing config (OUTBOX_ROUTES); None sends every event to every destination.
    routes: dict[str, object] | None = None
    # How long a row stays in the table after it is PUBLISHED/FAILED (its TTL).
    published_retention_days: int = c.DEFAULT_PUBLISHED_RETENTION_DAYS
    stream: StreamMappingProps = field(default_factory=StreamMappingProps)
    function: FunctionSettings = field(default_factory=_default_publisher_function)

    def __post_init__(self) -> None:
        if self.published_retention_days < 1:
            raise ValueError("published_retention_days must be at least 1")


class OutboxPublisher(Construct):
    """Publisher Lambda plus its stream mapping, with exactly the permissions it uses.

    The role may: read this table's stream, ``UpdateItem`` on the table (mark rows published or
    failed), ``sns:Publish`` on the topic, ``events:PutEvents`` on the bus and ``sqs:SendMessage``
    on the poison queue and, for Lambda's on-failure destination, on the on-failure queue.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        outbox_table: dynamodb.ITable,
        topic: sns.ITopic,
        event_bus: events.IEventBus,
        poison_queue: sqs.IQueue,
        on_failure_queue: sqs.IQueue,
        settings: PublisherSettings | None = None,
        powertools_layer: lambda_.ILayerVersion | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        settings = settings or PublisherSettings()
        stream_arn = outbox_table.table_stream_arn
        if stream_arn is None:
            raise ValueError(
                "outbox_table has no stream: enable NEW_IMAGE (or import it with its stream ARN)"
            )

        environment = {
            c.ENV_OUTBOX_TABLE_NAME: outbox_table.table_name,
            c.ENV_TOPIC_ARN: topic.topic_arn,
            c.ENV_EVENT_BUS_NAME: event_bus.event_bus_name,
            c.ENV_EVENT_SOURCE: settings.event_source,
            c.ENV_POISON_QUEUE_URL: poison_queue.queue_url,
            c.ENV_PUBLISHED_RETENTION_DAYS: str(settings.published_retention_days),
            c.ENV_POWERTOOLS_SERVICE_NAME: c.PUBLISHER_SERVICE,
            c.ENV_POWERTOOLS_METRICS_NAMESPACE: c.METRICS_NAMESPACE,
            c.ENV_POWERTOOLS_LOG_LEVEL: c.LOG_LEVEL,
        }
        if settings.routes is not None:
            environment[c.ENV_OUTBOX_ROUTES] = json.dumps(settings.routes, sort_keys=True)

        self._fn = PythonFunction(
            self,
            "Publisher",
            handler=c.PUBLISHER_HANDLER,
            description="Outbox publisher: stream INSERTs to SNS and EventBridge",
            environment=environment,
            settings=settings.function,
            layer=powertools_layer,
        )
        self.function: lambda_.Function = self._fn.function
        self.role: iam.Role = self._fn.role

        # Explicit statements instead of grant_*: table.grant() would add the table's index ARNs
        # and grant_stream_read() puts dynamodb:ListStreams on "*"; queue.grant_send_messages()
        # adds two actions the publisher never calls.
        self.role.add_to_policy(
            iam.PolicyStatement(actions=list(c.STREAM_READ_ACTIONS), resources=[stream_arn])
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=list(c.PUBLISHER_OUTBOX_TABLE_ACTIONS), resources=[outbox_table.table_arn]
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(actions=list(c.QUEUE_SEND_ACTIONS), resources=[poison_queue.queue_arn])
        )
        self.role.add_to_policy(
            iam.PolicyStatement(actions=list(c.QUEUE_SEND_ACTIONS), resources=[on_failure_queue.queue_arn])
        )
        topic.grant_publish(self.function)  # sns:Publish; PublishBatch is authorized as Publish
        event_bus.grant_put_events_to(self.function)

        stream = settings.stream
        self.event_source_mapping = lambda_.EventSourceMapping(
            self,
            "StreamMapping",
            target=self.function,
            event_source_arn=stream_arn,
            # Oldest first: a new mapping must not skip rows already waiting in the stream.
            starting_position=lambda_.StartingPosition.TRIM_HORIZON,
            batch_size=stream.batch_size,
            max_batching_window=stream.max_batching_window,
            bisect_batch_on_error=stream.bisect_batch_on_error,
            retry_attempts=stream.retry_attempts,
            max_record_age=stream.max_record_age,
            parallelization_factor=stream.parallelization_factor,
            report_batch_item_failures=True,
            enabled=stream.enabled,
            # Only new rows are events; the publisher's own status updates (MODIFY) and TTL
            # deletions (REMOVE) never reach it, so they cost no invocations.
            filters=[
                lambda_.FilterCriteria.filter(
                    {"eventName": lambda_.FilterRule.is_equal(c.STREAM_INSERT_EVENT_NAME)}
                )
            ],
        )
        # The on-failure destination is set on the L1 resource: the L2 SqsDlq helper would also
        # grant sqs:GetQueueAttributes and sqs:GetQueueUrl, which Lambda does not need.
        cfn_mapping = cast(lambda_.CfnEventSourceMapping, self.event_source_mapping.node.default_child)
        cfn_mapping.destination_config = lambda_.CfnEventSourceMapping.DestinationConfigProperty(
            on_failure=lambda_.CfnEventSourceMapping.OnFailureProperty(destination=on_failure_queue.queue_arn)
        )
