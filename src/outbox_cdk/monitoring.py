"""Alarms and one dashboard for the outbox pipeline; docs/runbook.md has a section per alarm."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from aws_cdk import Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from outbox import metrics, outputs
from outbox_cdk import constants as c
from outbox_cdk.naming import outbox_name_for

RUNBOOK: Final = "docs/runbook.md"


def runbook_link(alarm_short_name: str) -> str:
    """Where an alarm's description sends the one it pages: its section of the runbook."""
    return f"Runbook: {RUNBOOK}#{alarm_short_name.lower()}"


@dataclass(frozen=True)
class AlarmThresholds:
    """When each alarm fires. Defaults suit a publisher that normally lags by seconds."""

    # Streams keep records 24 h; page long before a record could age out of the stream.
    iterator_age_ms: int = c.ITERATOR_AGE_THRESHOLD_MS
    iterator_age_evaluation_periods: int = c.ITERATOR_AGE_EVALUATION_PERIODS
    # Any message in either dead-letter queue is an event that has not been announced.
    queue_depth: int = c.QUEUE_DEPTH_THRESHOLD
    publisher_errors: int = c.PUBLISHER_ERRORS_THRESHOLD
    publisher_errors_evaluation_periods: int = c.PUBLISHER_ERRORS_EVALUATION_PERIODS
    publisher_errors_datapoints_to_alarm: int = c.PUBLISHER_ERRORS_DATAPOINTS_TO_ALARM
    oldest_pending_age_seconds: int = c.OLDEST_PENDING_AGE_THRESHOLD_SECONDS
    # Also fires when the sweeper reports nothing for this many minutes: it runs every minute.
    oldest_pending_age_evaluation_periods: int = c.OLDEST_PENDING_AGE_EVALUATION_PERIODS
    held_aggregates: int = c.HELD_AGGREGATES_THRESHOLD
    writer_contract_violations: int = c.WRITER_CONTRACT_VIOLATIONS_THRESHOLD
    sweeper_errors: int = c.SWEEPER_ERRORS_THRESHOLD
    sweeper_errors_evaluation_periods: int = c.SWEEPER_ERRORS_EVALUATION_PERIODS
    sweeper_errors_datapoints_to_alarm: int = c.SWEEPER_ERRORS_DATAPOINTS_TO_ALARM


def service_metric(
    metric_name: str, service: str, statistic: str, period: Duration | None = None
) -> cloudwatch.Metric:
    """A metric the handlers emit through Powertools (namespace + ``service`` dimension)."""
    return cloudwatch.Metric(
        namespace=metrics.NAMESPACE,
        metric_name=metric_name,
        dimensions_map={metrics.SERVICE_DIMENSION: service},
        statistic=statistic,
        period=period or Duration.minutes(c.ALARM_PERIOD_MINUTES),
    )


def region_metric(metric_name: str, service: str, region: str, statistic: str) -> cloudwatch.Metric:
    """A region metric the sweeper emits (`service` and `Region` dimensions)."""
    return cloudwatch.Metric(
        namespace=metrics.NAMESPACE,
        metric_name=metric_name,
        dimensions_map={metrics.SERVICE_DIMENSION: service, metrics.REGION_DIMENSION: region},
        statistic=statistic,
        period=Duration.minutes(c.ALARM_PERIOD_MINUTES),
    )


@dataclass(frozen=True)
class RegionWatch:
    """What the region alarms of one region's outbox watch: the region, and the takeover time (the
    heartbeat-age alarm's threshold)."""

    region: str
    takeover_after_seconds: int


