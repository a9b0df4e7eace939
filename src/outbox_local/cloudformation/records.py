"""What CloudFormation remembers of a stack besides its resources: status, events, change sets, the template
as submitted, the parameters as given. Plain, picklable data: a state directory keeps it
(`SavedRecords`), so a restarted runtime describes its stacks as before and the CDK CLI's next deploy
(`UsePreviousValue` for each parameter) finds what it gave."""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from outbox_local.cloudformation.changes import ResourceChange
from outbox_local.provisioning.cloudformation import StackOutput
from outbox_local.template import ACCOUNT_ID, Template

if TYPE_CHECKING:
    from outbox_local.cloudformation.host import RunningStack

# Statuses a stack ends an operation in (the CDK CLI waits until DescribeStacks answers one).
CREATE_COMPLETE = "CREATE_COMPLETE"
UPDATE_COMPLETE = "UPDATE_COMPLETE"
DELETE_COMPLETE = "DELETE_COMPLETE"
REVIEW_IN_PROGRESS = "REVIEW_IN_PROGRESS"
_EVENT_SPACING_S = 0.001


@dataclass(frozen=True)
class StackEvent:
    event_id: str
    stack_id: str
    stack_name: str
    logical_id: str
    physical_id: str | None
    resource_type: str
    status: str
    timestamp: float
    reason: str | None = None


@dataclass
class ChangeSet:
    name: str
    arn: str
    change_set_type: str
    """CREATE or UPDATE."""
    template_text: str
    parameters: dict[str, str]
    """The values given with the change set (ParameterValue or the previous one for UsePreviousValue)."""
    resolved_parameters: dict[str, str]
    """The same, SSM-typed ones read from SSM: what the resolver uses."""
    changes: list[ResourceChange]
    created_at: float
    status: str = "CREATE_COMPLETE"
    execution_status: str = "AVAILABLE"
    status_reason: str | None = None
    description: str | None = None
    capabilities: tuple[str, ...] = ()
    tags: tuple[tuple[str, str], ...] = ()


@dataclass
class StackRecord:
    name: str
    stack_id: str
    created_at: float
    status: str = REVIEW_IN_PROGRESS
    status_reason: str | None = None
    updated_at: float | None = None
    deleted_at: float | None = None
    template_text: str = ""
    parameters: dict[str, str] = field(default_factory=dict)
    """The parameter values the stack runs with (given ones, and defaults)."""
    description: str | None = None
    outputs: list[StackOutput] = field(default_factory=list)
    capabilities: tuple[str, ...] = ()
    tags: tuple[tuple[str, str], ...] = ()
    events: list[StackEvent] = field(default_factory=list)
    """Newest last (DescribeStackEvents answers them newest first)."""
    change_sets: dict[str, ChangeSet] = field(default_factory=dict)
    resource_status: dict[str, tuple[str, float, str | None]] = field(default_factory=dict)
    """Logical id -> (status, when, reason) of the resource's last operation."""

    def event(
        self,
        status: str,
        at: float,
        *,
        logical_id: str | None = None,
        resource_type: str = "AWS::CloudFormation::Stack",
        physical_id: str | None = None,
        reason: str | None = None,
    ) -> None:
        """Record an event: the stack's own (no logical id) or one resource's. Each at least a millisecond
        after the one before: clients order events by their timestamps (in milliseconds)."""
        if self.events:
            at = max(at, self.events[-1].timestamp + _EVENT_SPACING_S)
        if logical_id is None:
            self.status, self.status_reason = status, reason
        else:
            self.resource_status[logical_id] = (status, at, reason)
        self.events.append(
            StackEvent(
                event_id=str(uuid.uuid4()),
                stack_id=self.stack_id,
                stack_name=self.name,
                logical_id=logical_id or self.name,
                physical_id=physical_id if logical_id is not None else self.stack_id,
                resource_type=resource_type,
                status=status,
                timestamp=at,
                reason=reason,
            )
        )


@dataclass(frozen=True)
class SavedRecords:
    """The records as a snapshot holds them: the live stacks' by name, and the deleted ones."""

    records: dict[str, StackRecord]
    deleted: list[StackRecord]

    def copied(self) -> SavedRecords:
        return SavedRecords(copy.deepcopy(self.records), copy.deepcopy(self.deleted))


STOPPED_DURING = "the runtime stopped during the operation; the stack is as its state directory kept it"


def settled(record: StackRecord, running: RunningStack | None, at: float) -> StackRecord | None:
    """A saved record as a restarted runtime holds it. An operation that was under way at the last snapshot
    did not end for the restarted runtime: the stack is what the snapshot kept (it is saved whole, never
    half made: `outbox_local.persistence.runtime_state`). A stack that runs gets the record of what it runs,
    its earlier events kept; one that does not is gone (a create that had not ended, a delete that had)."""
    in_progress = record.status.endswith("_IN_PROGRESS") and record.status != REVIEW_IN_PROGRESS
    if not in_progress:
        return record
    if running is None or running.stack_id != record.stack_id:
        return None
    now = adopted(record.name, running)
    if set(record.parameters) == set(now.parameters):
        now.parameters = record.parameters  # as given (adopted() has the values the stack resolved)
    now.events = [*record.events, *now.events]
    now.event(now.status, at, reason=STOPPED_DURING)
    return now


def change_set_arn(region: str, name: str) -> str:
    return f"arn:aws:cloudformation:{region}:{ACCOUNT_ID}:changeSet/{name}/{uuid.uuid4()}"


def described_parameters(values: dict[str, str]) -> list[dict[str, Any]]:
    return [{"ParameterKey": key, "ParameterValue": value} for key, value in values.items()]


def adopted(name: str, running: RunningStack) -> StackRecord:
    """A record for a stack the runtime runs without a change set (the one `outbox local up` starts)."""
    record = StackRecord(
        name,
        running.stack_id,
        running.created_at,
        template_text=json.dumps(running.deployed.template.body),
        parameters=_with_defaults(running.deployed.template, running.deployed.parameter_values),
        description=description_of(running.deployed.template),
    )
    record.event(CREATE_COMPLETE, running.created_at)
    return record


def _with_defaults(template: Template, given: Mapping[str, str]) -> dict[str, str]:
    """The values a stack runs with as a change set would settle them (a default where none was given), so
    that deploying the template it started with is no change."""
    declared: Mapping[str, Any] = template.body.get("Parameters") or {}
    return {
        name: str(given[name]) if name in given else str(spec["Default"])
        for name, spec in declared.items()
        if name in given or "Default" in spec
    }


def description_of(template: Template) -> str | None:
    description = template.body.get("Description")
    return description if isinstance(description, str) else None
