"""EventBridge buses, archives and rules: pattern rules deliver to SQS, schedule rules invoke functions."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from outbox_local.errors import UnsupportedResourceError
from outbox_local.provisioning.context import Handler, ProvisioningContext, ScheduleSpec, check, json_text
from outbox_local.template import ResolvedResource, Resource


def event_bus(ctx: ProvisioningContext, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
    check(resource, p, {"Name", "Tags", "Description"}, {"DeadLetterConfig", "KmsKeyIdentifier", "Policy"})
    name = str(p["Name"])
    request: dict[str, Any] = {"Name": name}
    if p.get("Description"):
        request["Description"] = p["Description"]
    arn = ctx.clients("events").create_event_bus(**request)["EventBusArn"]
    return ResolvedResource(ref=name, attributes={"Arn": arn, "Name": name})


def archive(ctx: ProvisioningContext, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
    check(
        resource,
        p,
        {"SourceArn", "EventPattern", "RetentionDays", "Description", "ArchiveName"},
        {"KmsKeyIdentifier"},  # encryption at rest has no local effect
    )
    name = ctx.name(resource, p, "ArchiveName", 48)
    request: dict[str, Any] = {"ArchiveName": name, "EventSourceArn": p["SourceArn"]}
    if "EventPattern" in p:
        request["EventPattern"] = json_text(p["EventPattern"])
    if "RetentionDays" in p:
        request["RetentionDays"] = int(p["RetentionDays"])
    arn = ctx.clients("events").create_archive(**request)["ArchiveArn"]
    return ResolvedResource(ref=name, attributes={"Arn": arn, "ArchiveName": name})


def rule(ctx: ProvisioningContext, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
    check(
        resource,
        p,
        {"Name", "EventBusName", "EventPattern", "ScheduleExpression", "State", "Description", "Targets"},
        {"RoleArn"},
    )
    name = ctx.name(resource, p, "Name", 64)
    bus = str(p.get("EventBusName", "default")).rsplit("/", 1)[-1]
    request: dict[str, Any] = {"Name": name, "EventBusName": bus, "State": p.get("State", "ENABLED")}
    for key in ("ScheduleExpression", "Description"):
        if key in p:
            request[key] = p[key]
    if "EventPattern" in p:
        request["EventPattern"] = json_text(p["EventPattern"])
    events = ctx.clients("events")
    arn = events.put_rule(**request)["RuleArn"]
    queue_targets = []
    for target in p.get("Targets", []):
        service = str(target["Arn"]).split(":")[2]
        if service == "lambda" and "ScheduleExpression" in p:
            ctx.stack.schedules.append(
                ScheduleSpec(name, arn, p["ScheduleExpression"], target["Arn"], _target_input(target))
            )
        elif service == "sqs":
            queue_targets.append(_rule_target(target))
        else:
            # moto raises NotImplementedError when a rule delivers to SNS or Lambda (docs/local.md,
            # "Where moto differs from AWS").
            raise UnsupportedResourceError(
                f"{resource.logical_id}: rule targets on {service} are not delivered locally"
            )
    # Re-applied by an update, the rule keeps only the targets the template names (put_targets adds or
    # replaces by Id; one no longer named would go on receiving the rule's events).
    named = {target["Id"] for target in queue_targets}
    listed = events.list_targets_by_rule(Rule=name, EventBusName=bus)["Targets"]
    stale = [target["Id"] for target in listed if target["Id"] not in named]
    if stale:
        events.remove_targets(Rule=name, EventBusName=bus, Ids=stale)
    if queue_targets:
        events.put_targets(Rule=name, EventBusName=bus, Targets=queue_targets)
    ref = name if bus == "default" else f"{bus}|{name}"
    return ResolvedResource(ref=ref, attributes={"Arn": arn})


def _target_input(target: Mapping[str, Any]) -> Any:
    if "Input" in target:
        return json.loads(target["Input"])
    return None


def _rule_target(target: Mapping[str, Any]) -> dict[str, Any]:
    unsupported = set(target) - {
        "Id",
        "Arn",
        "Input",
        "InputPath",
        "InputTransformer",
        "SqsParameters",
        "DeadLetterConfig",
        "RetryPolicy",
    }
    if unsupported:
        raise UnsupportedResourceError(
            f"rule target {target.get('Id')}: unsupported fields {sorted(unsupported)}"
        )
    return {key: value for key, value in target.items() if key not in {"DeadLetterConfig", "RetryPolicy"}}


HANDLERS: dict[str, Handler] = {
    "AWS::Events::EventBus": event_bus,
    "AWS::Events::Archive": archive,
    "AWS::Events::Rule": rule,
}
