"""`Custom::AWS`, CDK's AwsCustomResource: one AWS SDK call made at deploy time, its response's fields served
by `Fn::GetAtt` (`Table.LatestStreamArn`: how a replica region's stack reads its global table's stream ARN).

On AWS a Node.js provider function (the template's `ServiceToken`) makes the call with the JavaScript SDK and
answers CloudFormation with the response flattened (`{"Table": {"LatestStreamArn": …}}` becomes the attribute
`Table.LatestStreamArn`, list members by index), restricted to `outputPaths`. Locally the runtime makes the
same call itself, with boto3 on its own endpoint (the JavaScript SDK's service and action names mapped to
boto3's: `DynamoDB`/`describeTable` -> `dynamodb`/`describe_table`), and flattens its response the same way;
the provider function is never run (`outbox_local.provisioning.lambda_` accepts a function serving only custom
resources without hosting it). A stack update makes the call again. Not emulated, and refused naming what: a
`Delete` call, and `assumedRoleArn` (IAM is not enforced locally).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from botocore import xform_name
from botocore.exceptions import ClientError

from outbox_local.errors import ProvisioningError, UnsupportedResourceError
from outbox_local.provisioning.context import Handler, ProvisioningContext, check
from outbox_local.template import ResolvedResource, Resource, references

CUSTOM_AWS = "Custom::AWS"

_SERVICES = {
    # The JavaScript SDK's names whose boto3 name is not their lower case.
    "cloudwatchlogs": "logs",
    "eventbridge": "events",
    "stepfunctions": "stepfunctions",
    "iotdata": "iot-data",
}
_SDK_V3_PREFIX = "@aws-sdk/client-"
_BOOLEANS = {"TRUE:BOOLEAN": True, "FALSE:BOOLEAN": False}
"""How CDK encodes a boolean parameter in the call's JSON (its provider decodes it)."""


def custom_aws(ctx: ProvisioningContext, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
    check(
        resource,
        p,
        {"ServiceToken", "Create", "Update", "Delete"},
        # The provider's own SDK version and time budget: the call is made by the runtime.
        {"InstallLatestAwsSdk", "ServiceTimeout", "Timeout"},
    )
    if p.get("Delete"):
        raise UnsupportedResourceError(
            f"{resource.logical_id} ({CUSTOM_AWS}): an onDelete call is not emulated locally"
        )
    text = p.get("Create") or p.get("Update")
    if not text:
        return ResolvedResource(ref=resource.logical_id)
    call = json.loads(text) if isinstance(text, str) else dict(text)
    check(
        resource,
        call,
        {"service", "action", "parameters", "physicalResourceId", "outputPaths", "outputPath", "region"},
        {"ignoreErrorCodesMatching", "apiVersion", "logApiResponseData"},
    )
    if "assumedRoleArn" in call:
        raise UnsupportedResourceError(
            f"{resource.logical_id} ({CUSTOM_AWS}): assumedRoleArn is not emulated"
        )
    region = str(call.get("region") or ctx.region)
    service = boto3_service(str(call["service"]))
    if region == ctx.region:
        client = ctx.clients(service)
    elif ctx.regional_clients is not None:
        client = ctx.regional_clients(service, region)
    else:
        raise UnsupportedResourceError(f"{resource.logical_id} ({CUSTOM_AWS}): no clients in {region}")
    method = xform_name(str(call["action"]).removesuffix("Command"))
    if not hasattr(client, method):
        raise UnsupportedResourceError(
            f"{resource.logical_id} ({CUSTOM_AWS}): {call['service']}.{call['action']} has no boto3 "
            f"equivalent ({service}.{method})"
        )
    try:
        response = getattr(client, method)(**_decoded(call.get("parameters") or {}))
    except ClientError as error:
        code = error.response["Error"]["Code"]
        ignored = call.get("ignoreErrorCodesMatching")
        if ignored and re.search(str(ignored), code):
            response = {}
        else:
            raise ProvisioningError(
                f"{resource.logical_id} ({CUSTOM_AWS}): {call['service']}.{call['action']} failed: {code}: "
                f"{error.response['Error'].get('Message', '')}"
            ) from error
    response.pop("ResponseMetadata", None)
    flat = flatten(response)
    paths = call.get("outputPaths") or ([call["outputPath"]] if call.get("outputPath") else None)
    attributes = (
        {k: v for k, v in flat.items() if any(k.startswith(path) for path in paths)} if paths else flat
    )
    return ResolvedResource(ref=_physical_id(resource, call, flat), attributes=attributes)


def boto3_service(name: str) -> str:
    """The boto3 service of a JavaScript SDK service name (v2 `DynamoDB`, v3 `@aws-sdk/client-dynamodb`)."""
    plain = name.removeprefix(_SDK_V3_PREFIX).replace("-", "").lower()
    return _SERVICES.get(plain, plain)


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """A response as the provider flattens it: nested keys joined by dots, list members by their index."""
    if isinstance(value, Mapping):
        items = list(value.items())
    elif isinstance(value, list):
        items = [(str(index), member) for index, member in enumerate(value)]
    else:
        leaf = value.isoformat() if isinstance(value, datetime) else value
        return {prefix: leaf}
    flat: dict[str, Any] = {}
    for key, member in items:
        flat.update(flatten(member, f"{prefix}.{key}" if prefix else str(key)))
    return flat


def _decoded(parameters: Any) -> Any:
    if isinstance(parameters, str):
        return _BOOLEANS.get(parameters, parameters)
    if isinstance(parameters, Mapping):
        return {key: _decoded(value) for key, value in parameters.items()}
    if isinstance(parameters, list):
        return [_decoded(value) for value in parameters]
    return parameters


def _physical_id(resource: Resource, call: Mapping[str, Any], flat: Mapping[str, Any]) -> str:
    given = call.get("physicalResourceId") or {}
    if "id" in given:
        return str(given["id"])
    if "responsePath" in given:
        return str(flat.get(str(given["responsePath"]), resource.logical_id))
    return resource.logical_id


def serves_only_custom_resources(resources: Mapping[str, Resource], function_id: str) -> bool:
    """Whether a function is referred to by `Custom::AWS` resources (as their provider) and otherwise only by
    what never invokes it (its role, policies, permissions): a function the runtime need not host."""
    providing = False
    for resource in resources.values():
        if resource.logical_id == function_id:
            continue
        if function_id not in references(resource.properties):
            continue
        if resource.type == CUSTOM_AWS:
            providing = True
        elif not resource.type.startswith("AWS::IAM::") and resource.type != "AWS::Lambda::Permission":
            return False
    return providing


HANDLERS: dict[str, Handler] = {CUSTOM_AWS: custom_aws}
