"""The template's CloudWatch alarms, evaluated locally: moto stores them but never evaluates them.

Each tick reads every alarm moto holds (as the template provisioned them), takes the current value of its
metric, and keeps one datapoint per period (the statistic over what was sampled in it). Over the last
`EvaluationPeriods` periods, the current one included, an alarm is ALARM when at least `DatapointsToAlarm`
of them breach, OK otherwise; missing periods count as `TreatMissingData` says. A change of state is set in
moto (`describe-alarms` shows it, with the reason) and published to the alarm's actions (SNS topics), as
CloudWatch notifies them.

Where a metric's values come from: the functions' EMF metrics in moto's CloudWatch (`outbox_local.
emf_metrics`); `AWS/SQS` queue depth from the queue itself; `AWS/Lambda` `IteratorAge` from the stream
mapping emulator and `Errors` from the function host, which AWS would emit. Unlike CloudWatch, the current
(partial) period counts, so an alarm moves as soon as its metric does; `speedup` shortens every period (the
demo evaluates five-second "minutes").
"""

from __future__ import annotations

import json
import logging
import math
import operator
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

logger = logging.getLogger("outbox_local.alarms")

_COMPARE: Mapping[str, Callable[[float, float], bool]] = {
    "GreaterThanOrEqualToThreshold": operator.ge,
    "GreaterThanThreshold": operator.gt,
    "LessThanThreshold": operator.lt,
    "LessThanOrEqualToThreshold": operator.le,
}
_COMBINE: Mapping[str, Callable[[float, float], float]] = {
    "Maximum": max,
    "Minimum": min,
    "Sum": operator.add,
}


@dataclass
class _History:
    state: str = "INSUFFICIENT_DATA"
    datapoints: dict[int, float] = field(default_factory=dict)
    """Period index (epoch seconds // period) -> the datapoint of that period so far."""


@dataclass(frozen=True)
class Transition:
    alarm: str
    old: str
    new: str
    reason: str


class AlarmEvaluator:
    def __init__(
        self,
        cloudwatch: Any,
        sqs: Any,
        sns: Any,
        *,
        iterator_age_ms: Callable[[str], float | None],
        errors: Callable[[str], int],
        clock: Callable[[], float] = time.time,
        speedup: float = 1.0,
    ) -> None:
        self._cloudwatch = cloudwatch
        self._sqs = sqs
        self._sns = sns
        self._iterator_age_ms = iterator_age_ms
        self._errors = errors
        self._clock = clock
        self._speedup = max(speedup, 1.0)
        self._history: dict[str, _History] = {}
        self._errors_seen: dict[str, int] = {}
        self._queue_urls: dict[str, str] = {}
        """Queue name -> URL: a queue's URL never changes (one deleted and created again gets the same)."""

    def states(self) -> dict[str, str]:
        """Each alarm's state as last evaluated (what a restart resumes from: `resume`)."""
        return {name: history.state for name, history in list(self._history.items())}

    def resume(self, states: Mapping[str, str]) -> None:
        """Evaluate on from these states (a restored runtime's): an alarm whose state holds is not notified
        again, as CloudWatch notifies changes only."""
        for name, state in states.items():
            self._history.setdefault(name, _History()).state = state

    def tick(self) -> list[Transition]:
        """Sample every alarm's metric once and move the alarms whose state changed."""
        transitions = []
        for alarm in self._cloudwatch.describe_alarms(AlarmTypes=["MetricAlarm"]).get("MetricAlarms", []):
            transition = self._evaluate(alarm)
            if transition is not None:
                transitions.append(transition)
        return transitions

    def _evaluate(self, alarm: Mapping[str, Any]) -> Transition | None:
        name = str(alarm["AlarmName"])
        history = self._history.setdefault(name, _History())
        period = max(float(alarm.get("Period", 60)) / self._speedup, 1.0)
        now = self._clock()
        current = math.floor(now / period)
        statistic = str(alarm.get("Statistic", "Maximum"))
        value = self._sample(alarm, statistic, (current * period, now))
        if value is not None:
            combine = _COMBINE.get(statistic, max)
            earlier = history.datapoints.get(current)
            history.datapoints[current] = value if earlier is None else combine(earlier, value)
        periods = int(alarm.get("EvaluationPeriods", 1))
        for old in [index for index in history.datapoints if index <= current - periods]:
            del history.datapoints[old]
        state, reason = _judge(
            alarm, [history.datapoints.get(index) for index in range(current - periods + 1, current + 1)]
        )
        if state is None or state == history.state:
            return None
        transition = Transition(name, history.state, state, reason)
        self._apply(alarm, transition)
        # Kept (and so saved by a snapshot) only once set and notified: a crash in between restores the old
        # state, and the change is notified again, never kept without its notification.
        history.state = state
        return transition

    def _sample(self, alarm: Mapping[str, Any], statistic: str, window: tuple[float, float]) -> float | None:
        namespace, metric = str(alarm.get("Namespace", "")), str(alarm.get("MetricName", ""))
        dimensions = {str(d["Name"]): str(d["Value"]) for d in alarm.get("Dimensions", [])}
        try:
            if namespace == "AWS/SQS" and metric == "ApproximateNumberOfMessagesVisible":
                name = dimensions["QueueName"]
                if name not in self._queue_urls:
                    self._queue_urls[name] = str(self._sqs.get_queue_url(QueueName=name)["QueueUrl"])
                url = self._queue_urls[name]
                attributes = self._sqs.get_queue_attributes(
                    QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
                )
                return float(attributes["Attributes"]["ApproximateNumberOfMessages"])
            if namespace == "AWS/Lambda" and metric == "IteratorAge":
                return self._iterator_age_ms(dimensions["FunctionName"])
            if namespace == "AWS/Lambda" and metric == "Errors":
                function = dimensions["FunctionName"]
                total = self._errors(function)
                new = total - self._errors_seen.get(function, 0)
                self._errors_seen[function] = total
                return float(new)
            return self._recorded(namespace, metric, dimensions, statistic, window)
        except Exception:  # an alarm whose metric cannot be read stays as it is; the others go on
            logger.warning("alarm %s: its metric could not be read", alarm.get("AlarmName"), exc_info=True)
            return None

    def _recorded(
        self,
        namespace: str,
        metric: str,
        dimensions: Mapping[str, str],
        statistic: str,
        window: tuple[float, float],
    ) -> float | None:
        start, end = window
        answer = self._cloudwatch.get_metric_statistics(
            Namespace=namespace,
            MetricName=metric,
            Dimensions=[{"Name": key, "Value": value} for key, value in dimensions.items()],
            StartTime=datetime.fromtimestamp(start, UTC),
            EndTime=datetime.fromtimestamp(end + 1, UTC),
            Period=max(60, int(end - start) + 1),
            Statistics=[statistic],
        )
        values = [float(point[statistic]) for point in answer.get("Datapoints", []) if statistic in point]
        if not values:
            return None
        if statistic == "Sum":
            return sum(values)
        return min(values) if statistic == "Minimum" else max(values)

    def _apply(self, alarm: Mapping[str, Any], transition: Transition) -> None:
        self._cloudwatch.set_alarm_state(
            AlarmName=transition.alarm, StateValue=transition.new, StateReason=transition.reason
        )
        logger.info(
            "alarm %s: %s -> %s (%s)", transition.alarm, transition.old, transition.new, transition.reason
        )
        actions = alarm.get("AlarmActions" if transition.new == "ALARM" else "OKActions", [])
        if not alarm.get("ActionsEnabled", True):
            return
        message = json.dumps(
            {
                "AlarmName": transition.alarm,
                "AlarmDescription": alarm.get("AlarmDescription"),
                "NewStateValue": transition.new,
                "OldStateValue": transition.old,
                "NewStateReason": transition.reason,
                "StateChangeTime": datetime.fromtimestamp(self._clock(), UTC).isoformat(),
            }
        )
        for action in actions:
            if ":sns:" in str(action):
                self._sns.publish(
                    TopicArn=action, Subject=f"{transition.new}: {transition.alarm}"[:100], Message=message
                )


