"""What the stack uses but the runtime only stores: KMS keys and aliases, log groups, SSM parameters,
CloudWatch alarms and dashboards, ECR repositories (the CDK bootstrap's; no image runs locally)."""

from __future__ import annotations

from typing import Any

from outbox_local.provisioning.context import Handler, ProvisioningContext, cfn_bool, check, json_text
from outbox_local.template import ResolvedResource, Resource


def kms_key(ctx: ProvisioningContext, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
    check(
        resource,
        p,
        {"Description", "KeyPolicy", "KeyUsage", "KeySpec", "Tags", "Enabled"},
        # Rotation and deletion windows have no observable local effect.
        {"EnableKeyRotation", "PendingWindowInDays", "RotationPeriodInDays", "MultiRegion"},
    )
    request: dict[str, Any] = {}
    if "Description" in p:
        request["Description"] = p["Description"]
    if "KeyPolicy" in p:
        request["Policy"] = json_text(p["KeyPolicy"])
    kms = ctx.clients("kms")
    metadata = kms.create_key(**request)["KeyMetadata"]
    if not cfn_bool(p.get("Enabled", True)):  # what uses it is refused, as on AWS (a function's KmsKeyArn)
        kms.disable_key(KeyId=metadata["KeyId"])
    return ResolvedResource(
        ref=metadata["KeyId"], attributes={"Arn": metadata["Arn"], "KeyId": metadata["KeyId"]}
    )


def kms_alias(ctx: ProvisioningContext, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
    check(resource, p, {"AliasName", "TargetKeyId"}, set())
    ctx.clients("kms").create_alias(AliasName=p["AliasName"], TargetKeyId=p["TargetKeyId"])
    return ResolvedResource(ref=p["AliasName"])


def log_group(ctx: ProvisioningContext, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
    check(resource, p, {"LogGroupName", "RetentionInDays", "Tags"}, {"KmsKeyId", "LogGroupClass"})
    name = ctx.name(resource, p, "LogGroupName", 512)
    logs = ctx.clients("logs")
    logs.create_log_group(logGroupName=name)
    if "RetentionInDays" in p:
        logs.put_retention_policy(logGroupName=name, retentionInDays=int(p["RetentionInDays"]))
    return ResolvedResource(ref=name, attributes={"Arn": ctx.arn("logs", f"log-group:{name}:*")})


def ssm_parameter(ctx: ProvisioningContext, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
    check(resource, p, {"Name", "Type", "Value", "Description", "Tags"}, {"Tier", "DataType"})
    name = ctx.name(resource, p, "Name", 1011)
    ctx.clients("ssm").put_parameter(Name=name, Type=p.get("Type", "String"), Value=str(p["Value"]))
    return ResolvedResource(ref=name, attributes={"Type": p.get("Type", "String"), "Value": p["Value"]})


ALARM_FIELDS = (
    "AlarmDescription",
    "ActionsEnabled",
    "OKActions",
    "AlarmActions",
    "InsufficientDataActions",
    "MetricName",
    "Namespace",
    "Statistic",
    "ExtendedStatistic",
    "Dimensions",
    "Period",
    "Unit",
    "EvaluationPeriods",
    "DatapointsToAlarm",
    "Threshold",
    "ComparisonOperator",
    "TreatMissingData",
    "EvaluateLowSampleCountPercentile",
    "Metrics",
    "ThresholdMetricId",
)


def alarm(ctx: ProvisioningContext, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
    check(resource, p, {*ALARM_FIELDS, "AlarmName", "Tags"}, set())
    name = ctx.name(resource, p, "AlarmName", 255)
    request = {key: p[key] for key in ALARM_FIELDS if key in p}
    for key in ("Period", "EvaluationPeriods", "DatapointsToAlarm"):
        if key in request:
            request[key] = int(request[key])
    if "Threshold" in request:
        request["Threshold"] = float(request["Threshold"])
    # moto stores alarms but never evaluates them (docs/local.md, "Where moto differs from AWS"): they
    # exist so dashboards and CLIs list them.
    ctx.clients("cloudwatch").put_metric_alarm(AlarmName=name, **request)
    return ResolvedResource(ref=name, attributes={"Arn": ctx.arn("cloudwatch", f"alarm:{name}")})


def dashboard(ctx: ProvisioningContext, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
    check(resource, p, {"DashboardName", "DashboardBody"}, set())
    name = ctx.name(resource, p, "DashboardName", 255)
    ctx.clients("cloudwatch").put_dashboard(DashboardName=name, DashboardBody=json_text(p["DashboardBody"]))
    return ResolvedResource(ref=name)


def ecr_repository(ctx: ProvisioningContext, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
    check(
        resource,
        p,
        {"RepositoryName", "ImageTagMutability", "RepositoryPolicyText", "LifecyclePolicy", "Tags"},
        {"ImageScanningConfiguration", "EncryptionConfiguration", "EmptyOnDelete"},
    )
    name = ctx.name(resource, p, "RepositoryName", 256).lower()
    ecr = ctx.clients("ecr")
    request: dict[str, Any] = {"repositoryName": name}
    if "ImageTagMutability" in p:
        request["imageTagMutability"] = p["ImageTagMutability"]
    if p.get("Tags"):
        request["tags"] = p["Tags"]
    repository = ecr.create_repository(**request)["repository"]
    if "RepositoryPolicyText" in p:
        ecr.set_repository_policy(repositoryName=name, policyText=json_text(p["RepositoryPolicyText"]))
    lifecycle = (p.get("LifecyclePolicy") or {}).get("LifecyclePolicyText")
    if lifecycle:
        ecr.put_lifecycle_policy(repositoryName=name, lifecyclePolicyText=json_text(lifecycle))
    return ResolvedResource(
        ref=name,
        attributes={"Arn": repository["repositoryArn"], "RepositoryUri": repository["repositoryUri"]},
    )


HANDLERS: dict[str, Handler] = {
    "AWS::ECR::Repository": ecr_repository,
    "AWS::KMS::Key": kms_key,
    "AWS::KMS::Alias": kms_alias,
    "AWS::Logs::LogGroup": log_group,
    "AWS::SSM::Parameter": ssm_parameter,
    "AWS::CloudWatch::Alarm": alarm,
    "AWS::CloudWatch::Dashboard": dashboard,
}
