"""Whether a change set may be made or executed, and what it plans: the checks CloudFormation makes before
anything is touched. The stack's status must allow it; the template (given, or the stack's previous one)
must parse, its parameters settle and its rules hold; then the changes are planned, and what the runtime
cannot do (a resource type it has no handler for, a change it cannot apply in place, no change at all) fails
the change set itself, with the resource and the reason named.

Plain functions over the records: `service.CloudFormationService` calls them under its lock.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from outbox_local.cloudformation import parameters
from outbox_local.cloudformation.changes import (
    Deployed,
    refuse_what_cannot_change_in_place,
    resource_changes,
)
from outbox_local.cloudformation.host import CloudFormationError, validation_error
from outbox_local.cloudformation.records import REVIEW_IN_PROGRESS, ChangeSet, StackRecord
from outbox_local.cloudformation.template_text import parse
from outbox_local.errors import LocalRuntimeError, TemplateError
from outbox_local.provisioning import refuse_unknown_types
from outbox_local.template import Resolver, Template


def refuse_to_create(record: StackRecord | None, stack_name: str, change_set_type: str) -> None:
    """Raise when the stack's status refuses a change set of `change_set_type` (`record`: the stack of that
    name, None when there is none; a stack in REVIEW_IN_PROGRESS holds change sets only, never ran)."""
    if change_set_type == "CREATE":
        if record is not None and record.status != REVIEW_IN_PROGRESS:
            raise CloudFormationError("AlreadyExistsException", f"Stack [{stack_name}] already exists")
    elif record is None or record.status == REVIEW_IN_PROGRESS:
        raise validation_error(f"Stack [{stack_name}] does not exist")
    elif record.status.endswith("_IN_PROGRESS"):
        raise validation_error(f"Stack:{record.stack_id} is in {record.status} state and can not be updated.")


def submitted(
    record: StackRecord | None,
    stack_name: str,
    *,
    template_text: str | None,
    use_previous_template: bool,
    given: Mapping[str, str],
    use_previous: set[str],
    region: str,
    read_ssm: Callable[[str], str | None],
) -> tuple[str, Template, dict[str, str], dict[str, str]]:
    """The change set's template (its text and parsed) and parameter values (as the stack keeps them, as the
    resolver uses them: `parameters.settle`), its rules checked. Raises a ValidationError otherwise."""
    if use_previous_template:
        if record is None or not record.template_text:
            raise validation_error("UsePreviousTemplate is only for an existing stack")
        template_text = record.template_text
    if not template_text:
        raise validation_error("Either Template URL or Template Body must be specified.")
    try:
        template = parse(template_text, f"stack {stack_name}")
        values, resolved = parameters.settle(
            template, given, record.parameters if record else {}, use_previous, read_ssm
        )
        resolver = Resolver(template, region=region, stack_name=stack_name, parameter_values=resolved)
        parameters.check_rules(template, resolver)
    except TemplateError as error:
        raise validation_error(str(error)) from error
    return template_text, template, values, resolved


def plan(
    record: StackRecord,
    change_set: ChangeSet,
    deployed: Deployed | None,
    template: Template,
    resolved: Mapping[str, str],
    *,
    exports: Callable[[], Mapping[str, str]],
) -> None:
    """Set the change set's changes from `deployed` (None: what it creates), or fail it (FAILED,
    UNAVAILABLE, with the reason) when the runtime cannot make them or there is nothing to change.
    `exports`: read once the template's types are known (`host.StackHost.exports`)."""
    try:
        refuse_unknown_types(template)
        changes = resource_changes(deployed, template, resolved, exports())
        refuse_what_cannot_change_in_place(changes)
    except LocalRuntimeError as error:
        change_set.status, change_set.execution_status = "FAILED", "UNAVAILABLE"
        change_set.status_reason = str(error)
        return
    change_set.changes = changes
    same_template = deployed is not None and template.body == deployed.template.body
    if deployed is not None and not changes and same_template and change_set.parameters == record.parameters:
        change_set.status, change_set.execution_status = "FAILED", "UNAVAILABLE"
        change_set.status_reason = (
            "The submitted information didn't contain changes. Submit different information to create a "
            "change set."
        )


def refuse_to_execute(record: StackRecord, change_set: ChangeSet) -> None:
    """Raise unless the change set is available and the stack runs no other operation."""
    if change_set.execution_status != "AVAILABLE":
        raise CloudFormationError(
            "InvalidChangeSetStatus",
            f"ChangeSet [{change_set.arn}] cannot be executed in its current status of [{change_set.status}]",
        )
    if record.status.endswith("_IN_PROGRESS") and record.status != REVIEW_IN_PROGRESS:
        raise validation_error(f"Stack:{record.stack_id} is in {record.status} state and can not be updated.")