class AlarmTopic(Construct):
    """An SNS topic CloudWatch alarms can publish to, encrypted with its own rotating key.

    CloudWatch cannot use the AWS-managed SNS key, so this topic (unlike the events topic) needs a
    customer-managed key whose policy lets cloudwatch.amazonaws.com encrypt with it. Pass `key` to use
    one the app already has instead; its policy must allow CloudWatch (outbox_cdk.encryption.OutboxKey does).
    """

    def __init__(self, scope: Construct, construct_id: str, *, key: kms.IKey | None = None) -> None:
        super().__init__(scope, construct_id)
        cloudwatch_principal = iam.ServicePrincipal("cloudwatch.amazonaws.com")
        self.key: kms.IKey = key or kms.Key(
            self, "Key", enable_key_rotation=True, description="Outbox alarm topic encryption"
        )
        if key is None:
            self.key.add_to_resource_policy(
                iam.PolicyStatement(
                    principals=[cloudwatch_principal],
                    actions=list(c.ALARM_TOPIC_KEY_ACTIONS),
                    resources=["*"],  # in a key policy "*" means this key
                    # Only on behalf of this account's alarms (the confused-deputy guard AWS recommends).
                    conditions={"StringEquals": {"aws:SourceAccount": Stack.of(self).account}},
                )
            )
        self.topic = sns.Topic(self, "Topic", master_key=self.key, enforce_ssl=True)
        # enforce_ssl replaces the default topic policy, so allow CloudWatch (this account) explicitly.
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[cloudwatch_principal],
                actions=["sns:Publish"],
                resources=[self.topic.topic_arn],
                conditions={"StringEquals": {"aws:SourceAccount": Stack.of(self).account}},
            )
        )


