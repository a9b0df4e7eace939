"""S3 buckets and bucket policies: the payload store of large events (outbox_cdk.payloads).

moto keeps a bucket's encryption, public access block, ownership controls and lifecycle as given, and stores
objects; it never runs the lifecycle (expired objects stay, like DynamoDB's TTL; docs/local.md, "Where moto
differs from AWS"). A bucket policy is checked here and kept, not applied: moto evaluates its conditions, and
the runtime's endpoint is plain HTTP, so the constructs' TLS-only statement would refuse every call.
"""

from __future__ import annotations

from typing import Any

from outbox_local.provisioning.context import Handler, ProvisioningContext, cfn_bool, check, json_text
from outbox_local.template import ResolvedResource, Resource

# S3 bucket names: 3-63 lowercase letters, digits, hyphens (CloudFormation's generated ones are lowercase).
_MAX_BUCKET_NAME = 63


def bucket(ctx: ProvisioningContext, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
    check(
        resource,
        p,
        {
            "BucketName",
            "BucketEncryption",
            "PublicAccessBlockConfiguration",
            "OwnershipControls",
            "LifecycleConfiguration",
            "Tags",
        },
        # Versioning and logging change nothing the outbox reads locally; moto does not enforce access, so a
        # canned ACL (the CDK bootstrap's staging bucket sets Private) has no local effect either.
        {"VersioningConfiguration", "LoggingConfiguration", "AccessControl"},
    )
    name = ctx.name(resource, p, "BucketName", _MAX_BUCKET_NAME).lower()
    s3 = ctx.clients("s3")
    # S3 takes a bucket outside us-east-1 only with its region named (CloudFormation names the stack's).
    where = (
        {} if ctx.region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": ctx.region}}
    )
    s3.create_bucket(Bucket=name, **where)
    if "BucketEncryption" in p:
        s3.put_bucket_encryption(
            Bucket=name, ServerSideEncryptionConfiguration=_encryption(p["BucketEncryption"])
        )
    if "PublicAccessBlockConfiguration" in p:
        s3.put_public_access_block(
            Bucket=name, PublicAccessBlockConfiguration=p["PublicAccessBlockConfiguration"]
        )
    if "OwnershipControls" in p:
        s3.put_bucket_ownership_controls(Bucket=name, OwnershipControls=p["OwnershipControls"])
    if "LifecycleConfiguration" in p:
        s3.put_bucket_lifecycle_configuration(
            Bucket=name,
            LifecycleConfiguration={
                "Rules": [_lifecycle_rule(r) for r in p["LifecycleConfiguration"]["Rules"]]
            },
        )
    if p.get("Tags"):
        s3.put_bucket_tagging(Bucket=name, Tagging={"TagSet": p["Tags"]})
    arn = f"arn:aws:s3:::{name}"
    return ResolvedResource(
        ref=name,
        attributes={
            "Arn": arn,
            "DomainName": f"{name}.s3.amazonaws.com",
            "RegionalDomainName": f"{name}.s3.{ctx.region}.amazonaws.com",
        },
    )


def _lifecycle_rule(rule: dict[str, Any]) -> dict[str, Any]:
    """A template's lifecycle rule in the API's shape (CloudFormation flattens a few of its fields)."""
    api: dict[str, Any] = {
        "ID": rule.get("Id", "rule"),
        "Status": rule["Status"],
        "Filter": {"Prefix": rule.get("Prefix", "")},
    }
    if "ExpirationInDays" in rule:
        api["Expiration"] = {"Days": int(rule["ExpirationInDays"])}
    if "NoncurrentVersionExpiration" in rule:  # the CDK bootstrap's staging bucket sets it
        api["NoncurrentVersionExpiration"] = {
            "NoncurrentDays": int(rule["NoncurrentVersionExpiration"]["NoncurrentDays"])
        }
    if "AbortIncompleteMultipartUpload" in rule:
        api["AbortIncompleteMultipartUpload"] = {
            "DaysAfterInitiation": int(rule["AbortIncompleteMultipartUpload"]["DaysAfterInitiation"])
        }
    return api


def _encryption(template: dict[str, Any]) -> dict[str, Any]:
    """A template's BucketEncryption in the API's shape (other names for the same fields)."""
    rules = []
    for rule in template["ServerSideEncryptionConfiguration"]:
        api: dict[str, Any] = {
            "ApplyServerSideEncryptionByDefault": dict(rule["ServerSideEncryptionByDefault"])
        }
        if "BucketKeyEnabled" in rule:
            api["BucketKeyEnabled"] = cfn_bool(rule["BucketKeyEnabled"])
        rules.append(api)
    return {"Rules": rules}


def bucket_policy(ctx: ProvisioningContext, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
    check(resource, p, {"Bucket", "PolicyDocument"}, set())
    ctx.clients("s3").head_bucket(Bucket=p["Bucket"])  # the bucket it names exists
    return ResolvedResource(ref=str(p["Bucket"]), attributes={"Policy": json_text(p["PolicyDocument"])})


HANDLERS: dict[str, Handler] = {
    "AWS::S3::Bucket": bucket,
    "AWS::S3::BucketPolicy": bucket_policy,
}
