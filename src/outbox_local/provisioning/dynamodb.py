"""DynamoDB tables, with their streams, indexes and TTL."""

from __future__ import annotations

from typing import Any

from outbox_local.provisioning.context import Handler, ProvisioningContext, cfn_bool, check
from outbox_local.template import ResolvedResource, Resource


def table(ctx: ProvisioningContext, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
    check(
        resource,
        p,
        {
            "TableName",
            "KeySchema",
            "AttributeDefinitions",
            "BillingMode",
            "ProvisionedThroughput",
            "GlobalSecondaryIndexes",
            "LocalSecondaryIndexes",
            "StreamSpecification",
            "TimeToLiveSpecification",
            "Tags",
            "SSESpecification",
            "DeletionProtectionEnabled",
            "TableClass",
        },
        # Backups and insights have no local behaviour worth emulating.
        {"PointInTimeRecoverySpecification", "ContributorInsightsSpecification", "WarmThroughput"},
    )
    name = ctx.name(resource, p, "TableName")
    request: dict[str, Any] = {
        "TableName": name,
        "KeySchema": p["KeySchema"],
        "AttributeDefinitions": p["AttributeDefinitions"],
        "BillingMode": p.get("BillingMode", "PROVISIONED"),
    }
    if request["BillingMode"] == "PROVISIONED":
        request["ProvisionedThroughput"] = p.get(
            "ProvisionedThroughput", {"ReadCapacityUnits": 5, "WriteCapacityUnits": 5}
        )
    for key in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes", "Tags", "TableClass"):
        if p.get(key):
            request[key] = p[key]
    if "DeletionProtectionEnabled" in p:
        request["DeletionProtectionEnabled"] = bool(p["DeletionProtectionEnabled"])
    encryption = _encryption(p.get("SSESpecification"))
    if encryption:
        request["SSESpecification"] = encryption
    stream = p.get("StreamSpecification")
    if stream:
        request["StreamSpecification"] = {
            "StreamEnabled": True,
            "StreamViewType": stream["StreamViewType"],
        }
    dynamodb = ctx.clients("dynamodb")
    description = dynamodb.create_table(**request)["TableDescription"]
    ttl = p.get("TimeToLiveSpecification")
    if ttl and ttl.get("Enabled"):
        dynamodb.update_time_to_live(
            TableName=name,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl["AttributeName"]},
        )
    attributes = {"Arn": description["TableArn"]}
    if "LatestStreamArn" in description:
        attributes["StreamArn"] = description["LatestStreamArn"]
    return ResolvedResource(ref=name, attributes=attributes)


def _encryption(specification: dict[str, Any] | None) -> dict[str, Any] | None:
    """CreateTable's SSESpecification for the template's: SSEEnabled alone is the AWS managed key
    (alias/aws/dynamodb), with KMSMasterKeyId that key; disabled or absent, the AWS owned key (nothing to
    pass). Stored so DescribeTable answers which key a table is under, as on AWS."""
    if not specification or not cfn_bool(specification.get("SSEEnabled", False)):
        return None
    encryption: dict[str, Any] = {"Enabled": True, "SSEType": specification.get("SSEType", "KMS")}
    if specification.get("KMSMasterKeyId"):
        encryption["KMSMasterKeyId"] = specification["KMSMasterKeyId"]
    return encryption


HANDLERS: dict[str, Handler] = {
    "AWS::DynamoDB::Table": table,
}
