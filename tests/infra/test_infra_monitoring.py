"""Alarms (what they watch, their thresholds, where they notify) and the dashboard."""

import json
from typing import Any

import pytest

from tests.infra.template_queries import function_by_handler, only, resources

PUBLISHER_HANDLER = "outbox_publisher.handler.handler"
SWEEPER_HANDLER = "outbox_sweeper.handler.handler"


def _alarm(template: dict[str, Any], prefix: str) -> dict[str, Any]:
    _, alarm = only(template, "AWS::CloudWatch::Alarm", prefix)
    props: dict[str, Any] = alarm["Properties"]
    return props


def test_iterator_age_alarm_watches_the_publishers_maximum(template: dict[str, Any]) -> None:
    # Given the iterator-age alarm
    publisher_id, _ = function_by_handler(template, PUBLISHER_HANDLER)
    alarm = _alarm(template, "OutboxMonitoringIteratorAgeAlarm")

    # When its metric is read
    # Then it is AWS/Lambda IteratorAge (Maximum) of the publisher, at 5 minutes for 5 minutes
    assert (alarm["Namespace"], alarm["MetricName"], alarm["Statistic"]) == (
        "AWS/Lambda",
        "IteratorAge",
        "Maximum",
    )
    assert alarm["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": publisher_id}}]
    assert alarm["Threshold"] == 300_000
    assert alarm["EvaluationPeriods"] == 5
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"


@pytest.mark.parametrize(
    ("alarm_prefix", "queue_prefix"),
    [
        ("OutboxMonitoringPoisonQueueDepthAlarm", "OutboxFailureQueuesPoisonQueue"),
        ("OutboxMonitoringOnFailureQueueDepthAlarm", "OutboxFailureQueuesOnFailureQueue"),
    ],
)
def test_queue_depth_alarms_fire_on_the_first_message(
    template: dict[str, Any], alarm_prefix: str, queue_prefix: str
) -> None:
    # Given a dead-letter queue and its alarm
    queue_id, _ = only(template, "AWS::SQS::Queue", queue_prefix)
    alarm = _alarm(template, alarm_prefix)

    # When the alarm's metric is read
    # Then it watches that queue's visible messages and fires at one
    assert (alarm["Namespace"], alarm["MetricName"]) == ("AWS/SQS", "ApproximateNumberOfMessagesVisible")
    assert alarm["Dimensions"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [queue_id, "QueueName"]}}]
    assert alarm["Threshold"] == 1
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"


def test_publisher_errors_alarm_needs_sustained_errors(template: dict[str, Any]) -> None:
    # Given the publisher-errors alarm
    publisher_id, _ = function_by_handler(template, PUBLISHER_HANDLER)
    alarm = _alarm(template, "OutboxMonitoringPublisherErrorsAlarm")

    # When its metric and evaluation are read
    # Then it is the publisher's Errors sum, in 3 of 5 minutes
    assert (alarm["Namespace"], alarm["MetricName"], alarm["Statistic"]) == ("AWS/Lambda", "Errors", "Sum")
    assert alarm["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": publisher_id}}]
    assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"], alarm["Threshold"]) == (5, 3, 1)


def test_oldest_pending_age_alarm_watches_the_sweeper_metric(template: dict[str, Any]) -> None:
    # Given the oldest-pending-age alarm
    alarm = _alarm(template, "OutboxMonitoringOldestPendingAgeAlarm")

    # When its metric is read
    # Then it is Outbox/OldestPendingAgeSeconds (service=OutboxStack-Outbox-sweeper), 15 minutes for 5
    # minutes; no data is a breach: the sweeper reports on every run, so silence means it is not running
    assert (alarm["Namespace"], alarm["MetricName"], alarm["Statistic"]) == (
        "Outbox",
        "OldestPendingAgeSeconds",
        "Maximum",
    )
    assert alarm["Dimensions"] == [{"Name": "service", "Value": "OutboxStack-Outbox-sweeper"}]
    assert (alarm["Threshold"], alarm["EvaluationPeriods"]) == (900, 5)
    assert alarm["TreatMissingData"] == "breaching"


