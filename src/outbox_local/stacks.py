"""The stacks a local runtime holds: what each is made from, and what it became while the runtime runs.

A runtime starts with the template it was given (or none) and may hold several stacks at once, each under its
own name, as an account does: the stack a template names at start-up, and those deployed into it later. A
stack's definition and what provisioning made of it are plain data (a restart can take them up again); its
runners (the event source mappings the runtime polls for it) live only while the runtime runs.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from outbox_local.event_source_mapping_api import Published
from outbox_local.provisioning import ProvisionedStack
from outbox_local.queue_mapping import QueueMappingRunner
from outbox_local.stream_poller import StreamMappingRunner
from outbox_local.template import Template

__all__ = ["ACCOUNT_ID", "DeployedStack", "StackDefinition", "stack_id", "stack_key"]

ACCOUNT_ID = "123456789012"
"""The account moto serves (its default): every ARN the runtime makes names it."""


@dataclass(frozen=True)
class StackDefinition:
    """What a stack is made from."""

    name: str
    template: Template
    parameter_values: Mapping[str, str] = field(default_factory=dict)
    code_root: Path | None = None
    """Where every function's code is (tests point a template at their own handlers); None: each function's
    `aws:asset:path`, beside the template, as `cdk synth` wrote it."""
    region: str | None = None
    """The region the stack is deployed in (its resources, ARNs and functions' `AWS_REGION`); None: the
    runtime's (`RuntimeOptions.region`)."""

    @property
    def key(self) -> str:
        """Where the runtime holds the stack (`stack_key`)."""
        return stack_key(self.name, self.region)


@dataclass
class DeployedStack:
    """One stack in the running runtime."""

    definition: StackDefinition
    provisioned: ProvisionedStack
    """What provisioning made: physical resources, functions, mappings, routes, schedules."""
    outputs: dict[str, Any]
    """The template's outputs, resolved (API URLs point at the local API)."""
    stack_id: str
    created_at: float
    mappings: list[StreamMappingRunner] = field(default_factory=list)
    queue_mappings: list[QueueMappingRunner] = field(default_factory=list)
    published: list[Published] = field(default_factory=list)
    """What Lambda's ListEventSourceMappings shows of this stack's mappings."""
    api_ids: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def key(self) -> str:
        return self.definition.key


def stack_key(name: str, region: str | None) -> str:
    """Where the runtime holds a stack: by its name in the runtime's region (`region` None), by region and
    name in another (each region has stacks of its own: `cdk bootstrap` makes a `CDKToolkit` in each)."""
    return name if region is None else f"{region}/{name}"


def stack_id(region: str, name: str) -> str:
    """A new stack's id, as CloudFormation makes it."""
    return f"arn:aws:cloudformation:{region}:{ACCOUNT_ID}:stack/{name}/{uuid.uuid4()}"
