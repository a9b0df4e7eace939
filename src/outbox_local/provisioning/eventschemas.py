"""EventBridge schema registries and schemas: moto has no EventSchemas API, so the runtime only stores them.

Nothing at run time reads a registry (EventBridge does not enforce its schemas; the writer and the inbox check
the same files themselves), so storing each one, checked as the service would check it, is the whole of what
the runtime owes: a registry resolves to its ARN and name, a schema to its ARN, name and version "1". What
AWS would refuse is refused at start-up: a schema type other than the registry's two, content that is not
JSON, a schema name outside the registry's character set, a schema of a registry the template does not hold.
"""

from __future__ import annotations

import json
import re
from typing import Any

from outbox_local.errors import UnsupportedResourceError
from outbox_local.provisioning.context import Handler, ProvisioningContext, check
from outbox_local.template import ResolvedResource, Resource

SCHEMA_TYPES = frozenset({"JSONSchemaDraft4", "OpenApi3"})
_SCHEMA_NAME = re.compile(r"[A-Za-z0-9@._-]{1,385}")
_REGISTRY_TYPE = "AWS::EventSchemas::Registry"


def registry(ctx: ProvisioningContext, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
    check(resource, p, {"RegistryName", "Description", "Tags"}, set())
    name = ctx.name(resource, p, "RegistryName", 64)
    arn = ctx.arn("schemas", f"registry/{name}")
    return ResolvedResource(ref=arn, attributes={"RegistryArn": arn, "RegistryName": name})


def schema(ctx: ProvisioningContext, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
    check(resource, p, {"RegistryName", "SchemaName", "Type", "Content", "Description", "Tags"}, set())
    registry_name = str(p["RegistryName"])
    registries = {
        provisioned.attributes.get("RegistryName")
        for kind, provisioned in ctx.stack.resources.values()
        if kind == _REGISTRY_TYPE
    }
    if registry_name not in registries:
        raise UnsupportedResourceError(
            f"{resource.logical_id} ({resource.type}): registry {registry_name!r} is not in this template"
        )
    if p["Type"] not in SCHEMA_TYPES:
        raise UnsupportedResourceError(
            f"{resource.logical_id} ({resource.type}): Type {p['Type']!r} is not one of "
            f"{', '.join(sorted(SCHEMA_TYPES))}"
        )
    name = ctx.name(resource, p, "SchemaName", 385)
    if not _SCHEMA_NAME.fullmatch(name):
        raise UnsupportedResourceError(
            f"{resource.logical_id} ({resource.type}): SchemaName {name!r} is invalid"
        )
    content = p["Content"]
    try:
        json.loads(content)
    except (TypeError, ValueError):
        raise UnsupportedResourceError(
            f"{resource.logical_id} ({resource.type}): Content is not JSON text"
        ) from None
    arn = ctx.arn("schemas", f"schema/{registry_name}/{name}")
    return ResolvedResource(ref=arn, attributes={"SchemaArn": arn, "SchemaName": name, "SchemaVersion": "1"})


HANDLERS: dict[str, Handler] = {
    "AWS::EventSchemas::Registry": registry,
    "AWS::EventSchemas::Schema": schema,
}
