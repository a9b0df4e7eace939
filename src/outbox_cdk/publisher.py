"""The outbox publisher: a Lambda function fed by the outbox table's stream, announcing each row on SNS,
EventBridge or both.

`OutboxPublisher` is the reusable piece. Like the AWS Solutions Constructs, it creates what it needs
with safe defaults, and takes the caller's own instead wherever one is passed: the table (or the
props of the one it creates), the topic and/or the bus (at least one), the poison and on-failure
queues, the function (or its settings), typed routes. What AWS or the publisher would refuse is
refused here, at synth, with a message that says what to change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import cast

from aws_cdk import Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from outbox import metrics
from outbox import stream_mapping as mapping
from outbox.errors import ConfigurationError
from outbox.numbers import MAX_DURATION
from outbox_cdk import constants as c
from outbox_cdk.checkov import Invocation, acknowledge_aws_apis_only
from outbox_cdk.errors import OutboxConstructError
from outbox_cdk.functions import FunctionSettings, PythonFunction, powertools_layer
from outbox_cdk.grants import grant_publishing
from outbox_cdk.naming import outbox_name_for
from outbox_cdk.payloads import grant_payload_reads
from outbox_cdk.queues import FailureQueuesProps, create_on_failure_queue, create_poison_queue
from outbox_cdk.regions import OutboxRegions
from outbox_cdk.table import DataTableProps, OutboxTable, check_global_table, check_outbox_table
from outbox_publisher import config as env
from outbox_publisher import routing
from outbox_publisher.config import event_source_problem
from outbox_publisher.routing import Destination, Route, Router, configured_destinations, routes_json


@dataclass(frozen=True)
class StreamMappingProps:
    """How Lambda reads the stream. The defaults (`outbox.stream_mapping`) are all bounded.

    ``parallelization_factor`` > 1 runs that many concurrent batches per shard. Lambda still keeps
    records of one partition key (one aggregate) in order, so per-aggregate order survives, but
    events of *different* aggregates in one shard may then be published in any order relative to
    each other, and throughput downstream (SNS, EventBridge) grows by the same factor.
    """

    batch_size: int = mapping.DEFAULT_BATCH_SIZE
    max_batching_window: Duration = field(
        default_factory=lambda: Duration.seconds(mapping.DEFAULT_MAX_BATCHING_WINDOW_SECONDS)
    )
    retry_attempts: int = mapping.DEFAULT_MAX_RETRY_ATTEMPTS
    max_record_age: Duration = field(
        default_factory=lambda: Duration.seconds(mapping.DEFAULT_MAX_RECORD_AGE_SECONDS)
    )
    parallelization_factor: int = mapping.DEFAULT_PARALLELIZATION_FACTOR
    bisect_batch_on_error: bool = True
    enabled: bool = True

    def __post_init__(self) -> None:
        settings: dict[str, object] = {
            "BatchSize": self.batch_size,
            "MaximumBatchingWindowInSeconds": self.max_batching_window.to_seconds(),
            "MaximumRetryAttempts": self.retry_attempts,
            "MaximumRecordAgeInSeconds": self.max_record_age.to_seconds(),
            "ParallelizationFactor": self.parallelization_factor,
        }
        names = {
            "BatchSize": "batch_size",
            "MaximumBatchingWindowInSeconds": "max_batching_window",
            "MaximumRetryAttempts": "retry_attempts",
            "MaximumRecordAgeInSeconds": "max_record_age",
            "ParallelizationFactor": "parallelization_factor",
        }
        problems = mapping.violations(settings, names)
        # AWS takes -1 (infinite) for both; here it is refused: one poison record would then block its
        # shard for the stream's whole 24 hours.
        for name in ("MaximumRetryAttempts", "MaximumRecordAgeInSeconds"):
            if settings[name] == mapping.INFINITE:
                problems.append(f"{names[name]} ({name}) must be bounded here, not -1 (infinite)")
        if problems:
            raise OutboxConstructError("stream mapping: " + "; ".join(problems))


def default_publisher_function() -> FunctionSettings:
    # No reserved concurrency: a stream mapping already runs at most shards x parallelization
    # factor copies, and a lower reservation would throttle the pollers and grow IteratorAge.
    return FunctionSettings(
        memory_mb=c.PUBLISHER_MEMORY_MB,
        timeout=Duration.seconds(c.PUBLISHER_TIMEOUT_SECONDS),
    )


@dataclass(frozen=True)
class PublisherSettings:
    """Tunables of the publisher (its resources are passed to the construct separately)."""

    # EventBridge `Source` of every event (with an event bus); rules match on it.
    event_source: str = c.DEFAULT_EVENT_SOURCE
    # Routing, first match wins (outbox_publisher.routing). No routes: every event to every destination.
    routes: Sequence[Route] = ()
    # Where events no route matches go. None: every configured destination; () makes them poison.
    default_destinations: Sequence[Destination] | None = None
    # Age at which the sweeper takes a PENDING row (the stream publisher claims rows close to it).
    sweep_grace_seconds: int = env.DEFAULT_SWEEP_GRACE_SECONDS
    stream: StreamMappingProps = field(default_factory=StreamMappingProps)
    # Sizing of the function the construct creates. None: 512 MB, 60 s, no reserved concurrency.
    function: FunctionSettings | None = None
    # Large payloads: the topic's MaximumMessageSize and EventBridge's entry limit (None: AWS's defaults,
    # 256 KiB and the PutEvents reference's 256 KB); larger stored envelopes go as claim checks.
    topic_max_message_bytes: int | None = None
    eventbridge_max_entry_bytes: int | None = None
    # One outbox across regions (outbox_cdk.regions): the publisher of the stack's region publishes only its
    # region's rows (and a lost region's, taken over). None: a single-region outbox.
    regions: OutboxRegions | None = None
    # With regions, the schedule and timeout of the sweeper built from this publisher (the `Outbox` passes
    # its sweeper's; `OutboxSweeper` refuses others): both functions count the region decisions in them.
    sweep_schedule: Duration = field(default_factory=lambda: Duration.minutes(c.SWEEP_SCHEDULE_MINUTES))
    sweeper_timeout: Duration = field(default_factory=lambda: Duration.seconds(c.SWEEPER_TIMEOUT_SECONDS))

    def __post_init__(self) -> None:
        # The function refuses to start past MAX_DURATION (outbox.numbers): said here, at synth, instead.
        most_seconds = MAX_DURATION // timedelta(seconds=1)
        if not env.MIN_SWEEP_GRACE_SECONDS <= self.sweep_grace_seconds <= most_seconds:
            least = env.MIN_SWEEP_GRACE_SECONDS
            raise OutboxConstructError(
                f"sweep_grace_seconds must be at least {least} and at most {most_seconds}"
            )
        if problem := event_source_problem(self.event_source):
            raise OutboxConstructError(problem)

    @property
    def routes_configured(self) -> bool:
        return bool(self.routes) or self.default_destinations is not None


class OutboxPublisher(Construct):
    """Publisher Lambda plus its stream mapping, with exactly the permissions it uses.

    The role may: read this table's stream; ``BatchGetItem`` (the order gate), ``DeleteItem`` (settles) and
    ``UpdateItem`` (claims, FAILED marks, parks) on the table; ``sns:Publish``, ``events:PutEvents``, and
    ``sqs:SendMessage`` on the poison and on-failure queues.

    Resources, each optional:

    - ``table``: the outbox table (its stream must carry new images). Default: an `OutboxTable`
      created here, with ``table_props``.
    - ``topic``, ``event_bus``: where events go. At least one; either alone works.
    - ``poison_queue``, ``on_failure_queue``: default: created here, with ``queue_props``.
    - ``function``: a function of yours to run the publisher's handler (`outbox_publisher.handler.handler`,
      checked); the construct adds the Powertools layer, its environment, permissions and stream mapping
      to it. Default: created here, sized by ``settings.function``.

    ``outbox_name`` keeps this outbox's metrics apart from any other's (`outbox_cdk.naming`): the publisher
    reports under `<outbox_name>-publisher`, the sweeper built from it under `<outbox_name>-sweeper`. Default:
    the stack's name and the path of the construct that holds the publisher.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        table: dynamodb.ITable | None = None,
        table_props: DataTableProps | None = None,
        topic: sns.ITopic | None = None,
        event_bus: events.IEventBus | None = None,
        poison_queue: sqs.IQueue | None = None,
        on_failure_queue: sqs.IQueue | None = None,
        queue_props: FailureQueuesProps | None = None,
        function: lambda_.Function | None = None,
        settings: PublisherSettings | None = None,
        powertools_layer: lambda_.ILayerVersion | None = None,
        outbox_name: str | None = None,
        payload_bucket: s3.IBucket | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.payload_bucket = payload_bucket
        """Where stored envelopes are read (outbox_cdk.payloads); the sweeper reads them too."""
        self.outbox_name = outbox_name_for(scope, outbox_name)
        self.service = metrics.service_name(self.outbox_name, metrics.PUBLISHER)
        settings = settings or PublisherSettings()
        if table is not None and table_props is not None:
            raise OutboxConstructError(
                "pass either table (your own) or table_props (for the one created here), not both"
            )
        if topic is None and event_bus is None:
            raise OutboxConstructError(
                "pass a topic, an event_bus or both: the publisher needs somewhere to publish"
            )
        self.table: dynamodb.ITable = table or OutboxTable(self, "Table", table_props)
        check_outbox_table(self.table)
        self.topic = topic
        self.event_bus = event_bus
        if poison_queue is not None and on_failure_queue is not None and queue_props is not None:
            raise OutboxConstructError("queue_props applies to queues created here; both queues were passed")
        self.poison_queue: sqs.IQueue = poison_queue or create_poison_queue(self, "PoisonQueue", queue_props)
        self.on_failure_queue: sqs.IQueue = on_failure_queue or create_on_failure_queue(
            self, "OnFailureQueue", queue_props
        )

        self.settings = settings
        self.region: str | None = None
        """The stack's region, with regions configured (the origin this publisher owns)."""
        if settings.regions is not None:
            self.region = settings.regions.region_of(self)
            check_global_table(self.table, settings.regions.ring)
        environment = self._environment(settings)
        self.environment: dict[str, str] = dict(environment)
        """What the publisher is configured with; the sweeper (outbox_cdk.sweeper) publishes with the same."""
        self.function: lambda_.Function = self._function(function, environment, settings, powertools_layer)
        self._grant()
        self.event_source_mapping = self._stream_mapping(settings.stream)

    def _function(
        self,
        function: lambda_.Function | None,
        environment: dict[str, str],
        settings: PublisherSettings,
        layer: lambda_.ILayerVersion | None,
    ) -> lambda_.Function:
        if function is None:
            created = PythonFunction(
                self,
                "Publisher",
                handler=c.PUBLISHER_HANDLER,
                description="Outbox publisher: stream INSERTs to SNS and EventBridge",
                environment=environment,
                settings=settings.function or default_publisher_function(),
                layer=layer,
                invocation=Invocation.STREAM,
            ).function
            acknowledge_aws_apis_only(created)
            return created
        if settings.function is not None:
            raise OutboxConstructError(
                "settings.function sizes the function created here; size your own function yourself"
            )
        handler = cast(lambda_.CfnFunction, function.node.default_child).handler
        if handler != c.PUBLISHER_HANDLER:
            raise OutboxConstructError(
                f"the function given to run the publisher has handler {handler!r}; it must be "
                f"{c.PUBLISHER_HANDLER!r} (its code: outbox_cdk.assets.function_code, or a build of your own)"
            )
        # The handler imports Powertools, which comes from the layer (docs/deploy.md).
        function.add_layers(layer or powertools_layer(self))
        for name, value in environment.items():
            function.add_environment(name, value)
        return function

    def _environment(self, settings: PublisherSettings) -> dict[str, str]:
        environment = {
            env.ENV_OUTBOX_TABLE_NAME: self.table.table_name,
            env.ENV_POISON_QUEUE_URL: self.poison_queue.queue_url,
            env.ENV_SWEEP_GRACE_SECONDS: str(settings.sweep_grace_seconds),
            c.ENV_POWERTOOLS_SERVICE_NAME: self.service,
            c.ENV_POWERTOOLS_METRICS_NAMESPACE: metrics.NAMESPACE,
            c.ENV_POWERTOOLS_LOG_LEVEL: c.LOG_LEVEL,
        }
        if self.topic is not None:
            environment[routing.ENV_TOPIC_ARN] = self.topic.topic_arn
        if self.event_bus is not None:
            environment[routing.ENV_EVENT_BUS_NAME] = self.event_bus.event_bus_name
            environment[env.ENV_EVENT_SOURCE] = settings.event_source
        if settings.topic_max_message_bytes is not None:
            environment[env.ENV_TOPIC_MAX_MESSAGE_BYTES] = str(settings.topic_max_message_bytes)
        if settings.eventbridge_max_entry_bytes is not None:
            environment[env.ENV_EVENTBRIDGE_MAX_ENTRY_BYTES] = str(settings.eventbridge_max_entry_bytes)
        if settings.regions is not None and self.region is not None:
            environment.update(
                settings.regions.function_environment(
                    self.region,
                    sweep_interval=settings.sweep_schedule,
                    sweeper_timeout=settings.sweeper_timeout,
                )
            )
        if settings.routes_configured:
            routes = routes_json(settings.routes, settings.default_destinations)
            configured = configured_destinations(
                "topic" if self.topic is not None else None, "bus" if self.event_bus is not None else None
            )
            try:
                # The very check the publisher makes at start-up, made before anything is deployed.
                Router.parse(routes, configured)
            except ConfigurationError as error:
                raise OutboxConstructError(f"publisher routes: {error}") from None
            environment[env.ENV_OUTBOX_ROUTES] = routes
        return environment

    def _grant(self) -> None:
        # Customer-managed keys: reading the stream and updating rows use the table's key; sending to an
        # encrypted queue needs its key.
        grant_publishing(
            self.function,
            [
                (c.STREAM_READ_ACTIONS, cast(str, self.table.table_stream_arn)),
                (c.PUBLISHER_OUTBOX_TABLE_ACTIONS, self.table.table_arn),
                (c.QUEUE_SEND_ACTIONS, self.poison_queue.queue_arn),
                (c.QUEUE_SEND_ACTIONS, self.on_failure_queue.queue_arn),
            ],
            topic=self.topic,
            event_bus=self.event_bus,
            keys=[
                (self.table.encryption_key, c.TABLE_KEY_ACTIONS, c.VIA_DYNAMODB),
                (self.poison_queue.encryption_master_key, c.QUEUE_KEY_ACTIONS, c.VIA_SQS),
                (self.on_failure_queue.encryption_master_key, c.QUEUE_KEY_ACTIONS, c.VIA_SQS),
            ],
        )
        if self.payload_bucket is not None:
            grant_payload_reads(self.function, self.payload_bucket)

    def _filter_patterns(self) -> tuple[Mapping[str, object], ...]:
        regions = self.settings.regions
        if regions is None or self.region is None:
            return mapping.PUBLISHER_FILTER_PATTERNS
        return regions.filter_patterns(self.region)

    def _stream_mapping(self, stream: StreamMappingProps) -> lambda_.EventSourceMapping:
        source_mapping = lambda_.EventSourceMapping(
            self,
            "StreamMapping",
            target=self.function,
            event_source_arn=cast(str, self.table.table_stream_arn),
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
            # New rows, and the few changes that can break the writer contract; the publisher's own
            # status updates and TTL deletions never reach it, so they cost no invocations. With regions,
            # only this region's new rows (another region's cost nothing here either).
            filters=[lambda_.FilterCriteria.filter(dict(pattern)) for pattern in self._filter_patterns()],
        )
        # The on-failure destination is set on the L1 resource: the L2 SqsDlq helper would also
        # grant sqs:GetQueueAttributes and sqs:GetQueueUrl, which Lambda does not need.
        cfn_mapping = cast(lambda_.CfnEventSourceMapping, source_mapping.node.default_child)
        cfn_mapping.destination_config = lambda_.CfnEventSourceMapping.DestinationConfigProperty(
            on_failure=lambda_.CfnEventSourceMapping.OnFailureProperty(
                destination=self.on_failure_queue.queue_arn
            )
        )
        return source_mapping
