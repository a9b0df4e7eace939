"""Lambda functions (run by `outbox_local.functions`) and event source mappings: DynamoDB streams (emulated
here) and SQS queues (`outbox_local.provisioning.queue_mapping`)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from uuid import UUID

from botocore.exceptions import ClientError

from outbox import stream_mapping
from outbox_local.errors import ProvisioningError, UnsupportedResourceError
from outbox_local.filtering import FilterCriteria
from outbox_local.functions import FunctionSpec
from outbox_local.provisioning import assets, queue_mapping
from outbox_local.provisioning.context import (
    CFN_BOOLEANS,
    Handler,
    MappingSpec,
    ProvisioningContext,
    cfn_bool,
    check,
)
from outbox_local.provisioning.custom_aws import serves_only_custom_resources
from outbox_local.stream_mapping import NO_LIMIT, MappingSettings
from outbox_local.template import ResolvedResource, Resource


def function(ctx: ProvisioningContext, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
    check(
        resource,
        p,
        {
            "Handler",
            "Runtime",
            "Code",
            "Environment",
            "Timeout",
            "MemorySize",
            "FunctionName",
            "ReservedConcurrentExecutions",
            "KmsKeyArn",
        },
        # Deployment and platform settings with no in-process equivalent: the function runs on this
        # interpreter with the project's installed dependencies (Powertools included, for layers).
        {
            "Role",
            "Layers",
            "Architectures",
            "TracingConfig",
            "LoggingConfig",
            "Description",
            "Tags",
            "DeadLetterConfig",
            "EphemeralStorage",
            "RecursiveLoop",
        },
    )
    runtime = str(p.get("Runtime", ""))
    name = ctx.name(resource, p, "FunctionName", 64)
    arn = ctx.arn("lambda", f"function:{name}")
    if not runtime.startswith("python") and serves_only_custom_resources(
        ctx.template.resources, resource.logical_id
    ):
        # CDK's AwsCustomResource provider (Node.js): the runtime makes its calls itself
        # (`outbox_local.provisioning.custom_aws`), so it is never run, nor hosted.
        return ResolvedResource(ref=name, attributes={"Arn": arn})
    if not runtime.startswith("python"):
        raise UnsupportedResourceError(
            f"{resource.logical_id}: runtime {runtime or '(container image)'} cannot run in process"
        )
    environment = {
        key: str(value) for key, value in (p.get("Environment") or {}).get("Variables", {}).items()
    }
    spec = FunctionSpec(
        logical_id=resource.logical_id,
        name=name,
        arn=arn,
        handler=p["Handler"],
        code_root=_code_root(ctx, resource, p.get("Code") or {}),
        timeout_s=float(p.get("Timeout", 3)),
        memory_mb=int(p.get("MemorySize", 128)),
        environment=environment,
        # At most this many environments at once; 0 throttles every invocation (`FunctionHost.invoke`).
        reserved_concurrency=_reserved_concurrency(resource, p.get("ReservedConcurrentExecutions")),
        kms_key_arn=_environment_key(ctx, resource, p.get("KmsKeyArn")),
        region=ctx.region,
    )
    ctx.stack.functions.append(spec)
    return ResolvedResource(ref=name, attributes={"Arn": arn})


def _reserved_concurrency(resource: Resource, value: Any) -> int | None:
    if value is None:
        return None
    reserved = int(value)
    if reserved < 0:  # CloudFormation refuses it: the function would never deploy
        raise UnsupportedResourceError(f"{resource.logical_id}: ReservedConcurrentExecutions {reserved} < 0")
    return reserved


def _environment_key(ctx: ProvisioningContext, resource: Resource, key: Any) -> str | None:
    """The key named to encrypt the environment variables. Lambda's CreateFunction refuses one that does not
    exist (KMSNotFoundException) or is not enabled (KMSDisabledException; KMSInvalidStateException pending
    deletion), and CloudFormation fails the function: so does provisioning here. No key (or ""): Lambda's
    own key."""
    if not key:
        return None
    where = f"{resource.logical_id} (AWS::Lambda::Function): KmsKeyArn {key}"
    try:
        metadata = ctx.clients("kms").describe_key(KeyId=str(key))["KeyMetadata"]
    except ClientError as error:
        if error.response["Error"]["Code"] != "NotFoundException":
            raise
        raise ProvisioningError(f"{where} names no key (KMSNotFoundException)") from error
    state = metadata["KeyState"]
    if state != "Enabled":
        refusal = "KMSDisabledException" if state == "Disabled" else "KMSInvalidStateException"
        raise ProvisioningError(f"{where} is {state}, not Enabled ({refusal})")
    return str(key)


def _code_root(ctx: ProvisioningContext, resource: Resource, code: Mapping[str, Any]) -> Path | None:
    if ctx.code_root_override is not None:
        return ctx.code_root_override
    if ctx.asset_store is not None:
        return assets.extracted_code(
            ctx.clients, code, ctx.asset_store, f"{resource.logical_id} ({resource.type})"
        )
    asset = resource.metadata.get("aws:asset:path")
    if not asset:
        return None  # the handler must then be importable as installed (e.g. an editable install)
    return (ctx.template.path.parent / str(asset)).resolve()


def event_source_mapping(ctx: ProvisioningContext, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
    source = str(p.get("EventSourceArn", ""))
    if source.startswith("arn:") and source.split(":")[2:3] == ["sqs"]:
        return queue_mapping.provision(
            ctx,
            resource,
            p,
            function_arn=_function_arn(ctx, str(p["FunctionName"])),
            mapping_uuid=_mapping_uuid(ctx.stack_name, resource.logical_id),
        )
    check(
        resource,
        p,
        {
            "FunctionName",
            "EventSourceArn",
            "StartingPosition",
            "BatchSize",
            "MaximumBatchingWindowInSeconds",
            "MaximumRetryAttempts",
            "MaximumRecordAgeInSeconds",
            "BisectBatchOnFunctionError",
            "FunctionResponseTypes",
            "FilterCriteria",
            "DestinationConfig",
            "Enabled",
            # Lambda keeps per-key order whatever the factor; processing a shard serially is one of
            # the orders it may produce.
            "ParallelizationFactor",
        },
        {"Tags", "MetricsConfig"},
    )
    if ":dynamodb:" not in source or "/stream/" not in source:
        raise UnsupportedResourceError(
            f"{resource.logical_id}: only DynamoDB stream and SQS queue mappings run locally"
        )
    if "TumblingWindowInSeconds" in p:
        raise UnsupportedResourceError(f"{resource.logical_id}: tumbling windows are not emulated")
    _validate_stream_mapping(resource, p)
    function_arn = _function_arn(ctx, str(p["FunctionName"]))
    destination = ((p.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
    settings = MappingSettings(
        function_arn=function_arn,
        stream_arn=source,
        batch_size=int(p.get("BatchSize", 100)),
        maximum_batching_window_s=float(p.get("MaximumBatchingWindowInSeconds", 0)),
        maximum_retry_attempts=int(p.get("MaximumRetryAttempts", NO_LIMIT)),
        maximum_record_age_s=int(p.get("MaximumRecordAgeInSeconds", NO_LIMIT)),
        bisect_batch_on_function_error=cfn_bool(p.get("BisectBatchOnFunctionError", False)),
        report_batch_item_failures="ReportBatchItemFailures" in p.get("FunctionResponseTypes", []),
        filters=FilterCriteria.from_template(p.get("FilterCriteria")),
        on_failure_destination_arn=destination,
        retry_delay_s=ctx.retry_delay_s,
    )
    mapping_uuid = _mapping_uuid(ctx.stack_name, resource.logical_id)
    ctx.stack.mappings.append(
        MappingSpec(
            logical_id=resource.logical_id,
            function_arn=function_arn,
            settings=settings,
            starting_position=str(p["StartingPosition"]),
            enabled=cfn_bool(p.get("Enabled", True)),
            uuid=mapping_uuid,
            parallelization_factor=int(p.get("ParallelizationFactor", 1)),
            filter_patterns=tuple(
                str(entry["Pattern"]) for entry in (p.get("FilterCriteria") or {}).get("Filters", [])
            ),
        )
    )
    return ResolvedResource(ref=mapping_uuid, attributes={"Id": mapping_uuid})


def _mapping_uuid(stack_name: str, logical_id: str) -> str:
    """A UUID as Lambda gives a mapping (botocore refuses any other shape), the same at every start."""
    digest = hashlib.sha256(f"{stack_name}/{logical_id}".encode()).digest()
    return str(UUID(bytes=digest[:16], version=4))


def _function_arn(ctx: ProvisioningContext, name_or_arn: str) -> str:
    if name_or_arn.startswith("arn:"):
        return name_or_arn
    return ctx.arn("lambda", f"function:{name_or_arn}")


def _validate_stream_mapping(resource: Resource, p: Mapping[str, Any]) -> None:
    """Refuse what CloudFormation would: a value AWS refuses would never run on AWS either (BatchSize 0,
    for one, would invoke the function with empty batches forever)."""
    where = f"{resource.logical_id} (AWS::Lambda::EventSourceMapping)"
    # Required for DynamoDB streams: no silent default.
    problems = stream_mapping.violations({"StartingPosition": p.get("StartingPosition"), **p})
    for key in ("BisectBatchOnFunctionError", "Enabled"):
        if key in p and (not isinstance(p[key], bool | str) or p[key] not in CFN_BOOLEANS):
            problems.append(f"{key} {p[key]!r} is not a boolean")
    unknown_types = set(p.get("FunctionResponseTypes", [])) - {"ReportBatchItemFailures"}
    if unknown_types:
        problems.append(f"unknown FunctionResponseTypes {sorted(unknown_types)}")
    if problems:
        raise UnsupportedResourceError(f"{where}: {'; '.join(problems)}")


def event_invoke_config(ctx: ProvisioningContext, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
    """Asynchronous invocation settings. The runtime fires schedules once and never retries a failed
    invocation, which is what `MaximumRetryAttempts: 0` asks for; anything else would run differently here,
    so it is refused."""
    check(resource, p, {"FunctionName", "Qualifier", "MaximumRetryAttempts"}, {"MaximumEventAgeInSeconds"})
    if int(p.get("MaximumRetryAttempts", 2)) != 0:
        raise UnsupportedResourceError(
            f"{resource.logical_id}: the local runtime does not retry asynchronous invocations; only "
            "MaximumRetryAttempts 0 runs as on AWS"
        )
    return ResolvedResource(ref=f"{p['FunctionName']}:{p.get('Qualifier', '$LATEST')}")


HANDLERS: dict[str, Handler] = {
    "AWS::Lambda::Function": function,
    "AWS::Lambda::EventSourceMapping": event_source_mapping,
    "AWS::Lambda::EventInvokeConfig": event_invoke_config,
}
