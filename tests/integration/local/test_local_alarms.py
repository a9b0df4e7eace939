"""The template's CloudWatch alarms, evaluated by the local runtime on the synthesized app: each goes to
ALARM when its metric breaches and back to OK when it recovers, with the state in CloudWatch and a
notification on the alarm topic, driven by the runtime's virtual clock (no waiting)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from outbox import metrics, outputs
from outbox_local.queues import receive_all
from outbox_local.runtime import LocalRuntime


@pytest.fixture
def runtime(app_runtime: LocalRuntime) -> LocalRuntime:
    return app_runtime


def state(runtime: LocalRuntime, alarm: str) -> str:
    [found] = runtime.client("cloudwatch").describe_alarms(AlarmNames=[alarm])["MetricAlarms"]
    return str(found["StateValue"])


def notifications(runtime: LocalRuntime, queue_url: str) -> list[dict[str, Any]]:
    return [
        json.loads(json.loads(m["Body"])["Message"]) for m in receive_all(runtime.client("sqs"), queue_url)
    ]


@pytest.fixture
def alarm_inbox(runtime: LocalRuntime) -> str:
    """A queue subscribed to the stack's alarm topic: what an on-call subscription would receive."""
    sqs = runtime.client("sqs")
    url = sqs.create_queue(QueueName="on-call")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    runtime.client("sns").subscribe(
        TopicArn=runtime.outputs[outputs.ALARM_TOPIC_ARN], Protocol="sqs", Endpoint=arn
    )
    return str(url)


def test_the_poison_queue_alarm_fires_on_a_message_and_clears_a_period_after_it_is_gone(
    runtime: LocalRuntime, alarm_inbox: str
) -> None:
    # Given the stack's alarms evaluated once with nothing wrong
    runtime.evaluate_alarms()
    assert state(runtime, "OutboxStack-Outbox-PoisonQueueDepth") == "OK"
    # (each alarm's first OK was notified, as CloudWatch notifies INSUFFICIENT_DATA -> OK)
    assert {n["AlarmName"] for n in notifications(runtime, alarm_inbox)} >= {
        "OutboxStack-Outbox-PoisonQueueDepth"
    }
    sqs = runtime.client("sqs")
    poison = runtime.outputs[outputs.POISON_QUEUE_URL]
    # When a message lands on the poison queue
    sqs.send_message(QueueUrl=poison, MessageBody="{}")
    moved = runtime.evaluate_alarms()
    # Then PoisonQueueDepth goes to ALARM, and the alarm topic says so
    assert ("OutboxStack-Outbox-PoisonQueueDepth", "OK", "ALARM") in [(t.alarm, t.old, t.new) for t in moved]
    assert state(runtime, "OutboxStack-Outbox-PoisonQueueDepth") == "ALARM"
    [notice] = notifications(runtime, alarm_inbox)
    assert (notice["AlarmName"], notice["NewStateValue"]) == ("OutboxStack-Outbox-PoisonQueueDepth", "ALARM")
    # When the message is taken off the queue, Then the alarm holds for the rest of the period (its maximum
    # was 1), and is OK once a period without messages has begun
    receive_all(sqs, poison)
    runtime.evaluate_alarms()
    assert state(runtime, "OutboxStack-Outbox-PoisonQueueDepth") == "ALARM"
    runtime.clock.advance(60)
    runtime.evaluate_alarms()
    assert state(runtime, "OutboxStack-Outbox-PoisonQueueDepth") == "OK"
    [notice] = notifications(runtime, alarm_inbox)
    assert notice["NewStateValue"] == "OK"


def test_an_alarm_on_a_functions_emf_metric_fires_from_what_the_function_emitted(
    runtime: LocalRuntime,
) -> None:
    # Given the sweeper's HeldAggregates metric, as its EMF output reaches CloudWatch locally
    runtime.evaluate_alarms()
    assert state(runtime, "OutboxStack-Outbox-HeldAggregates") == "OK"
    runtime.client("cloudwatch").put_metric_data(
        Namespace=metrics.NAMESPACE,
        MetricData=[
            {
                "MetricName": metrics.HELD_AGGREGATES,
                "Dimensions": [
                    {
                        "Name": metrics.SERVICE_DIMENSION,
                        "Value": metrics.service_name("OutboxStack-Outbox", metrics.SWEEPER),
                    }
                ],
                "Timestamp": datetime.fromtimestamp(runtime.clock(), UTC),
                "Value": 2,
                "Unit": "Count",
            }
        ],
    )
    # When the alarms are evaluated, Then HeldAggregates is in ALARM
    runtime.evaluate_alarms()
    assert state(runtime, "OutboxStack-Outbox-HeldAggregates") == "ALARM"


def test_publisher_errors_fire_only_after_three_failing_periods_of_five(runtime: LocalRuntime) -> None:
    # Given the publisher failing in each of three periods (Lambda's Errors metric, from the function host)
    assert runtime.host is not None
    publisher = next(
        spec.name for spec in runtime.host.functions if spec.handler.startswith("outbox_publisher")
    )
    runtime.evaluate_alarms()
    for period in range(3):
        runtime.host.errors[publisher] += 1
        runtime.evaluate_alarms()
        # Then it stays OK for the first two, and is ALARM at the third (3 of 5 datapoints)
        expected = "ALARM" if period == 2 else "OK"
        assert state(runtime, "OutboxStack-Outbox-PublisherErrors") == expected
        runtime.clock.advance(60)


def test_a_state_is_kept_only_once_its_change_was_applied_and_notified(runtime: LocalRuntime) -> None:
    # Given the runtime's alarm evaluator, whose states a snapshot saves (a cut may come at any moment)
    evaluator = runtime.alarms
    assert evaluator is not None
    apply = evaluator._apply
    kept_while_applying: dict[str, str | None] = {}
    kept_after: dict[str, str | None] = {}

    def observed_apply(alarm: Any, transition: Any) -> None:
        kept_while_applying[transition.alarm] = evaluator.states().get(transition.alarm)
        apply(alarm, transition)

    evaluator._apply = observed_apply  # type: ignore[method-assign]

    # When the alarms move (each INSUFFICIENT_DATA -> OK, set in CloudWatch and notified)
    moved = runtime.evaluate_alarms()
    kept_after.update(evaluator.states())

    # Then while a change was being set and notified, the state a cut would save was still the old one
    # (a crash then restores the old state and notifies the change again: never a change never notified)
    assert moved
    for transition in moved:
        assert kept_while_applying[transition.alarm] != transition.new
        assert kept_after[transition.alarm] == transition.new