def test_held_aggregates_alarm_fires_on_the_first_held_aggregate(template: dict[str, Any]) -> None:
    # Given the held-aggregates alarm
    alarm = _alarm(template, "OutboxMonitoringHeldAggregatesAlarm")

    # When its metric is read
    # Then it is the sweeper's HeldAggregates, at one, in one minute
    assert (alarm["Namespace"], alarm["MetricName"], alarm["Statistic"]) == (
        "Outbox",
        "HeldAggregates",
        "Maximum",
    )
    assert alarm["Dimensions"] == [{"Name": "service", "Value": "OutboxStack-Outbox-sweeper"}]
    assert (alarm["Threshold"], alarm["EvaluationPeriods"]) == (1, 1)
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"


def test_writer_contract_alarm_fires_on_the_first_break_the_publisher_sees(template: dict[str, Any]) -> None:
    # Given the writer-contract alarm
    alarm = _alarm(template, "OutboxMonitoringWriterContractAlarm")

    # When its metric is read
    # Then it is the publisher's WriterContractViolations sum, at one, in one minute
    assert (alarm["Namespace"], alarm["MetricName"], alarm["Statistic"]) == (
        "Outbox",
        "WriterContractViolations",
        "Sum",
    )
    assert alarm["Dimensions"] == [{"Name": "service", "Value": "OutboxStack-Outbox-publisher"}]
    assert (alarm["Threshold"], alarm["EvaluationPeriods"]) == (1, 1)
    assert alarm["AlarmName"] == "OutboxStack-Outbox-WriterContractViolations"


def test_sweeper_errors_alarm_needs_sustained_errors(template: dict[str, Any]) -> None:
    # Given the sweeper-errors alarm
    sweeper_id, _ = function_by_handler(template, SWEEPER_HANDLER)
    alarm = _alarm(template, "OutboxMonitoringSweeperErrorsAlarm")

    # When its metric is read
    # Then it is the sweeper's Errors sum, in 3 of 5 minutes
    assert (alarm["Namespace"], alarm["MetricName"], alarm["Statistic"]) == ("AWS/Lambda", "Errors", "Sum")
    assert alarm["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": sweeper_id}}]
    assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"], alarm["Threshold"]) == (5, 3, 1)


def test_every_alarm_notifies_the_alarm_topic_on_alarm_and_ok(template: dict[str, Any]) -> None:
    # Given the alarm topic and every alarm
    topic_id, _ = only(template, "AWS::SNS::Topic", "OutboxMonitoringAlarmTopic")
    alarms = resources(template, "AWS::CloudWatch::Alarm").values()

    # When their actions are read
    # Then there are ten (the outbox's eight, one per sample consumer), each sending both ALARM and OK
    # to that topic, each linking its section of the runbook (the outbox's named after the outbox)
    assert len(alarms) == 10
    anchors = set()
    for alarm in alarms:
        assert alarm["Properties"]["AlarmActions"] == [{"Ref": topic_id}]
        assert alarm["Properties"]["OKActions"] == [{"Ref": topic_id}]
        name, description = alarm["Properties"]["AlarmName"], alarm["Properties"]["AlarmDescription"]
        prefix, _, anchor = description.rpartition(" Runbook: docs/runbook.md#")
        assert prefix, description
        anchors.add(anchor)
        if anchor != "consumerdeadletters":
            assert name.lower() == f"outboxstack-outbox-{anchor}"
    assert anchors == {
        "publisheriteratorage",
        "poisonqueuedepth",
        "onfailurequeuedepth",
        "publishererrors",
        "oldestpendingage",
        "heldaggregates",
        "writercontractviolations",
        "sweepererrors",
        "consumerdeadletters",
    }


def test_dashboard_shows_the_pipeline(template: dict[str, Any]) -> None:
    # Given the one dashboard
    _, dashboard = only(template, "AWS::CloudWatch::Dashboard")

    # When its body is rendered to text (it is a Fn::Join of literals and references)
    body = json.dumps(dashboard["Properties"]["DashboardBody"])

    # Then it graphs iterator age, publish rate, failures, both queue depths, pending age and the sweeper
    for metric in (
        "IteratorAge",
        "EventsPublished",
        "EventsFailed",
        "PoisonEvents",
        "Errors",
        "ApproximateNumberOfMessagesVisible",
        "OldestPendingAgeSeconds",
        "PendingEvents",
        "SweptEvents",
        "HeldAggregates",
        "HeldEvents",
        "GaveUpEvents",
    ):
        assert metric in body, metric
    assert dashboard["Properties"]["DashboardName"] == "OutboxStack-Outbox"
