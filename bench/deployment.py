"""What the deployed stack sets that the cost figures need, read from the synthesized template (`make synth`):
the publisher's and the sweeper's memory, the stream mapping's batch size, the sweeper's schedule, and the
outbox's own alarms and dashboard (its monitoring construct's, not the sample consumers'). Read, not imported
from outbox_cdk, whose import starts the CDK."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TEMPLATE = Path(__file__).resolve().parent.parent / "cdk.out" / "OutboxStack.template.json"
PUBLISHER_HANDLER = "outbox_publisher.handler.handler"
SWEEPER_HANDLER = "outbox_sweeper.handler.handler"
MONITORING_PATH = "/Monitoring/"
"""The outbox's monitoring construct in the template's construct paths (outbox_cdk.monitoring)."""
MINUTES_PER_MONTH = 60 * 24 * 30
_RATE = re.compile(r"^rate\((?P<count>\d+) (?P<unit>minute|minutes|hour|hours|day|days)\)$")
_MINUTES = {"minute": 1, "minutes": 1, "hour": 60, "hours": 60, "day": 1440, "days": 1440}


@dataclass(frozen=True)
class Deployment:
    publisher_memory_mb: int
    batch_size: int
    """Records per invocation at most; the cost figures assume full batches."""
    architecture: str
    source: str
    sweeper_memory_mb: int = 0
    sweeper_runs_per_month: int = 0
    """Every schedule target of the sweeper (one per segment), over a 30-day month."""
    alarms: int = 0
    dashboards: int = 0

    def to_json(self) -> dict[str, object]:
        return {
            "publisher_memory_mb": self.publisher_memory_mb,
            "batch_size": self.batch_size,
            "architecture": self.architecture,
            "source": self.source,
            "sweeper_memory_mb": self.sweeper_memory_mb,
            "sweeper_runs_per_month": self.sweeper_runs_per_month,
            "alarms": self.alarms,
            "dashboards": self.dashboards,
        }


def deployed(template: Path = TEMPLATE) -> Deployment:
    resources = json.loads(template.read_text(encoding="utf-8"))["Resources"]
    publisher_id, publisher = _function(resources, PUBLISHER_HANDLER)
    sweeper_id, sweeper = _function(resources, SWEEPER_HANDLER)
    mapping = next(
        resource["Properties"]
        for resource in resources.values()
        if resource["Type"] == "AWS::Lambda::EventSourceMapping"
        and publisher_id in json.dumps(resource["Properties"].get("FunctionName"))
    )
    runs = 0
    for resource in resources.values():
        properties = resource.get("Properties", {})
        if resource["Type"] != "AWS::Events::Rule" or "ScheduleExpression" not in properties:
            continue
        targets = [t for t in properties.get("Targets", []) if sweeper_id in json.dumps(t.get("Arn"))]
        runs += len(targets) * MINUTES_PER_MONTH // _every_minutes(properties["ScheduleExpression"])
    return Deployment(
        publisher_memory_mb=int(publisher["MemorySize"]),
        batch_size=int(mapping["BatchSize"]),
        architecture=str(publisher.get("Architectures", ["x86_64"])[0]),
        source=str(template.relative_to(template.parent.parent)),
        sweeper_memory_mb=int(sweeper["MemorySize"]),
        sweeper_runs_per_month=runs,
        alarms=_monitoring(resources, "AWS::CloudWatch::Alarm"),
        dashboards=_monitoring(resources, "AWS::CloudWatch::Dashboard"),
    )


def _function(resources: Mapping[str, Any], handler: str) -> tuple[str, Mapping[str, Any]]:
    logical_id, resource = next(
        (logical_id, resource)
        for logical_id, resource in resources.items()
        if resource["Type"] == "AWS::Lambda::Function" and resource["Properties"].get("Handler") == handler
    )
    return logical_id, resource["Properties"]


def _every_minutes(expression: str) -> int:
    match = _RATE.match(expression)
    if match is None:
        raise ValueError(f"the sweeper's schedule is not a rate the bench reads: {expression}")
    return int(match["count"]) * _MINUTES[match["unit"]]


def _monitoring(resources: Mapping[str, Any], kind: str) -> int:
    return sum(
        1
        for resource in resources.values()
        if resource["Type"] == kind
        and MONITORING_PATH in resource.get("Metadata", {}).get("aws:cdk:path", "")
    )
