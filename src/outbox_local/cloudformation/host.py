"""What the local CloudFormation asks of the runtime (`StackHost`, implemented by
`outbox_local.cloudformation.deployer`), what it learns from it, and the errors it answers with."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Protocol

from outbox_local.cloudformation.changes import Deployed
from outbox_local.errors import LocalRuntimeError
from outbox_local.provisioning.cloudformation import StackOutput
from outbox_local.template import Template

Progress = Callable[[str, str, str | None, str, str | None], None]
"""(logical id, resource type, physical id, status, reason): one resource's step."""


class CloudFormationError(LocalRuntimeError):
    """An error CloudFormation answers with (code and message as AWS words them)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def validation_error(message: str) -> CloudFormationError:
    return CloudFormationError("ValidationError", message)


@dataclass(frozen=True)
class RunningStack:
    """A stack the runtime runs, as CloudFormation describes it."""

    stack_id: str
    created_at: float
    deployed: Deployed
    outputs: list[StackOutput] = field(default_factory=list)


@dataclass(frozen=True)
class StackResource:
    """One resource of a stack, as DescribeStackResources tells it."""

    logical_id: str
    resource_type: str
    physical_id: str
    status: str
    at: float


class StackHost(Protocol):
    """What the runtime does for the stack operations (`outbox_local.cloudformation.deployer`)."""

    region: str
    """The runtime's region. A stack lives in the region its id names; the host holds it by its key: its
    name in the runtime's region, `<region>/<name>` in another (`outbox_local.stacks.stack_key`)."""

    def running(self) -> Mapping[str, RunningStack]:
        """The stacks the runtime runs, by key."""
        ...

    def exclusive(self) -> AbstractContextManager[object]:
        """The runtime's stacks held (re-entrant) while an operation and its rollback run, as one step: a
        snapshot never sees a failed operation's resources without the stack they belong to. Take it before
        the service's own lock, never while holding it."""
        ...

    def create(
        self, name: str, stack_id: str, template: Template, values: Mapping[str, str], progress: Progress
    ) -> None:
        """Create stack `name` in the region `stack_id` names."""
        ...

    def update(
        self,
        key: str,
        template: Template,
        values: Mapping[str, str],
        progress: Progress,
        *,
        code_from_s3: bool = True,
    ) -> None:
        """`code_from_s3`: the functions' code is the S3 objects the template names (what `cdk deploy`
        uploaded); False: the assets beside the template file (`aws:asset:path`), as at start-up."""
        ...

    def delete(self, key: str, progress: Progress) -> list[str]:
        """Remove the stack (or what its failed create made, or what a failed delete left); returns the
        resources that could not be deleted (empty: all gone), which the host keeps for the next delete."""
        ...

    def exports(self) -> dict[str, str]:
        """Export name -> value, of every stack the runtime runs (what `Fn::ImportValue` reads)."""
        ...

    def template_text(self, url: str) -> str: ...

    def read_ssm(self, name: str) -> str | None: ...
