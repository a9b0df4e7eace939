"""Provisioning every resource of the template into the moto server, one explicit handler per type.

Why not moto's own CloudFormation: it would create the Lambda event source mapping (and moto would then
drain the stream itself through a Docker Lambda), it silently skips `AWS::SNS::Subscription` and
`AWS::CloudWatch::Alarm`, and it crashes on an `AWS::Events::Rule` whose `EventBusName` is a `Ref`
(docs/local.md, "Where moto differs from AWS"). So the runtime reads the same template and calls the
service APIs itself, one module per service. A resource type without a handler, or a property a handler
does not know, stops start-up with a clear error: the runtime never silently runs something different
from what the template describes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from outbox_local.errors import EndpointUnavailableError, ProvisioningError, UnsupportedResourceError
from outbox_local.provisioning import (
    apigateway,
    custom_aws,
    dynamodb,
    events,
    eventschemas,
    lambda_,
    platform,
    s3,
    sns,
    sqs,
)
from outbox_local.provisioning.context import (
    Clients,
    GlobalTables,
    Handler,
    MappingSpec,
    ProvisionedStack,
    ProvisioningContext,
    QueueMappingSpec,
    RegionalClients,
    RouteSpec,
    ScheduleSpec,
)
from outbox_local.template import ResolvedResource, Resolver, Resource, Template, physical_name

__all__ = [
    "REAPPLIED_TYPES",
    "GlobalTables",
    "MappingSpec",
    "Progress",
    "ProvisionedStack",
    "Provisioner",
    "QueueMappingSpec",
    "RouteSpec",
    "ScheduleSpec",
    "refuse_unknown_types",
]

HANDLERS: dict[str, Handler] = {
    **dynamodb.HANDLERS,
    **sqs.HANDLERS,
    **sns.HANDLERS,
    **events.HANDLERS,
    **eventschemas.HANDLERS,
    **platform.HANDLERS,
    **lambda_.HANDLERS,
    **apigateway.HANDLERS,
    **s3.HANDLERS,
    **custom_aws.HANDLERS,
}

# Resource types that need nothing locally, and why. Listing them is a decision, not an oversight.
NO_OP_TYPES: dict[str, str] = {
    "AWS::CDK::Metadata": "CDK usage metadata, no runtime behaviour",
    "AWS::IAM::Role": "moto does not enforce IAM; functions run with the runtime's local credentials",
    "AWS::IAM::Policy": "moto does not enforce IAM",
    "AWS::IAM::ManagedPolicy": "moto does not enforce IAM",
    "AWS::Lambda::Permission": "in-process invocations are not subject to resource policies",
    "AWS::ApiGatewayV2::Stage": "the local HTTP API serves its routes directly (stage handled by the API)",
    "AWS::ApiGatewayV2::Integration": "resolved through the routes that target it",
}

REAPPLIED_TYPES: frozenset[str] = frozenset(
    {
        *NO_OP_TYPES,
        # These handlers create nothing in moto, only what the runtime runs (a function, a mapping, a route,
        # an invoke setting), or they put what exists (a rule, an alarm, a dashboard): a stack update runs
        # them again, so the new code and settings take effect (`outbox_local.cloudformation.changes`).
        "AWS::Lambda::Function",
        "AWS::Lambda::EventSourceMapping",
        "AWS::Lambda::EventInvokeConfig",
        "AWS::ApiGatewayV2::Route",
        "AWS::Events::Rule",
        "AWS::CloudWatch::Alarm",
        "AWS::CloudWatch::Dashboard",
        # An update makes its call again: what it read may have changed (a stream ARN).
        "Custom::AWS",
    }
)

Progress = Callable[[Resource, ResolvedResource | None, BaseException | None], None]
"""Told of each resource once it is provisioned (its resolved resource) or failed (the error)."""


def refuse_unknown_types(template: Template) -> None:
    """UnsupportedResourceError naming each resource type of the template the runtime has no handler for."""
    unknown = sorted(
        {r.type for r in template.resources.values() if r.type not in HANDLERS and r.type not in NO_OP_TYPES}
    )
    if unknown:
        raise UnsupportedResourceError(
            f"the local runtime does not emulate these resource types: {', '.join(unknown)}"
        )


class Provisioner:
    def __init__(
        self,
        template: Template,
        resolver: Resolver,
        clients: Clients,
        *,
        code_root_override: Path | None = None,
        api_endpoint: Callable[[str], str] | None = None,
        retry_delay_s: float = 0.0,
        asset_store: Path | None = None,
        progress: Progress | None = None,
        regional_clients: RegionalClients | None = None,
        global_tables: GlobalTables | None = None,
    ) -> None:
        self.stack = ProvisionedStack()
        self._progress = progress
        self._context = ProvisioningContext(
            template=template,
            resolver=resolver,
            clients=clients,
            stack=self.stack,
            api_endpoint=api_endpoint or (lambda api_id: f"http://127.0.0.1/{api_id}"),
            code_root_override=code_root_override,
            retry_delay_s=retry_delay_s,
            asset_store=asset_store,
            regional_clients=regional_clients,
            global_tables=global_tables,
        )

    def provision(self, keep: Mapping[str, tuple[str, ResolvedResource]] | None = None) -> ProvisionedStack:
        """Provision every resource the template's conditions select, in dependency order. `keep`: resources
        of the stack as deployed that stay as they are (a stack update): their handlers are not run again,
        unless their type is one of REAPPLIED_TYPES."""
        context = self._context
        keep = keep or {}
        ordered = context.template.in_dependency_order()
        refuse_unknown_types(context.template)
        for resource in ordered:
            if resource.condition and not context.resolver.condition(resource.condition):
                self.stack.skipped[resource.logical_id] = f"condition {resource.condition} is false"
                continue
            kept = keep.get(resource.logical_id)
            if kept is not None and kept[0] == resource.type and resource.type not in REAPPLIED_TYPES:
                context.resolver.resources[resource.logical_id] = kept[1]
                self.stack.resources[resource.logical_id] = kept
                continue
            try:
                properties = context.resolver.resolve(dict(resource.properties)) or {}
            except Exception as error:
                self._report(resource, None, error)
                raise
            if resource.type in NO_OP_TYPES:
                resolved = self._no_op(resource, properties)
                self.stack.skipped[resource.logical_id] = NO_OP_TYPES[resource.type]
            else:
                try:
                    resolved = HANDLERS[resource.type](context, resource, properties)
                except (UnsupportedResourceError, ProvisioningError, EndpointUnavailableError) as error:
                    self._report(resource, None, error)
                    raise
                except Exception as error:
                    self._report(resource, None, error)
                    raise ProvisioningError(f"{resource.logical_id} ({resource.type}): {error}") from error
            context.resolver.resources[resource.logical_id] = resolved
            self.stack.resources[resource.logical_id] = (resource.type, resolved)
            self._report(resource, resolved, None)
        return self.stack

    def _report(
        self, resource: Resource, resolved: ResolvedResource | None, error: BaseException | None
    ) -> None:
        if self._progress is not None:
            self._progress(resource, resolved, error)

    def _no_op(self, resource: Resource, properties: Mapping[str, Any]) -> ResolvedResource:
        context = self._context
        name = str(properties.get("RoleName") or properties.get("PolicyName") or "") or physical_name(
            context.stack_name, resource.logical_id, 64
        )
        if resource.type.startswith("AWS::IAM::"):
            arn = context.arn("iam", f"role/{name}").replace(f":{context.region}:", "::")
            return ResolvedResource(ref=name, attributes={"Arn": arn, "RoleId": name, "Id": name})
        return ResolvedResource(ref=name, attributes={})
