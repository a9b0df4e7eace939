"""The runtime's own part of a snapshot: what it made of each stack (so a restore runs it again without
provisioning anything: moto's backends already hold the resources) and where each stream mapping resumes.

What is not saved, because it is rebuilt or has no lasting meaning: the functions' execution environments
(started again, cold), the queue mappings' state (SQS keeps the messages and their visibility), schedules'
next firing (counted again from the start), alarms' sampled datapoints (their states are in CloudWatch),
the trace journal of `outbox trace`, armed faults.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from outbox_local.persistence.snapshots import StateDirError
from outbox_local.provisioning import ProvisionedStack
from outbox_local.stream_poller import ShardPosition


@dataclass(frozen=True)
class SavedStack:
    name: str
    template_body: Mapping[str, Any]
    """The template the stack was provisioned from, as JSON: a restart on another template is refused."""
    template_path: str
    parameter_values: Mapping[str, str]
    provisioned: ProvisionedStack


@dataclass(frozen=True)
class SavedRuntime:
    stacks: tuple[SavedStack, ...]
    positions: Mapping[str, tuple[ShardPosition, ...]] = field(default_factory=dict)
    """Each stream mapping's shard positions, by `mapping_key`."""


def mapping_key(stack_name: str, logical_id: str) -> str:
    return f"{stack_name}/{logical_id}"


def same_stack(saved: SavedStack, name: str, template_body: Mapping[str, Any], template_path: str) -> None:
    """Refuse to restore a stack from state saved for another stack name or another template: the runtime
    would run the old functions and resources while the developer expects the new ones."""
    if saved.name != name:
        raise StateDirError(
            f"the state directory holds stack {saved.name}, not {name}: pass --state-dir for another "
            f"directory, or --fresh to discard {saved.name}'s state"
        )
    if dict(saved.template_body) != dict(template_body):
        raise StateDirError(
            f"{template_path} changed since stack {name}'s state was saved (from {saved.template_path}): "
            "start with --fresh to discard the saved state and provision the new template"
        )
