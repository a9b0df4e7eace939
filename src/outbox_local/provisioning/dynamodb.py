"""DynamoDB tables, with their streams, indexes and TTL; global tables as one moto table per replica region,
replicated by the runtime (`outbox_local.replication`)."""

from __future__ import annotations

from typing import Any

from outbox_local.errors import UnsupportedResourceError
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
    return _create_table(ctx.clients, {**p, "TableName": ctx.name(resource, p, "TableName")})


def _create_table(clients: Any, p: dict[str, Any]) -> ResolvedResource:
    """One table in the clients' region, as the template describes it (`TableName` settled)."""
    name = str(p["TableName"])
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
    dynamodb = clients("dynamodb")
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


_REPLICA_SETTINGS_IGNORED = {
    # Backups, insights, capacity and resource policies have no local behaviour worth emulating.
    "PointInTimeRecoverySpecification",
    "ContributorInsightsSpecification",
    "ReadProvisionedThroughputSettings",
    "ReadOnDemandThroughputSettings",
    "GlobalSecondaryIndexes",
    "ResourcePolicy",
    "ReplicaStreamSpecification",
    "SSESpecification",
    "WarmThroughput",
}


def global_table(ctx: ProvisioningContext, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
    """`AWS::DynamoDB::GlobalTable` (version 2019.11.21, what CDK's TableV2 synthesizes): a table of the same
    name in each replica's region, each with the template's stream, and the runtime's replicator between
    them. The stack's region must be one of the replicas, as CloudFormation requires."""
    check(
        resource,
        p,
        {
            "TableName",
            "KeySchema",
            "AttributeDefinitions",
            "BillingMode",
            "GlobalSecondaryIndexes",
            "LocalSecondaryIndexes",
            "StreamSpecification",
            "TimeToLiveSpecification",
            "SSESpecification",
            "Replicas",
            "MultiRegionConsistency",
        },
        {"WriteProvisionedThroughputSettings", "WriteOnDemandThroughputSettings", "WarmThroughput"},
    )
    if str(p.get("MultiRegionConsistency", "EVENTUAL")) != "EVENTUAL":
        raise UnsupportedResourceError(
            f"{resource.logical_id}: MultiRegionConsistency {p['MultiRegionConsistency']} (strongly "
            "consistent global tables have no streams): only EVENTUAL global tables are emulated"
        )
    replicas = list(p.get("Replicas") or [])
    regions = [str(replica["Region"]) for replica in replicas]
    if ctx.region not in regions:
        raise UnsupportedResourceError(
            f"{resource.logical_id}: Replicas {regions} do not hold the stack's region {ctx.region}, which "
            "CloudFormation requires"
        )
    if len(regions) > 1 and not p.get("StreamSpecification"):
        raise UnsupportedResourceError(
            f"{resource.logical_id}: a global table with more than one replica needs a StreamSpecification"
        )
    if len(regions) > 1 and (ctx.regional_clients is None or ctx.global_tables is None):
        raise UnsupportedResourceError(f"{resource.logical_id}: this runtime replicates no global table")
    for replica in replicas:
        check(
            resource,
            replica,
            {"Region", "DeletionProtectionEnabled", "Tags", "TableClass"},
            _REPLICA_SETTINGS_IGNORED,
        )
    name = ctx.name(resource, p, "TableName")
    table_properties: dict[str, Any] = {
        key: p[key]
        for key in (
            "KeySchema",
            "AttributeDefinitions",
            "GlobalSecondaryIndexes",
            "LocalSecondaryIndexes",
            "StreamSpecification",
            "TimeToLiveSpecification",
            "SSESpecification",
        )
        if key in p
    }
    table_properties["TableName"] = name
    if "GlobalSecondaryIndexes" in p:  # their write capacity settings are the global table's: not emulated
        table_properties["GlobalSecondaryIndexes"] = [
            {key: index[key] for key in ("IndexName", "KeySchema", "Projection")}
            for index in p["GlobalSecondaryIndexes"]
        ]
    table_properties["BillingMode"] = p.get("BillingMode", "PROVISIONED")
    made: dict[str, ResolvedResource] = {}
    for replica in sorted(replicas, key=lambda r: r["Region"] != ctx.region):  # the stack's region first
        own = {
            key: replica[key] for key in ("DeletionProtectionEnabled", "Tags", "TableClass") if key in replica
        }
        region = str(replica["Region"])
        clients = ctx.clients if region == ctx.region else _in(ctx, region)
        made[region] = _create_table(clients, {**table_properties, **own})
    if ctx.global_tables is not None:
        ctx.global_tables.add_table(name, regions)
    home = made[ctx.region]
    description = ctx.clients("dynamodb").describe_table(TableName=name)["Table"]
    return ResolvedResource(
        ref=name,
        attributes={**home.attributes, "TableId": description.get("TableId", name)},
    )


def _in(ctx: ProvisioningContext, region: str) -> Any:
    regional = ctx.regional_clients
    if regional is None:
        raise UnsupportedResourceError(f"this runtime has no clients in {region}")

    def clients(service: str) -> Any:
        return regional(service, region)

    return clients


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
    "AWS::DynamoDB::GlobalTable": global_table,
}
