"""Metric values added exactly as Powertools' `Metrics.add_metric` adds them, without its per-call cost: the
publisher's per-invocation counts and its per-event PublishLatencyMs.

`add_metric` checks the name, the unit and the resolution, and formats a debug line holding the whole metric,
every value so far, on each call, whether or not it is logged. For one value per event that was the largest
single share of the publisher's own CPU per record; storing the nine counts of each invocation here instead
saves about 6% of its instructions at a batch of ten (bench.cpu_probe). Powertools' CloudWatch EMF provider
keeps a metric's values in a list (`metric_set[name]["Value"]`, beside its "Unit" and "StorageResolution")
and publishes the set when it holds `MAX_METRICS` metrics or a list reaches `MAX_METRICS` values. So a value
that neither fills a list nor adds the set's last metric is stored here directly, once `add_metric` has
stored that name with that unit in this process: its checks passed then, and their outcome depends only on
the name and unit. Every other value goes through `add_metric` itself: a name's first in the process, the
value that publishes the set, every value while Powertools' debug logging is on (its debug lines), a value
that is not a number or that `float()` refuses (their errors), and every value of any other provider. The
same EMF, flushed at the same values (tests/unit/publisher/test_metric_values.py compares the two on many
sequences).
"""

from __future__ import annotations

import logging
import numbers
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.provider.cloudwatch_emf import cloudwatch
from aws_lambda_powertools.metrics.provider.cloudwatch_emf.constants import MAX_METRICS

_POWERTOOLS_LOG = logging.getLogger(cloudwatch.__name__)
_STORED: dict[str, tuple[MetricUnit, Any, Any]] = {}
"""name → a unit, and the "Unit" and "StorageResolution" `add_metric` stored for the name with that unit, once
it has in this process (keyed by name alone: hashing the unit, an Enum, runs Python code)."""


def add_counts(metrics: Metrics, counts: Mapping[str, float]) -> None:
    """`metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)` for each count, in order."""
    if not _direct(metrics):
        for name, value in counts.items():
            metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
        return
    for name, value in counts.items():
        _add_one(metrics, name, MetricUnit.Count, value)


def add_values(metrics: Metrics, name: str, unit: MetricUnit, values: Sequence[float]) -> None:
    """`metrics.add_metric(name=name, unit=unit, value=value)` for each value, in order."""
    if not _direct(metrics):
        for value in values:
            metrics.add_metric(name=name, unit=unit, value=value)
        return
    stored: list[float] | None = None
    """The metric's values, while appending one is all `add_metric` would do."""
    for value in values:
        if stored is not None and len(stored) < MAX_METRICS - 1 and _is_number(value):
            stored.append(float(value))
        else:
            stored = _add_one(metrics, name, unit, value)


def _is_number(value: object) -> bool:
    """`add_metric`'s check, `isinstance(value, numbers.Number)`, without the ABC's Python-level hook for the
    two types every value here has."""
    return type(value) is float or type(value) is int or isinstance(value, numbers.Number)


def _direct(metrics: Metrics) -> bool:
    """Values may be stored past `add_metric`: Powertools' EMF provider, its debug lines off."""
    provider_type = type(metrics.provider)
    return provider_type is cloudwatch.AmazonCloudWatchEMFProvider and not _POWERTOOLS_LOG.isEnabledFor(
        logging.DEBUG
    )


def _add_one(metrics: Metrics, name: str, unit: MetricUnit, value: float) -> list[float] | None:
    """Adds `value` as `add_metric` would; returns the metric's values if the next one may be appended."""
    metric_set = metrics.provider.metric_set
    known = _STORED.get(name)
    number = _as_float(value) if known is not None and known[0] is unit else None
    if known is not None and number is not None:
        stored = known[1], known[2]
        metric = metric_set.get(name)
        if metric is None and len(metric_set) < MAX_METRICS - 1:  # the set's last metric publishes it
            metric = metric_set[name] = defaultdict(list)
            metric["Unit"], metric["StorageResolution"] = stored
        if (
            metric is not None
            and len(metric_set) < MAX_METRICS  # a full set (a publish that raised) goes out at any add_metric
            and len(metric["Value"]) < MAX_METRICS - 1  # the list's last value publishes the set
            and (metric["Unit"], metric["StorageResolution"]) == stored  # else add_metric sets them anew
        ):
            metric["Value"].append(number)
            return metric["Value"]  # type: ignore[no-any-return]
    metrics.add_metric(name=name, unit=unit, value=value)  # raises MetricValueError with Powertools' words
    metric = metric_set.get(name)  # None if the value published the set, or if add_metric stripped the name
    if metric is None:
        return None
    _STORED[name] = (unit, metric["Unit"], metric["StorageResolution"])
    return metric["Value"]  # type: ignore[no-any-return]


def _as_float(value: float) -> float | None:
    """`float(value)` for a value `add_metric` stores; None for one it refuses, which it must see: not a
    number (its MetricValueError), or a number `float()` refuses (a complex number, an int past 1e308: its
    error, raised after it has set the metric's unit and resolution)."""
    if not _is_number(value):
        return None
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return None
