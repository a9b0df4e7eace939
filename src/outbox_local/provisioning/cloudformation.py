"""A stack's outputs as CloudFormation reports them: tools that operate the stack (the `outbox` CLI,
scripts, the AWS CLI) find its tables and queues with `describe_stacks(StackName=...)`, as on AWS; the
runtime's CloudFormation (`outbox_local.cloudformation`) answers with these: each output with the value the
runtime resolved, rendered as CloudFormation renders output values (strings), its description and its
export name.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from outbox_local.template import Resolver, Template


@dataclass(frozen=True)
class StackOutput:
    key: str
    value: str
    description: str | None = None
    export_name: str | None = None


def stack_outputs(template: Template, resolver: Resolver, values: Mapping[str, Any]) -> list[StackOutput]:
    """The template's outputs with the values the runtime resolved (`values`, by output key)."""
    outputs = []
    for key, spec in template.outputs.items():
        if key not in values:
            continue
        description = spec.get("Description")
        export = resolver.resolve((spec.get("Export") or {}).get("Name"))
        outputs.append(
            StackOutput(
                key=key,
                value=output_text(values[key]),
                description=str(description) if description is not None else None,
                export_name=str(export) if export is not None else None,
            )
        )
    return outputs


def output_text(value: object) -> str:
    """An output value as CloudFormation reports it: a list is joined with commas (as for `Fn::GetAZs`),
    booleans are "true"/"false", numbers their decimal text. (An object, which CloudFormation refuses as an
    output value, is reported as its JSON text.)"""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(output_text(item) for item in value)
    if isinstance(value, dict):
        return json.dumps(value)
    if value is None:
        return ""
    return str(value)
