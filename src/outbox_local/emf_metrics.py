"""Function metrics into CloudWatch: the Embedded Metric Format documents a hosted function prints.

Why: the functions emit their metrics in Embedded Metric Format (Powertools `Metrics` prints one JSON line
per flush on stdout). On AWS that output goes to CloudWatch Logs, which turns each EMF document into
metrics; locally nothing else reads their output, so `get_metric_data` on the
functions' namespace would answer nothing to a dashboard or to the `outbox` CLI. The function host hands
this module what each invocation printed (`FunctionHost`'s `on_output`); each EMF document in it is put
into moto's CloudWatch with PutMetricData, as CloudWatch Logs would extract it: the directive's namespace,
one datum per dimension set and metric, the metric's unit and storage resolution, the member's value or
values, at the document's `_aws.Timestamp`.

Lines that are not EMF (logs, prints) are ignored. An EMF document that breaks the format is skipped
with a warning (CloudWatch Logs does not extract it either), and a PutMetricData that fails is logged:
neither ever fails the invocation that printed them.
"""

from __future__ import annotations

import json
import logging
import math
import queue
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

logger = logging.getLogger("outbox_local.metrics")

_MAX_DATUMS_PER_REQUEST = 1000  # PutMetricData: "Each request can contain up to 1000 different metrics"
_MAX_VALUES_PER_DATUM = 150  # PutMetricData: up to 150 values in one MetricDatum's Values
_STORAGE_RESOLUTIONS = {1, 60}
GATHER_S = 0.5
"""In the background, how long the documents after the first are gathered into the same PutMetricData."""

MetricDatum = dict[str, Any]
Batches = dict[str, list[MetricDatum]]
"""Datums by namespace."""


class MalformedEmfError(ValueError):
    """A JSON object with an `_aws` member that is not a valid EMF document."""


def metric_data(document: Mapping[str, Any]) -> dict[str, list[MetricDatum]]:
    """The PutMetricData datums of one EMF document, by namespace."""
    metadata = document.get("_aws")
    if not isinstance(metadata, dict):
        raise MalformedEmfError("_aws is not an object")
    timestamp = metadata.get("Timestamp")
    millis = _number(timestamp)
    if millis is None:
        raise MalformedEmfError(f"_aws.Timestamp {timestamp!r} is not a number (epoch milliseconds)")
    directives = metadata.get("CloudWatchMetrics")
    if not isinstance(directives, list):
        raise MalformedEmfError("_aws.CloudWatchMetrics is not a list")
    moment = datetime.fromtimestamp(millis / 1000, UTC)
    batches: dict[str, list[MetricDatum]] = {}
    for directive in directives:
        namespace, dimension_sets, definitions = _directive(directive)
        # An empty dimension set, or none at all, publishes the metrics without dimensions.
        resolved_sets = [_dimensions(document, keys) for keys in dimension_sets] or [[]]
        for definition in definitions:
            for dimensions in resolved_sets:
                batches.setdefault(namespace, []).extend(_datums(document, definition, dimensions, moment))
    return batches


