"""What the deployed stack sets that the cost figures need, read from the synthesized template (`make synth`):
the publisher's memory and the stream mapping's batch size. Read, not imported from outbox_cdk, whose import
starts the CDK."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

TEMPLATE = Path(__file__).resolve().parent.parent / "cdk.out" / "OutboxStack.template.json"
PUBLISHER_HANDLER = "outbox_publisher.handler.handler"


@dataclass(frozen=True)
class Deployment:
    publisher_memory_mb: int
    batch_size: int
    """Records per invocation at most; the cost figures assume full batches."""
    architecture: str
    source: str

    def to_json(self) -> dict[str, object]:
        return {
            "publisher_memory_mb": self.publisher_memory_mb,
            "batch_size": self.batch_size,
            "architecture": self.architecture,
            "source": self.source,
        }


def deployed(template: Path = TEMPLATE) -> Deployment:
    resources = json.loads(template.read_text(encoding="utf-8"))["Resources"]
    functions = {
        logical_id: resource["Properties"]
        for logical_id, resource in resources.items()
        if resource["Type"] == "AWS::Lambda::Function"
        and resource["Properties"].get("Handler") == PUBLISHER_HANDLER
    }
    (publisher_id, publisher), *_ = functions.items()
    mapping = next(
        resource["Properties"]
        for resource in resources.values()
        if resource["Type"] == "AWS::Lambda::EventSourceMapping"
        and publisher_id in json.dumps(resource["Properties"].get("FunctionName"))
    )
    return Deployment(
        publisher_memory_mb=int(publisher["MemorySize"]),
        batch_size=int(mapping["BatchSize"]),
        architecture=str(publisher.get("Architectures", ["x86_64"])[0]),
        source=str(template.relative_to(template.parent.parent)),
    )
