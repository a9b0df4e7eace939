"""checkov, the second rule set `make test` runs on the synthesized template: its findings that do not apply,
acknowledged here, each with its reason.

checkov reads an acknowledgement from the resource's own template metadata (`Metadata.checkov.skip`), so a
user who scans their app's template sees these with their reasons too. A finding is acknowledged only where
it arises: a function with reserved concurrency, or a resource under a customer-managed key, passes the
check and carries no acknowledgement of it.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Final

import jsii
from aws_cdk import CfnResource, IAspect, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import IConstruct

from outbox_cdk.errors import OutboxConstructError
from outbox_cdk.nag import require_reason

METADATA_KEY: Final = "checkov"

# The checks, by their checkov IDs.
FUNCTION_IN_VPC: Final = "CKV_AWS_117"
FUNCTION_DEAD_LETTER_QUEUE: Final = "CKV_AWS_116"
FUNCTION_CONCURRENCY_LIMIT: Final = "CKV_AWS_115"
FUNCTION_ENVIRONMENT_KEY: Final = "CKV_AWS_173"
QUEUE_KEY: Final = "CKV_AWS_27"
TABLE_CUSTOMER_KEY: Final = "CKV_AWS_119"
LOG_GROUP_KEY: Final = "CKV_AWS_158"
BUCKET_ACCESS_LOGS: Final = "CKV_AWS_18"
BUCKET_VERSIONING: Final = "CKV_AWS_21"
BUCKET_REPLICATION: Final = "CKV_AWS_144"
BUCKET_KEY: Final = "CKV_AWS_145"
BUCKET_CHECKS: Final = frozenset({BUCKET_ACCESS_LOGS, BUCKET_VERSIONING, BUCKET_REPLICATION})
"""Acknowledged on the payload bucket (outbox_cdk.payloads) in either variant: none is about encryption."""


class Invocation(Enum):
    """How a function is invoked, which decides whether a function dead-letter queue or a reserved concurrency
    limit means anything for it. Each value: (why no function DLQ, why no reserved concurrency)."""

    STREAM = (
        "Invoked synchronously by the stream's event source mapping: a batch that keeps failing goes to "
        "the mapping's on-failure queue; a function DLQ only ever receives failed asynchronous invocations",
        "Bounded by the stream: one batch per shard times ParallelizationFactor; a reserved limit below "
        "that throttles delivery and lets the stream lag behind",
    )
    QUEUE = (
        "Invoked synchronously by the SQS event source mapping: a message that keeps failing goes to the "
        "source queue's dead-letter queue; a function DLQ only ever receives failed asynchronous invocations",
        "Invoked by an SQS event source mapping, where reserved concurrency throttles receives into the "
        "dead-letter queue; its bound is the mapping's maximum concurrency (max_concurrency)",
    )
    SCHEDULE = (
        "Invoked by a schedule whose input holds no data: a failed run leaves every row PENDING for the next "
        "run, and failed runs are counted and alarmed on, so a function DLQ would keep only empty inputs",
        "Bounded by its schedule: one invocation per segment per tick (a throttled one is retried later by "
        "Lambda), each ending by its timeout; overlapping runs lease their rows and never share one",
    )
    HTTP_API = (
        "Invoked synchronously by API Gateway: the caller gets the error and decides whether to retry; there "
        "is no event to keep, and a function DLQ only ever receives failed asynchronous invocations",
        "Bounded by the HTTP API stage's throttling (rate and burst limits), which answers excess requests "
        "with 429 before they reach the function",
    )


AWS_APIS_ONLY_REASON: Final = (
    "Its code calls only AWS APIs (DynamoDB, SNS, EventBridge, SQS) over TLS, each authorized by its own "
    "least-privilege role; egress control through a VPC (NAT or endpoints, at a fixed cost) is yours to add"
)
# With no customer-managed key chosen, each resource keeps its service's own encryption at rest; checkov
# reads only the property that names a KMS key. Each reason is written only where it is true of the resource.
AWS_KEY_REASONS: Final = {
    "AWS::SQS::Queue": (
        QUEUE_KEY,
        "Encrypted at rest with SQS-managed SSE, set explicitly (SqsManagedSseEnabled); the check reads only "
        "KmsMasterKeyId. A customer-managed key is the constructs' encryption_key option",
    ),
    "AWS::DynamoDB::Table": (
        TABLE_CUSTOMER_KEY,
        "Encrypted at rest with the AWS-managed key aws/dynamodb (SSEEnabled); a customer-managed key is the "
        "constructs' encryption_key option (DataTableProps.encryption_key)",
    ),
    "AWS::Logs::LogGroup": (
        LOG_GROUP_KEY,
        "CloudWatch Logs encrypts every log group at rest with its own keys; a customer-managed key is the "
        "constructs' encryption_key option (FunctionSettings.encryption_key)",
    ),
    "AWS::Lambda::Function": (
        FUNCTION_ENVIRONMENT_KEY,
        "Lambda encrypts environment variables at rest with its AWS-managed key, and these hold only names "
        "and settings, no secrets; a customer-managed key is FunctionSettings.encryption_key",
    ),
}


def acknowledge_checkov(construct: IConstruct, check_id: str, reason: str) -> None:
    """Acknowledge checkov's `check_id` on the CloudFormation resource `construct` is (or defines, for an L2
    construct), in its template metadata.

    Raises OutboxConstructError on a reason too short to explain anything, or a construct with no resource.
    """
    require_reason(check_id, reason)
    resource = _resource_of(construct)
    current: dict[str, Any] = resource.get_metadata(METADATA_KEY) or {}
    if any(skip["id"] == check_id for skip in current.get("skip", [])):
        return  # already acknowledged, e.g. by the aspect of an enclosing scope too
    skips = [*current.get("skip", []), {"id": check_id, "comment": reason}]
    resource.add_metadata(METADATA_KEY, {**current, "skip": skips})


def acknowledge_function_findings(
    function: IConstruct, invocation: Invocation, *, reserved_concurrency: int | None
) -> None:
    """The function checks that do not apply to a function invoked as `invocation`: no function DLQ, and
    (when it has none) no reserved concurrency."""
    no_dead_letter_queue, no_concurrency_limit = invocation.value
    acknowledge_checkov(function, FUNCTION_DEAD_LETTER_QUEUE, no_dead_letter_queue)
    if reserved_concurrency is None:
        acknowledge_checkov(function, FUNCTION_CONCURRENCY_LIMIT, no_concurrency_limit)


def acknowledge_aws_apis_only(function: IConstruct) -> None:
    """For a function whose code is known to call AWS APIs alone: no VPC needed (`AWS_APIS_ONLY_REASON`).
    Not for a function running code of yours (an inbox consumer's handler): that one is yours to decide."""
    acknowledge_checkov(function, FUNCTION_IN_VPC, AWS_APIS_ONLY_REASON)


@jsii.implements(IAspect)
class ServiceKeyAcknowledgements:
    """On every table, queue and log group under the scope it is added to (`Aspects.of(scope)`) that keeps
    its service's own encryption, acknowledges the customer-managed-key check (`AWS_KEY_REASONS`) where its
    reason is true of the resource: a queue with SQS-managed SSE on, a table with SSE on and no key of its
    own, a log group with no key. Anything else (an unencrypted queue, a table on AWS's owned key, a
    resource this does not know) is left to the check. It reads the L1 resource's properties: a key set
    through a raw property override is not seen. (A function's environment: `PythonFunction`, which knows
    it.)"""

    def visit(self, node: IConstruct) -> None:
        if isinstance(node, CfnResource) and _keeps_service_encryption(node):
            acknowledge_checkov(node, *AWS_KEY_REASONS[node.cfn_resource_type])


def _keeps_service_encryption(resource: CfnResource) -> bool:
    stack = Stack.of(resource)
    if isinstance(resource, dynamodb.CfnTable):
        sse = stack.resolve(resource.sse_specification) or {}
        return sse.get("sseEnabled") is True and sse.get("kmsMasterKeyId") is None
    if isinstance(resource, sqs.CfnQueue):
        return resource.sqs_managed_sse_enabled is True and resource.kms_master_key_id is None
    if isinstance(resource, logs.CfnLogGroup):
        return resource.kms_key_id is None
    return False


def _resource_of(construct: IConstruct) -> CfnResource:
    if isinstance(construct, CfnResource):
        return construct
    child = construct.node.default_child
    if isinstance(child, CfnResource):
        return child
    raise OutboxConstructError(f"{construct.node.path} defines no CloudFormation resource to acknowledge on")
