"""What a new template changes in a deployed stack, resource by resource, and whether the runtime can apply
it in place.

A stack update keeps every resource whose properties did not change (a table keeps its items, a queue its
messages), creates the added ones, removes the removed ones and re-applies those whose handler only
describes what the runtime runs or updates in place (`provisioning.REAPPLIED_TYPES`: functions get their new
code and settings, mappings their new settings at their old positions). A change to any other resource's
properties would need CloudFormation's update or replacement of that resource, which the runtime does not
emulate: it is refused with the resource and the properties named, before anything is touched.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from outbox_local.errors import TemplateError, UnsupportedResourceError
from outbox_local.provisioning import REAPPLIED_TYPES
from outbox_local.template import ResolvedResource, Resolver, Template, imported

ADD = "Add"
MODIFY = "Modify"
REMOVE = "Remove"


@dataclass(frozen=True)
class ResourceChange:
    action: str
    """Add, Modify or Remove (as DescribeChangeSet names them)."""
    logical_id: str
    resource_type: str
    properties: tuple[str, ...] = ()
    """Modify: the top-level properties whose values differ."""
    physical_id: str | None = None


@dataclass(frozen=True)
class Deployed:
    """What a stack is now: its template, parameter values and provisioned resources."""

    template: Template
    parameter_values: Mapping[str, str]
    resources: Mapping[str, tuple[str, ResolvedResource]]
    region: str
    stack_name: str


def resource_changes(
    deployed: Deployed | None,
    template: Template,
    parameter_values: Mapping[str, str],
    exports: Mapping[str, str] | None = None,
) -> list[ResourceChange]:
    """The changes from `deployed` (None: a new stack) to `template` with `parameter_values`, in the new
    template's order, then the removals."""
    conditions = Resolver(template, region="us-east-1", stack_name="new", parameter_values=parameter_values)
    wanted = {
        logical_id: resource
        for logical_id, resource in template.resources.items()
        if not resource.condition or conditions.condition(resource.condition)
    }
    if deployed is None:
        return [ResourceChange(ADD, logical_id, resource.type) for logical_id, resource in wanted.items()]
    old_resolver = _resolver(deployed.template, deployed, deployed.parameter_values, exports)
    new_resolver = _resolver(template, deployed, parameter_values, exports)
    changes = []
    for logical_id, resource in wanted.items():
        if logical_id not in deployed.resources:
            changes.append(ResourceChange(ADD, logical_id, resource.type))
            continue
        old_type, resolved = deployed.resources[logical_id]
        if old_type != resource.type:
            changes.append(ResourceChange(MODIFY, logical_id, resource.type, ("Type",), resolved.ref))
            continue
        before = _resolved_properties(old_resolver, deployed.template.resources[logical_id].properties)
        after = _resolved_properties(new_resolver, resource.properties)
        differing = tuple(sorted(key for key in {*before, *after} if before.get(key) != after.get(key)))
        if differing:
            changes.append(ResourceChange(MODIFY, logical_id, resource.type, differing, resolved.ref))
    for logical_id, (kind, resolved) in deployed.resources.items():
        if logical_id not in wanted:
            changes.append(ResourceChange(REMOVE, logical_id, kind, physical_id=resolved.ref))
    return changes


def imports(deployed: Deployed, exports: Mapping[str, str]) -> set[str]:
    """The export names a deployed stack imports (`Fn::ImportValue`), resolved as it resolved them."""
    resolver = _resolver(deployed.template, deployed, deployed.parameter_values, exports)
    names = set()
    for argument in imported(
        [dict(deployed.template.body.get("Resources") or {}), deployed.template.outputs]
    ):
        try:
            names.add(str(resolver.resolve(argument)))
        except TemplateError:
            continue  # a name that refers to what this stack does not hold (a condition's other branch)
    return names


def refuse_what_cannot_change_in_place(changes: list[ResourceChange]) -> None:
    """UnsupportedResourceError naming each modified resource the runtime cannot update in place."""
    refused = [
        f"{change.logical_id} ({change.resource_type}): {', '.join(change.properties)}"
        for change in changes
        if change.action == MODIFY
        and (change.resource_type not in REAPPLIED_TYPES or change.properties == ("Type",))
    ]
    if refused:
        raise UnsupportedResourceError(
            "the local runtime cannot update these resources in place (CloudFormation would update or "
            f"replace them): {'; '.join(refused)}. Destroy the stack and deploy it again, or give the "
            "changed resource a new logical id"
        )


def resolver_over(
    template: Template,
    *,
    region: str,
    stack_name: str,
    parameter_values: Mapping[str, str],
    resources: Mapping[str, tuple[str, ResolvedResource]],
    exports: Mapping[str, str] | None = None,
) -> Resolver:
    """A resolver of `template` for a stack whose resources are already made (`Ref`/`GetAtt` find them)."""
    resolver = Resolver(
        template,
        region=region,
        stack_name=stack_name,
        parameter_values=parameter_values,
        exports=exports,
    )
    resolver.resources.update({logical_id: resolved for logical_id, (_, resolved) in resources.items()})
    return resolver


def _resolver(
    template: Template,
    deployed: Deployed,
    parameter_values: Mapping[str, str],
    exports: Mapping[str, str] | None = None,
) -> Resolver:
    return resolver_over(
        template,
        region=deployed.region,
        stack_name=deployed.stack_name,
        parameter_values=parameter_values,
        resources=deployed.resources,
        exports=exports,
    )


_UNRESOLVED = "<resolved at deployment>"


def _resolved_properties(resolver: Resolver, properties: Mapping[str, Any]) -> dict[str, Any]:
    """Each property's value as the resolver sees it; one that refers to a resource not yet provisioned
    (an added one) is a value only the deployment will know, so it differs from any present value."""
    resolved: dict[str, Any] = {}
    for key, value in properties.items():
        try:
            resolved[key] = resolver.resolve(value)
        except TemplateError:
            resolved[key] = _UNRESOLVED
    return resolved
