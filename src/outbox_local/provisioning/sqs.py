"""SQS queues and queue policies."""

from __future__ import annotations

import json
from typing import Any

from outbox_local.provisioning.context import Handler, ProvisioningContext, attribute_text, check
from outbox_local.template import ResolvedResource, Resource, physical_name

QUEUE_ATTRIBUTES = (
    "DelaySeconds",
    "MaximumMessageSize",
    "MessageRetentionPeriod",
    "ReceiveMessageWaitTimeSeconds",
    "VisibilityTimeout",
    "FifoQueue",
    "ContentBasedDeduplication",
    "KmsMasterKeyId",
    "KmsDataKeyReusePeriodSeconds",
    "SqsManagedSseEnabled",
    "DeduplicationScope",
    "FifoThroughputLimit",
)


def queue(ctx: ProvisioningContext, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
    check(
        resource,
        p,
        {*QUEUE_ATTRIBUTES, "QueueName", "RedrivePolicy", "RedriveAllowPolicy", "Tags"},
        set(),
    )
    fifo = bool(p.get("FifoQueue"))
    name = ctx.name(resource, p, "QueueName", 80)
    if fifo and not name.endswith(".fifo"):
        name = physical_name(ctx.stack_name, resource.logical_id, 80, suffix=".fifo")
    attributes = {key: attribute_text(p[key]) for key in QUEUE_ATTRIBUTES if key in p}
    for key in ("RedrivePolicy", "RedriveAllowPolicy"):
        if key in p:
            attributes[key] = json.dumps(p[key]) if isinstance(p[key], dict) else str(p[key])
    sqs = ctx.clients("sqs")
    request: dict[str, Any] = {"QueueName": name, "Attributes": attributes}
    if p.get("Tags"):
        request["tags"] = {tag["Key"]: tag["Value"] for tag in p["Tags"]}
    url = sqs.create_queue(**request)["QueueUrl"]
    arn = ctx.arn("sqs", name)
    return ResolvedResource(ref=url, attributes={"Arn": arn, "QueueName": name, "QueueUrl": url})


def queue_policy(ctx: ProvisioningContext, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
    check(resource, p, {"Queues", "PolicyDocument"}, set())
    sqs = ctx.clients("sqs")
    for url in p["Queues"]:
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": json.dumps(p["PolicyDocument"])})
    return ResolvedResource(ref=physical_name(ctx.stack_name, resource.logical_id, 64))


HANDLERS: dict[str, Handler] = {
    "AWS::SQS::Queue": queue,
    "AWS::SQS::QueuePolicy": queue_policy,
}
