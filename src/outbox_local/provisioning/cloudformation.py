"""The stack itself, registered in moto's CloudFormation with the outputs the runtime resolved.

Why: tools that operate the stack (the `outbox` CLI, scripts, the AWS CLI) find its tables and queues with
`describe_stacks(StackName=...)`, as they do on AWS. The runtime provisions the template itself, one service
call at a time (see `outbox_local.provisioning`), so moto's CloudFormation would know no stack. This last
step creates one under the runtime's stack name that holds no resource, only the outputs: each with the
value the runtime resolved, rendered as CloudFormation renders output values (strings), and its
description and export name. moto then answers `describe_stacks` with them and StackStatus
CREATE_COMPLETE, and `list_exports` with the exports.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from outbox_local.errors import ProvisioningError
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


def register_stack(
    cloudformation: Any, stack_name: str, outputs: Sequence[StackOutput], description: str | None = None
) -> str:
    """Create the stack in moto's CloudFormation; returns its StackId.

    The template has no resource (moto accepts an empty `Resources`, and a placeholder resource would log
    that moto does not support it) and only literal outputs, so moto creates nothing and resolves nothing.
    """
    body: dict[str, Any] = {
        "AWSTemplateFormatVersion": "2010-09-09",
        "Resources": {},
        "Outputs": {output.key: _output_entry(output) for output in outputs},
    }
    if description:
        body["Description"] = description
    try:
        response = cloudformation.create_stack(StackName=stack_name, TemplateBody=json.dumps(body))
    except ClientError as error:
        raise ProvisioningError(f"registering stack {stack_name} in CloudFormation: {error}") from error
    return str(response["StackId"])


def _output_entry(output: StackOutput) -> dict[str, Any]:
    entry: dict[str, Any] = {"Value": output.value}
    if output.description is not None:
        entry["Description"] = output.description
    if output.export_name is not None:
        entry["Export"] = {"Name": output.export_name}
    return entry
