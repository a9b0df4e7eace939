"""Many values of one metric (the per-event PublishLatencyMs), each added exactly as Powertools'
`Metrics.add_metric` adds it, without its per-call cost.

`add_metric` formats a debug line holding the whole metric, every value so far, on each call, whether or not
it is logged: for one value per event that was the largest single share of the publisher's own CPU per record,
and it grows with the batch. Powertools' CloudWatch EMF provider keeps a metric's values in a list
(`metric_set[name]["Value"]`) and publishes the set when a list reaches `MAX_METRICS` values, so a value that
neither starts a metric nor fills it is only appended: that is done here directly. Every other value goes
through `add_metric` itself: the first of a metric set (its name, unit and resolution checked and stored),
the one that fills it (the flush), every value while Powertools' debug logging is on (its debug lines), and
every value of any other provider. One value per event, as before: the same EMF, flushed at the same values
(tests/unit/publisher/test_metric_values.py compares the two).
"""

from __future__ import annotations

import logging
import numbers
from collections.abc import Sequence

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.exceptions import MetricValueError
from aws_lambda_powertools.metrics.provider.cloudwatch_emf import cloudwatch
from aws_lambda_powertools.metrics.provider.cloudwatch_emf.constants import MAX_METRICS

_POWERTOOLS_LOG = logging.getLogger(cloudwatch.__name__)


def add_values(metrics: Metrics, name: str, unit: MetricUnit, values: Sequence[float]) -> None:
    """`metrics.add_metric(name=name, unit=unit, value=value)` for each value, in order."""
    provider = metrics.provider
    if type(provider) is not cloudwatch.AmazonCloudWatchEMFProvider or _POWERTOOLS_LOG.isEnabledFor(
        logging.DEBUG
    ):
        for value in values:
            metrics.add_metric(name=name, unit=unit, value=value)
        return
    stored: list[float] | None = None
    """The metric's values, while appending one is all `add_metric` would do (its unit and resolution, which
    it sets again on each call, are already these)."""
    for value in values:
        if stored is not None and len(stored) < MAX_METRICS - 1:
            if not isinstance(value, numbers.Number):  # add_metric's own check, and its words
                raise MetricValueError(f"{value} is not a valid number")
            stored.append(float(value))
            continue
        metrics.add_metric(name=name, unit=unit, value=value)
        metric = provider.metric_set.get(name)  # None once that value filled the set and it was published
        stored = metric["Value"] if metric is not None else None
