"""SNS topics, subscriptions (SQS ones deliver locally) and topic policies."""

from __future__ import annotations

import json
from typing import Any

from outbox_local.errors import UnsupportedResourceError
from outbox_local.provisioning.context import Handler, ProvisioningContext, attribute_text, check
from outbox_local.template import ResolvedResource, Resource, physical_name


def topic(ctx: ProvisioningContext, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
    check(
        resource,
        p,
        {
            "TopicName",
            "DisplayName",
            "FifoTopic",
            "ContentBasedDeduplication",
            "KmsMasterKeyId",
            "Subscription",
            "Tags",
            "TracingConfig",
            "SignatureVersion",
            "ArchivePolicy",
            "MaximumMessageSize",
        },
        {"DeliveryStatusLogging", "DataProtectionPolicy"},  # logging/redaction: no local behaviour
    )
    fifo = bool(p.get("FifoTopic"))
    name = ctx.name(resource, p, "TopicName", 256)
    if fifo and not name.endswith(".fifo"):
        name = physical_name(ctx.stack_name, resource.logical_id, 256, suffix=".fifo")
    attributes: dict[str, str] = {
        key: attribute_text(p[key])
        for key in (
            "DisplayName",
            "FifoTopic",
            "ContentBasedDeduplication",
            "KmsMasterKeyId",
            "TracingConfig",
            "SignatureVersion",
            # Honoured locally by outbox_local.moto_sns_sizes.
            "MaximumMessageSize",
        )
        if key in p
    }
    if "ArchivePolicy" in p:
        attributes["ArchivePolicy"] = json.dumps(p["ArchivePolicy"])
    sns = ctx.clients("sns")
    request: dict[str, Any] = {"Name": name, "Attributes": attributes}
    if p.get("Tags"):
        request["Tags"] = p["Tags"]
    arn = sns.create_topic(**request)["TopicArn"]
    for inline in p.get("Subscription", []):
        sns.subscribe(TopicArn=arn, Protocol=inline["Protocol"], Endpoint=inline["Endpoint"])
    return ResolvedResource(ref=arn, attributes={"TopicArn": arn, "TopicName": name})


def subscription(ctx: ProvisioningContext, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
    check(
        resource,
        p,
        {
            "TopicArn",
            "Protocol",
            "Endpoint",
            "RawMessageDelivery",
            "FilterPolicy",
            "FilterPolicyScope",
            "RedrivePolicy",
        },
        {"Region", "DeliveryPolicy", "SubscriptionRoleArn", "ReplayPolicy"},
    )
    if p["Protocol"] in {
        "lambda",
        "http",
        "https",
        "email",
        "email-json",
        "sms",
        "application",
        "firehose",
    }:
        raise UnsupportedResourceError(
            f"{resource.logical_id}: SNS {p['Protocol']} subscriptions are not delivered locally"
        )
    attributes: dict[str, str] = {}
    if "RawMessageDelivery" in p:
        attributes["RawMessageDelivery"] = attribute_text(p["RawMessageDelivery"])
    for key in ("FilterPolicy", "RedrivePolicy"):
        if key in p:
            attributes[key] = json.dumps(p[key]) if isinstance(p[key], dict) else str(p[key])
    if "FilterPolicyScope" in p:
        attributes["FilterPolicyScope"] = p["FilterPolicyScope"]
    arn = ctx.clients("sns").subscribe(
        TopicArn=p["TopicArn"],
        Protocol=p["Protocol"],
        Endpoint=p["Endpoint"],
        Attributes=attributes,
        ReturnSubscriptionArn=True,
    )["SubscriptionArn"]
    return ResolvedResource(ref=arn, attributes={"Arn": arn})


def topic_policy(ctx: ProvisioningContext, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
    check(resource, p, {"Topics", "PolicyDocument"}, set())
    sns = ctx.clients("sns")
    for arn in p["Topics"]:
        sns.set_topic_attributes(
            TopicArn=arn, AttributeName="Policy", AttributeValue=json.dumps(p["PolicyDocument"])
        )
    return ResolvedResource(ref=physical_name(ctx.stack_name, resource.logical_id, 64))


HANDLERS: dict[str, Handler] = {
    "AWS::SNS::Topic": topic,
    "AWS::SNS::Subscription": subscription,
    "AWS::SNS::TopicPolicy": topic_policy,
}
