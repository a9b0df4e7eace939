"""Handlers that emit metrics, hosted by the runtime in the metrics tests.

`counted` emits through Powertools `Metrics` as the outbox functions do (namespace and service from
POWERTOOLS_METRICS_NAMESPACE and POWERTOOLS_SERVICE_NAME, flushed by `log_metrics` even when it raises);
`printed` prints the event's lines as they are, so tests can hand-write EMF documents, malformed ones too.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit

metrics = Metrics()


@metrics.log_metrics
def counted(event: dict[str, Any], context: Any) -> dict[str, Any]:
    for value in event["values"]:
        metrics.add_metric(name="ItemsCounted", unit=MetricUnit.Count, value=value)
    if event.get("fail"):
        raise RuntimeError("counted, then failed")
    return {"counted": len(event["values"])}


def printed(event: dict[str, Any], context: Any) -> dict[str, Any]:
    for line in event["lines"]:
        print(line)
    return {"printed": len(event["lines"])}
