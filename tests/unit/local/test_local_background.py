"""What the runtime does on its own threads in the background (outbox_local.background): each mapping polls on
a thread of its own, and `wait_until_idle` answers only once all of them were idle at once after the last work
any did (work one poller does may feed another). Also function metrics, gathered in the background into few
PutMetricData calls."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from outbox_local import emf_metrics
from outbox_local.background import Background
from outbox_local.emf_metrics import EmfMetricsForwarder
from outbox_local.poll_activity import QuietPollers
from outbox_local.stream_mapping import StepKind, StepReport

SAFETY_S = 60.0
"""Only so that a broken implementation fails instead of hanging: nothing waits for it to pass."""


def test_pollers_are_quiet_only_when_each_polled_idle_after_the_last_work_of_any() -> None:
    # Given two pollers, and a caller waiting from now on
    quiet = QuietPollers(["a", "b"])
    mark = quiet.mark()
    # When only a has polled idle, Then not quiet: b has not vouched for anything written before the mark
    poll = quiet.begin("a")
    quiet.end("a", poll, idle=True, worked=False)
    assert not quiet.wait_until_idle(0, after=mark)
    # When b then did work (it may have written what a reads), Then a's idle poll no longer counts
    poll = quiet.begin("b")
    quiet.end("b", poll, idle=False, worked=True)
    poll = quiet.begin("b")
    quiet.end("b", poll, idle=True, worked=False)
    assert not quiet.wait_until_idle(0, after=mark)
    # When a polls idle again, after b's work, Then both were idle at once
    poll = quiet.begin("a")
    quiet.end("a", poll, idle=True, worked=False)
    assert quiet.wait_until_idle(0, after=mark)
    # and a poll under way is not idle yet
    quiet.begin("b")
    assert not quiet.wait_until_idle(0, after=mark)


class Producer:
    """Hands one item per poll to the consumer (as a function invoked by one mapping writes to another's
    source)."""

    name = "producer"

    def __init__(self, items: int, consumer: Consumer) -> None:
        self.items = items
        self.consumer = consumer

    def poll_once(self) -> list[StepReport]:
        if not self.items:
            return [StepReport(StepKind.IDLE)]
        self.items -= 1
        self.consumer.inbox.append(self.items)
        return [StepReport(StepKind.SUCCEEDED)]


class Consumer:
    name = "consumer"

    def __init__(self) -> None:
        self.inbox: list[int] = []
        self.processed: list[int] = []

    def poll_once(self) -> list[StepReport]:
        if not self.inbox:
            return [StepReport(StepKind.IDLE)]
        self.processed.append(self.inbox.pop(0))
        return [StepReport(StepKind.SUCCEEDED)]


class Failing:
    name = "failing"
    polls = 0

    def poll_once(self) -> list[StepReport]:
        self.polls += 1
        if self.polls == 1:
            raise RuntimeError("the source is unreachable")
        return [StepReport(StepKind.IDLE)]


def test_wait_until_idle_returns_only_once_work_handed_from_one_poller_to_another_is_done() -> None:
    # Given a producer that feeds a consumer, and a poller whose first poll fails, each on its own thread
    consumer = Consumer()
    failing = Failing()
    fired = iter([1])
    background = Background(
        [Producer(20, consumer), consumer, failing],
        fire_schedules=lambda: next(fired, 0),
        evaluate_alarms=lambda: None,
        poll_interval_s=0.01,
        alarm_interval_s=SAFETY_S,
    )
    before = set(threading.enumerate())
    background.start()
    try:
        # When the caller waits until the background is idle
        assert background.wait_until_idle(SAFETY_S)
        # Then everything produced was consumed by then, and the failed poll did not stop its thread
        assert sorted(consumer.processed) == list(range(20))
        assert failing.polls > 1
    finally:
        background.stop()
    # and stopping ended every thread it started
    assert [thread for thread in threading.enumerate() if thread not in before] == []


class CloudWatch:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def put_metric_data(self, **arguments: Any) -> None:
        self.calls.append(arguments)


def emf(name: str, value: float) -> str:
    """One EMF document, as Powertools prints it."""
    directive = {
        "Namespace": "Outbox",
        "Dimensions": [["service"]],
        "Metrics": [{"Name": name, "Unit": "Count"}],
    }
    return json.dumps(
        {"_aws": {"Timestamp": 1796000000000, "CloudWatchMetrics": [directive]}, "service": "s", name: value}
    )


def test_in_the_background_metrics_printed_meanwhile_go_in_one_put_metric_data(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a forwarder in the background that gathers until it is closed
    monkeypatch.setattr(emf_metrics, "GATHER_S", SAFETY_S)
    cloudwatch = CloudWatch()
    forwarder = EmfMetricsForwarder(cloudwatch, in_background=True)

    # When three invocations of two functions print metrics, and the forwarder is then closed
    forwarder.forward("publisher", emf("EventsPublished", 3))
    forwarder.forward("api", emf("OrdersPlaced", 1) + "\nnot a metric\n")
    forwarder.forward("publisher", emf("EventsPublished", 2))
    forwarder.close()

    # Then all of it went into CloudWatch in one request, nothing was lost
    [call] = cloudwatch.calls
    assert call["Namespace"] == "Outbox"
    assert sorted((datum["MetricName"], datum["Value"]) for datum in call["MetricData"]) == [
        ("EventsPublished", 2.0),
        ("EventsPublished", 3.0),
        ("OrdersPlaced", 1.0),
    ]