def _judge(alarm: Mapping[str, Any], datapoints: list[float | None]) -> tuple[str | None, str]:
    compare = _COMPARE.get(str(alarm.get("ComparisonOperator")))
    if compare is None:
        return None, "unsupported comparison"
    threshold = float(alarm.get("Threshold", 0))
    needed = int(alarm.get("DatapointsToAlarm") or alarm.get("EvaluationPeriods", 1))
    missing = str(alarm.get("TreatMissingData", "missing"))
    breaching = 0
    present = 0
    for value in datapoints:
        if value is None:
            if missing == "breaching":
                breaching += 1
                present += 1
            elif missing == "notBreaching":
                present += 1
            continue
        present += 1
        breaching += compare(value, threshold)
    if breaching >= needed:
        return (
            "ALARM",
            f"{breaching} of the last {len(datapoints)} datapoints breached the threshold ({threshold})",
        )
    if present == 0:
        return None, "no data"
    return "OK", f"{breaching} of the last {len(datapoints)} datapoints breached the threshold ({threshold})"


class RegionalAlarms:
    """The alarms of the stacks of other regions than the runtime's: an evaluator per region, made on first
    use (each region's CloudWatch holds its own alarms and metrics)."""

    def __init__(self, evaluator: Callable[[str], AlarmEvaluator]) -> None:
        self._evaluator = evaluator
        self._by_region: dict[str, AlarmEvaluator] = {}

    def tick(self, regions: Iterable[str]) -> list[Transition]:
        """Evaluate the alarms of `regions` (those not cut off)."""
        transitions = []
        for region in regions:
            if region not in self._by_region:
                self._by_region[region] = self._evaluator(region)
            transitions += self._by_region[region].tick()
        return transitions

    def states(self) -> dict[str, dict[str, str]]:
        return {region: evaluator.states() for region, evaluator in list(self._by_region.items())}

    def resume(self, states: Mapping[str, Mapping[str, str]]) -> None:
        for region, held in states.items():
            self._by_region.setdefault(region, self._evaluator(region)).resume(held)