class EmfMetricsForwarder:
    """Puts the EMF documents of a function's output into CloudWatch (the moto server's).

    `in_background`: on a thread of its own, what several invocations printed meanwhile in one PutMetricData,
    as CloudWatch Logs extracts metrics apart from the invocation: the invocation (an API request's answer
    among them) never waits for it, and concurrent functions do not make one request each. Otherwise at once,
    before `forward` returns: what a test driving the runtime step by step reads right after.
    """

    def __init__(
        self,
        cloudwatch: Any,
        *,
        in_background: bool = False,
        regional: Callable[[str], Any] | None = None,
    ) -> None:
        """`regional(function_name)`: the CloudWatch client of the function's region (a stack of another
        region than the runtime's puts its metrics there, as CloudWatch Logs does in the function's region);
        None: `cloudwatch` for every function."""
        self._cloudwatch = cloudwatch
        self._regional = regional
        self._pending: queue.SimpleQueue[tuple[str, Batches] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        if in_background:
            self._thread = threading.Thread(target=self._put_in_background, name="emf-metrics")
            self._thread.start()

    def close(self) -> None:
        """Put what is still pending, then stop the background thread."""
        if self._thread is not None:
            self._pending.put(None)
            self._thread.join()
            self._thread = None

    def forward(self, function_name: str, output: str) -> None:
        batches = self._metric_data(function_name, output)
        if not batches:
            return
        if self._thread is not None:
            self._pending.put((function_name, batches))
            return
        for namespace, datums in batches.items():
            self._put(function_name, namespace, datums)

    def _put_in_background(self) -> None:
        stopping = False
        while not stopping:
            waiting = [self._pending.get()]
            # What comes in the next moment goes in the same requests (CloudWatch Logs, too, extracts metrics
            # a little after the invocation).
            gathered_until = time.monotonic() + GATHER_S
            while None not in waiting and (left := gathered_until - time.monotonic()) > 0:
                try:
                    waiting.append(self._pending.get(timeout=left))
                except queue.Empty:
                    break
            stopping = None in waiting
            functions: list[str] = []
            merged: dict[str, list[MetricDatum]] = {}
            for item in waiting:
                if item is not None:
                    functions.append(item[0])
                    for namespace, datums in item[1].items():
                        merged.setdefault(namespace, []).extend(datums)
            for namespace, datums in merged.items():
                self._put(", ".join(sorted(set(functions))), namespace, datums)

    def _metric_data(self, function_name: str, output: str) -> dict[str, list[MetricDatum]]:
        batches: dict[str, list[MetricDatum]] = {}
        for line in output.splitlines():
            text = line.strip()
            if not text.startswith("{") or '"_aws"' not in text:
                continue  # a log line or a print, not a metric document
            try:
                document = json.loads(text)
                if not isinstance(document, dict) or "_aws" not in document:
                    continue
                for namespace, datums in metric_data(document).items():
                    batches.setdefault(namespace, []).extend(datums)
            except (json.JSONDecodeError, MalformedEmfError) as error:
                logger.warning("%s printed a malformed EMF document, skipped: %s", function_name, error)
        return batches

    def _put(self, function_name: str, namespace: str, datums: list[MetricDatum]) -> None:
        for start in range(0, len(datums), _MAX_DATUMS_PER_REQUEST):
            try:
                cloudwatch = self._regional(function_name) if self._regional is not None else self._cloudwatch
                cloudwatch.put_metric_data(
                    Namespace=namespace, MetricData=datums[start : start + _MAX_DATUMS_PER_REQUEST]
                )
            except (BotoCoreError, ClientError) as error:
                logger.warning(
                    "%s's metrics in %s were not put into CloudWatch: %s", function_name, namespace, error
                )


def _directive(directive: object) -> tuple[str, list[list[str]], list[Mapping[str, Any]]]:
    if not isinstance(directive, dict):
        raise MalformedEmfError("a CloudWatchMetrics entry is not an object")
    namespace = directive.get("Namespace")
    if not isinstance(namespace, str) or not namespace:
        raise MalformedEmfError(f"Namespace {namespace!r} is not a non-empty string")
    dimension_sets = directive.get("Dimensions")
    if not isinstance(dimension_sets, list) or not all(
        isinstance(keys, list) and all(isinstance(key, str) for key in keys) for keys in dimension_sets
    ):
        raise MalformedEmfError(f"{namespace}: Dimensions is not a list of lists of dimension names")
    definitions = directive.get("Metrics")
    if not isinstance(definitions, list) or not all(isinstance(item, dict) for item in definitions):
        raise MalformedEmfError(f"{namespace}: Metrics is not a list of metric definitions")
    return namespace, dimension_sets, definitions


def _dimensions(document: Mapping[str, Any], keys: list[str]) -> list[dict[str, str]]:
    dimensions = []
    for key in keys:
        value = document.get(key)
        if not isinstance(value, str):
            raise MalformedEmfError(f"dimension {key!r} has no string value in the document ({value!r})")
        dimensions.append({"Name": key, "Value": value})
    return dimensions


def _datums(
    document: Mapping[str, Any],
    definition: Mapping[str, Any],
    dimensions: list[dict[str, str]],
    moment: datetime,
) -> list[MetricDatum]:
    name = definition.get("Name")
    if not isinstance(name, str) or not name:
        raise MalformedEmfError(f"metric name {name!r} is not a non-empty string")
    unit = definition.get("Unit", "None")
    if not isinstance(unit, str):
        raise MalformedEmfError(f"{name}: Unit {unit!r} is not a string")
    resolution = definition.get("StorageResolution", 60)
    if resolution not in _STORAGE_RESOLUTIONS or isinstance(resolution, bool):
        raise MalformedEmfError(f"{name}: StorageResolution {resolution!r} is neither 1 nor 60")
    value = document.get(name)
    given = value if isinstance(value, list) else [value]
    numbers = [number for item in given if (number := _number(item)) is not None]
    if not given or len(numbers) != len(given):
        raise MalformedEmfError(f"{name}: value {value!r} is not a number or a list of numbers")
    base: MetricDatum = {"MetricName": name, "Dimensions": dimensions, "Timestamp": moment, "Unit": unit}
    if resolution == 1:
        base["StorageResolution"] = 1
    if not isinstance(value, list):
        return [{**base, "Value": numbers[0]}]
    return [
        {**base, "Values": numbers[start : start + _MAX_VALUES_PER_DATUM]}
        for start in range(0, len(numbers), _MAX_VALUES_PER_DATUM)
    ]


def _number(value: object) -> float | None:
    """A JSON number as a float; None for anything else (booleans, strings, NaN and infinities)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None
