"""Metrics as a handler emitted them: Powertools' EMF documents, read back from captured output."""

from __future__ import annotations

import json


def emitted_metrics(output: str) -> dict[str, list[float]]:
    metrics: dict[str, list[float]] = {}
    for line in output.splitlines():
        if not line.startswith("{") or "_aws" not in line:
            continue
        document = json.loads(line)
        for definition in document["_aws"]["CloudWatchMetrics"][0]["Metrics"]:
            value = document[definition["Name"]]
            metrics.setdefault(definition["Name"], []).extend(value if isinstance(value, list) else [value])
    return metrics
