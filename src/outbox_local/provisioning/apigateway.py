"""API Gateway HTTP APIs and their routes: the runtime serves them on localhost (`outbox_local.http_api`)."""

from __future__ import annotations

import hashlib
from typing import Any

from outbox_local.errors import UnsupportedResourceError
from outbox_local.provisioning.context import Handler, ProvisioningContext, RouteSpec, check
from outbox_local.template import ResolvedResource, Resource, physical_name


def http_api(ctx: ProvisioningContext, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
    check(resource, p, {"Name", "ProtocolType", "Description"}, {"Tags", "CorsConfiguration"})
    if p.get("ProtocolType") != "HTTP":
        raise UnsupportedResourceError(f"{resource.logical_id}: only HTTP APIs are served locally")
    api_id = hashlib.sha256(f"{ctx.stack_name}/{resource.logical_id}".encode()).hexdigest()[:10]
    endpoint = ctx.api_endpoint(api_id)
    return ResolvedResource(ref=api_id, attributes={"ApiId": api_id, "ApiEndpoint": endpoint})


def route(ctx: ProvisioningContext, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
    check(resource, p, {"ApiId", "RouteKey", "Target", "AuthorizationType"}, set())
    authorization = p.get("AuthorizationType", "NONE")
    # IAM is not enforced locally (as for moto's services), so an AWS_IAM route takes unsigned requests:
    # that is what lets `curl` call the local API. JWT and Lambda authorizers would need emulating.
    if authorization not in {"NONE", "AWS_IAM"}:
        raise UnsupportedResourceError(f"{resource.logical_id}: {authorization} authorizers are not emulated")
    target = str(p.get("Target", ""))
    function_arn = _integration_function(ctx, target.removeprefix("integrations/"))
    api_logical_id = next(
        (lid for lid, (_, res) in ctx.stack.resources.items() if res.ref == p["ApiId"]), str(p["ApiId"])
    )
    ctx.stack.routes.append(RouteSpec(api_logical_id, p["RouteKey"], function_arn))
    return ResolvedResource(ref=physical_name(ctx.stack_name, resource.logical_id, 32))


def _integration_function(ctx: ProvisioningContext, integration_ref: str) -> str:
    """The function ARN behind an integration (routes name it by the Ref CloudFormation gives it)."""
    for logical_id, (kind, resolved) in ctx.stack.resources.items():
        if kind == "AWS::ApiGatewayV2::Integration" and resolved.ref == integration_ref:
            raw = ctx.resolver.resolve(dict(ctx.template.resources[logical_id].properties))
            if raw.get("IntegrationType") != "AWS_PROXY" or str(raw.get("PayloadFormatVersion")) != "2.0":
                raise UnsupportedResourceError(
                    f"{logical_id}: only AWS_PROXY integrations (payload format 2.0) are served locally"
                )
            uri = str(raw["IntegrationUri"])
            return (
                uri.split("/functions/", 1)[1].removesuffix("/invocations") if "/functions/" in uri else uri
            )
    raise UnsupportedResourceError(f"route target integrations/{integration_ref} is not in the template")


HANDLERS: dict[str, Handler] = {
    "AWS::ApiGatewayV2::Api": http_api,
    "AWS::ApiGatewayV2::Route": route,
}