class OutboxMonitoring(Construct):
    """Eight alarms (every action to ``alarm_topic``) and a dashboard of the publishing pipeline: the
    publisher, the sweeper, and the two queues where undelivered events wait.

    ``outbox_name`` (`outbox_cdk.naming`) names the alarms (`<outbox_name>-PublisherIteratorAge`, ...) and the
    dashboard (`<outbox_name>`), and says which `service` the metric alarms watch: give it the publisher's
    (`publisher.outbox_name`). Default: the stack's name and the path of the construct that holds this one,
    as the publisher's default is.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        publisher_function: lambda_.IFunction,
        sweeper_function: lambda_.IFunction,
        poison_queue: sqs.IQueue,
        on_failure_queue: sqs.IQueue,
        alarm_topic: sns.ITopic | None = None,
        thresholds: AlarmThresholds | None = None,
        encryption_key: kms.IKey | None = None,
        outbox_name: str | None = None,
        region: RegionWatch | None = None,
    ) -> None:
        """`encryption_key`: the key of the alarm topic created here when no `alarm_topic` is given (None:
        a key of its own). `region`: with regions (outbox_cdk.regions), this region's two alarms more."""
        super().__init__(scope, construct_id)
        thresholds = thresholds or AlarmThresholds()
        self.alarm_topic: sns.ITopic = alarm_topic or AlarmTopic(self, "AlarmTopic", key=encryption_key).topic
        self.outbox_name = outbox_name_for(scope, outbox_name)
        publisher = metrics.service_name(self.outbox_name, metrics.PUBLISHER)
        sweeper = metrics.service_name(self.outbox_name, metrics.SWEEPER)
        period = Duration.minutes(c.ALARM_PERIOD_MINUTES)

        iterator_age = publisher_function.metric("IteratorAge", statistic="Maximum", period=period)
        errors = publisher_function.metric_errors(statistic="Sum", period=period)
        poison_depth = queue_depth(poison_queue)
        on_failure_depth = queue_depth(on_failure_queue)
        pending_age = service_metric(metrics.OLDEST_PENDING_AGE_SECONDS, sweeper, "Maximum")
        held_aggregates = service_metric(metrics.HELD_AGGREGATES, sweeper, "Maximum")
        # The publisher sees every break the stream shows; the sweeper's (an event_id reused within its run)
        # also reach the poison queue, whose alarm covers them.
        violations = service_metric(metrics.WRITER_CONTRACT_VIOLATIONS, publisher, "Sum")
        sweeper_errors = sweeper_function.metric_errors(statistic="Sum", period=period)

        self.iterator_age_alarm = self._alarm(
            "IteratorAgeAlarm",
            "PublisherIteratorAge",
            "Publisher lags behind the Outbox stream.",
            iterator_age,
            threshold=thresholds.iterator_age_ms,
            evaluation_periods=thresholds.iterator_age_evaluation_periods,
        )
        self.poison_queue_alarm = self._alarm(
            "PoisonQueueDepthAlarm",
            "PoisonQueueDepth",
            "Events that can never be published are waiting.",
            poison_depth,
            threshold=thresholds.queue_depth,
        )
        self.on_failure_queue_alarm = self._alarm(
            "OnFailureQueueDepthAlarm",
            "OnFailureQueueDepth",
            "The stream mapping gave up on a batch.",
            on_failure_depth,
            threshold=thresholds.queue_depth,
        )
        self.publisher_errors_alarm = self._alarm(
            "PublisherErrorsAlarm",
            "PublisherErrors",
            "Publisher invocations fail (crash, timeout).",
            errors,
            threshold=thresholds.publisher_errors,
            evaluation_periods=thresholds.publisher_errors_evaluation_periods,
            datapoints_to_alarm=thresholds.publisher_errors_datapoints_to_alarm,
        )
        # The sweeper reports on every run, also when idle: no data means it is not running, and then
        # nothing delivers what the stream strands. That is a breach.
        self.oldest_pending_age_alarm = self._alarm(
            "OldestPendingAgeAlarm",
            "OldestPendingAge",
            "An outbox row has been PENDING too long, or the sweeper is not reporting.",
            pending_age,
            threshold=thresholds.oldest_pending_age_seconds,
            evaluation_periods=thresholds.oldest_pending_age_evaluation_periods,
            missing=cloudwatch.TreatMissingData.BREACHING,
        )
        self.held_aggregates_alarm = self._alarm(
            "HeldAggregatesAlarm",
            "HeldAggregates",
            "An aggregate's events wait behind a FAILED event.",
            held_aggregates,
            threshold=thresholds.held_aggregates,
        )
        self.writer_contract_alarm = self._alarm(
            "WriterContractAlarm",
            "WriterContractViolations",
            "Another writer broke the outbox row contract.",
            violations,
            threshold=thresholds.writer_contract_violations,
        )
        self.sweeper_errors_alarm = self._alarm(
            "SweeperErrorsAlarm",
            "SweeperErrors",
            "Sweeper runs fail (configuration, crash, timeout).",
            sweeper_errors,
            threshold=thresholds.sweeper_errors,
            evaluation_periods=thresholds.sweeper_errors_evaluation_periods,
            datapoints_to_alarm=thresholds.sweeper_errors_datapoints_to_alarm,
        )

        self.dashboard = cloudwatch.Dashboard(self, "Dashboard", dashboard_name=self.outbox_name)
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Publisher iterator age (max, ms)",
                left=[iterator_age],
                left_annotations=[
                    cloudwatch.HorizontalAnnotation(value=thresholds.iterator_age_ms, label="alarm")
                ],
            ),
            cloudwatch.GraphWidget(
                title="Publish rate (events/min)",
                left=[service_metric(metrics.EVENTS_PUBLISHED, publisher, "Sum")],
                right=[service_metric(metrics.PUBLISH_LATENCY_MS, publisher, "p99")],
            ),
            cloudwatch.GraphWidget(
                title="Failures",
                left=[
                    service_metric(metrics.EVENTS_FAILED, publisher, "Sum"),
                    service_metric(metrics.UNDELIVERED_EVENTS, publisher, "Sum"),
                    service_metric(metrics.POISON_EVENTS, publisher, "Sum"),
                    service_metric(metrics.RECORDS_SKIPPED, publisher, "Sum"),
                    errors,
                ],
            ),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Poison and on-failure queue depth", left=[poison_depth, on_failure_depth]
            ),
            cloudwatch.GraphWidget(
                title="Oldest pending outbox row (s)",
                left=[pending_age],
                left_annotations=[
                    cloudwatch.HorizontalAnnotation(
                        value=thresholds.oldest_pending_age_seconds, label="alarm"
                    )
                ],
            ),
            cloudwatch.GraphWidget(
                title="Sweeper: pending, swept, held",
                left=[
                    service_metric(metrics.PENDING_EVENTS, sweeper, "Maximum"),
                    service_metric(metrics.SWEPT_EVENTS, sweeper, "Sum"),
                    service_metric(metrics.BACKED_OFF_EVENTS, sweeper, "Sum"),
                    service_metric(metrics.GAVE_UP_EVENTS, sweeper, "Sum"),
                ],
                right=[
                    held_aggregates,
                    service_metric(metrics.HELD_EVENTS, publisher, "Sum"),
                ],
            ),
        )
        self.region_heartbeat_alarm: cloudwatch.Alarm | None = None
        self.takeover_alarm: cloudwatch.Alarm | None = None
        if region is not None:
            self._region_alarms(region, sweeper)
        self.dashboard.add_widgets(
            cloudwatch.AlarmStatusWidget(title="Alarms", alarms=self.alarms, width=24),
        )

    def _region_alarms(self, region: RegionWatch, sweeper: str) -> None:
        """A peer silent for the takeover time (its rows are about to pass, or have passed, to another
        region), and a takeover in progress here: both need an operator to look (docs/runbook.md)."""
        heartbeat_age = region_metric(metrics.REGION_HEARTBEAT_AGE_SECONDS, sweeper, region.region, "Maximum")
        taking = region_metric(metrics.TAKEOVER_IN_PROGRESS, sweeper, region.region, "Maximum")
        self.region_heartbeat_alarm = self._alarm(
            "RegionHeartbeatAgeAlarm",
            "RegionHeartbeatAge",
            f"A peer region's heartbeat, as {region.region} reads it, is older than the takeover time.",
            heartbeat_age,
            threshold=region.takeover_after_seconds,
        )
        self.takeover_alarm = self._alarm(
            "TakeoverInProgressAlarm",
            "TakeoverInProgress",
            f"{region.region} publishes the rows of a region it took over.",
            taking,
            threshold=1,
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title=f"Regions as {region.region} sees them: oldest peer heartbeat (s)",
                left=[heartbeat_age],
                left_annotations=[
                    cloudwatch.HorizontalAnnotation(value=region.takeover_after_seconds, label="takeover")
                ],
            ),
            cloudwatch.GraphWidget(title=f"Origins {region.region} has taken over", left=[taking]),
        )

    @property
    def alarms(self) -> list[cloudwatch.Alarm]:
        region_alarms = [alarm for alarm in (self.region_heartbeat_alarm, self.takeover_alarm) if alarm]
        return [
            self.iterator_age_alarm,
            self.poison_queue_alarm,
            self.on_failure_queue_alarm,
            self.publisher_errors_alarm,
            self.oldest_pending_age_alarm,
            self.held_aggregates_alarm,
            self.writer_contract_alarm,
            self.sweeper_errors_alarm,
            *region_alarms,
        ]

    def _alarm(
        self,
        construct_id: str,
        short_name: str,
        description: str,
        metric: cloudwatch.IMetric,
        *,
        threshold: float,
        evaluation_periods: int = 1,
        datapoints_to_alarm: int | None = None,
        # No data means no traffic, which is healthy for every alarm but the sweeper's age.
        missing: cloudwatch.TreatMissingData = cloudwatch.TreatMissingData.NOT_BREACHING,
    ) -> cloudwatch.Alarm:
        return threshold_alarm(
            self,
            construct_id,
            name=outputs.alarm_name(self.outbox_name, short_name),
            description=f"{description} {runbook_link(short_name)}",
            metric=metric,
            threshold=threshold,
            topic=self.alarm_topic,
            evaluation_periods=evaluation_periods,
            datapoints_to_alarm=datapoints_to_alarm,
            missing=missing,
        )


