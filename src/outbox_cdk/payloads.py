"""The payload store of large events (outbox.payload_refs): an S3 bucket, yours or created here, and exactly
the grants each function needs on it.

The bucket created here is private (public access blocked, objects owned by the bucket owner), TLS only,
encrypted (S3-managed keys, or the Outbox's customer-managed key), and expires every object
`PayloadStoreProps.retention` after it was written (outbox_cdk.constants.PAYLOAD_RETENTION_DAYS says why that
long): the objects of transactions that never committed go the same way, as no row names them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from outbox.payload_refs import DEFAULT_OFFLOAD_THRESHOLD_BYTES, MAX_OFFLOAD_THRESHOLD_BYTES
from outbox.s3_payloads import ENV_OFFLOAD_ABOVE_BYTES, ENV_PAYLOAD_BUCKET, ENV_PAYLOAD_PREFIX
from outbox_cdk import constants as c
from outbox_cdk.checkov import (
    BUCKET_ACCESS_LOGS,
    BUCKET_KEY,
    BUCKET_REPLICATION,
    BUCKET_VERSIONING,
    acknowledge_checkov,
)
from outbox_cdk.errors import OutboxConstructError
from outbox_cdk.grants import grant_key_use
from outbox_cdk.nag import acknowledge

ACCESS_LOGS_REASON = (
    "Holds short-lived copies of event envelopes that only the outbox's own roles read and write, each by "
    "its event id; CloudTrail data events are where an audit of object reads belongs, without a second "
    "bucket of logs to secure"
)
NO_VERSIONING_REASON = (
    "Each object is written once under its event's id and its write's, and expires by the lifecycle rule; "
    "versions would only keep expired envelopes longer"
)
NO_REPLICATION_REASON = (
    "Objects live days, not years, and are read in the region that wrote them; the outbox table they "
    "belong to is not replicated either"
)
S3_KEY_REASON = (
    "Encrypted at rest with S3-managed keys (SSE-S3); a customer-managed key is the Outbox's "
    "customer_managed_key option"
)


@dataclass(frozen=True)
class PayloadStoreProps:
    """Where envelopes too large for a row go (docs/contracts.md, "Claim checks")."""

    # Your own bucket. None: one created here, as the module says.
    bucket: s3.IBucket | None = None
    # How long an object lives in the bucket created here.
    retention: Duration = field(default_factory=lambda: Duration.days(c.PAYLOAD_RETENTION_DAYS))
    # Writers store envelopes larger than this (OutboxWriter(offload_above_bytes=...)).
    offload_above_bytes: int = DEFAULT_OFFLOAD_THRESHOLD_BYTES
    # Kept on stack deletion, like the table. False: deleted with the stack (it must then be empty).
    retain_data: bool = True
    # Set by the Outbox under its customer-managed key.
    encryption_key: kms.IKey | None = None

    def __post_init__(self) -> None:
        if self.bucket is not None and self.encryption_key is not None:
            raise OutboxConstructError("encryption_key applies to the bucket created here, not to yours")
        if not 0 <= self.offload_above_bytes <= MAX_OFFLOAD_THRESHOLD_BYTES:
            raise OutboxConstructError(
                f"offload_above_bytes must be between 0 and {MAX_OFFLOAD_THRESHOLD_BYTES} (an envelope below "
                "it stays in its row, which DynamoDB holds to 400 KB)"
            )
        if self.retention.to_days() < 1:
            raise OutboxConstructError("retention must be at least one day (S3 expires objects by days)")


class OutboxPayloadBucket(Construct):
    """The bucket of stored envelopes and the environment a writer needs to use it."""

    def __init__(self, scope: Construct, construct_id: str, props: PayloadStoreProps) -> None:
        super().__init__(scope, construct_id)
        self.props = props
        self.bucket: s3.IBucket = props.bucket or self._bucket(props)

    @property
    def writer_environment(self) -> dict[str, str]:
        return {
            ENV_PAYLOAD_BUCKET: self.bucket.bucket_name,
            ENV_PAYLOAD_PREFIX: c.PAYLOAD_PREFIX,
            ENV_OFFLOAD_ABOVE_BYTES: str(self.props.offload_above_bytes),
        }

    def _bucket(self, props: PayloadStoreProps) -> s3.Bucket:
        key = props.encryption_key
        bucket = s3.Bucket(
            self,
            "Bucket",
            encryption=s3.BucketEncryption.KMS if key is not None else s3.BucketEncryption.S3_MANAGED,
            encryption_key=key,
            # One data key per bucket, not per object: fewer KMS calls for the same protection.
            bucket_key_enabled=True if key is not None else None,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            enforce_ssl=True,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="ExpireStoredEnvelopes",
                    expiration=props.retention,
                    abort_incomplete_multipart_upload_after=Duration.days(1),
                )
            ],
            removal_policy=RemovalPolicy.RETAIN if props.retain_data else RemovalPolicy.DESTROY,
        )
        if props.retain_data:
            # A stored envelope is read by every destination's consumers, archive replays and redrives: no
            # one deletes it (an SQS Extended Client deletes its message's object by default), the lifecycle
            # rule alone, which no bucket policy stops. A dev stack's bucket must be emptied to be deleted.
            bucket.add_to_resource_policy(
                iam.PolicyStatement(
                    sid="EnvelopesAreDeletedByTheLifecycleRuleOnly",
                    effect=iam.Effect.DENY,
                    principals=[iam.AnyPrincipal()],
                    actions=list(c.PAYLOAD_DELETE_ACTIONS),
                    resources=[bucket.arn_for_objects(f"{c.PAYLOAD_PREFIX}*")],
                )
            )
            # Kept with the bucket on `cdk destroy`, with its TLS-only statement.
            if bucket.policy is not None:
                bucket.policy.apply_removal_policy(RemovalPolicy.RETAIN)
        acknowledge(bucket, "AwsSolutions-S1", ACCESS_LOGS_REASON)
        acknowledge_checkov(bucket, BUCKET_ACCESS_LOGS, ACCESS_LOGS_REASON)
        acknowledge_checkov(bucket, BUCKET_VERSIONING, NO_VERSIONING_REASON)
        acknowledge_checkov(bucket, BUCKET_REPLICATION, NO_REPLICATION_REASON)
        if key is None:
            acknowledge_checkov(bucket, BUCKET_KEY, S3_KEY_REASON)
        return bucket


OBJECTS_WILDCARD_REASON = (
    "Stored envelopes are named by their event's id and their write's, unknown until the event is written: "
    "the grant is held to the envelopes' prefix of this one bucket"
)


def _grant_on_envelopes(grantee: iam.IGrantable, bucket: s3.IBucket, actions: tuple[str, ...]) -> None:
    objects = bucket.arn_for_objects(f"{c.PAYLOAD_PREFIX}*")
    iam.Grant.add_to_principal(grantee=grantee, actions=list(actions), resource_arns=[objects])
    # On the role, where its policy is (a function's role need not be under the function's construct).
    principal = grantee.grant_principal
    scope = principal if isinstance(principal, Construct) else grantee
    if isinstance(scope, Construct):
        finding = f"AwsSolutions-IAM5[Resource::{nag_resource(Stack.of(scope).resolve(objects))}]"
        acknowledge(scope, finding, OBJECTS_WILDCARD_REASON)


def nag_resource(value: Any) -> str:
    """A resolved ARN as cdk-nag spells it in a finding's id: `<Logical.Attr>` for a GetAtt, `<Logical>` for a
    Ref (`<AWS::Partition>` for a pseudo parameter), joins joined."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        logical_id, attribute = value["Fn::GetAtt"]
        return f"<{logical_id}.{attribute}>"
    if isinstance(value, dict) and "Ref" in value:
        return f"<{value['Ref']}>"
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(nag_resource(part) for part in parts)
    raise OutboxConstructError(f"no cdk-nag spelling known for {value!r}")


def grant_payload_writes(grantee: iam.IGrantable, bucket: s3.IBucket) -> None:
    """A writer: PutObject under the envelopes' prefix, and a data key from the bucket's key if it has one."""
    _grant_on_envelopes(grantee, bucket, c.PAYLOAD_WRITE_ACTIONS)
    grant_key_use(grantee, bucket.encryption_key, c.PAYLOAD_WRITE_KEY_ACTIONS, via=c.VIA_S3)


def grant_payload_reads(grantee: iam.IGrantable, bucket: s3.IBucket) -> None:
    """A reader (publisher, sweeper, consumer): GetObject on the envelopes, ListBucket on the bucket (so a
    missing object reads as missing, not as forbidden), and decryption with the bucket's key if it has one."""
    _grant_on_envelopes(grantee, bucket, c.PAYLOAD_READ_ACTIONS)
    iam.Grant.add_to_principal(
        grantee=grantee, actions=list(c.PAYLOAD_LIST_ACTIONS), resource_arns=[bucket.bucket_arn]
    )
    grant_key_use(grantee, bucket.encryption_key, c.PAYLOAD_READ_KEY_ACTIONS, via=c.VIA_S3)