def threshold_alarm(
    scope: Construct,
    construct_id: str,
    *,
    name: str,
    description: str,
    metric: cloudwatch.IMetric,
    threshold: float,
    topic: sns.ITopic | None,
    evaluation_periods: int = 1,
    datapoints_to_alarm: int | None = None,
    missing: cloudwatch.TreatMissingData = cloudwatch.TreatMissingData.NOT_BREACHING,
) -> cloudwatch.Alarm:
    """An alarm at `metric` >= `threshold`, notifying `topic` (when given) on ALARM and on OK."""
    alarm = cloudwatch.Alarm(
        scope,
        construct_id,
        alarm_name=name,
        alarm_description=description,
        metric=metric,
        threshold=threshold,
        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        evaluation_periods=evaluation_periods,
        datapoints_to_alarm=datapoints_to_alarm,
        treat_missing_data=missing,
    )
    if topic is not None:
        action = cw_actions.SnsAction(topic)
        alarm.add_alarm_action(action)
        alarm.add_ok_action(action)
    return alarm


def queue_depth(queue: sqs.IQueue) -> cloudwatch.Metric:
    """Messages waiting in `queue`, at most, per alarm period: what every queue-depth alarm watches."""
    return queue.metric_approximate_number_of_messages_visible(
        statistic="Maximum", period=Duration.minutes(c.ALARM_PERIOD_MINUTES)
    )
