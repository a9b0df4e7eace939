"""The acknowledgements an `AwsCustomResource`'s provider function needs (cdk-nag and checkov), each with its
reason. CDK creates that function (one per stack, shared by every `AwsCustomResource` in it) from its own
code: what it runs and how is CDK's; what is ours is the one call each resource makes and its policy, one
action on one resource (outbox_cdk.replica)."""

from __future__ import annotations

from typing import Final

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import custom_resources as cr

from outbox_cdk.checkov import (
    FUNCTION_CONCURRENCY_LIMIT,
    FUNCTION_DEAD_LETTER_QUEUE,
    FUNCTION_IN_VPC,
    acknowledge_checkov,
)
from outbox_cdk.errors import OutboxConstructError
from outbox_cdk.nag import acknowledge

BASIC_EXECUTION_ROLE: Final = (
    "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]"
)
BASIC_EXECUTION_REASON: Final = (
    "CDK's AwsCustomResource provider role: AWSLambdaBasicExecutionRole lets it write its own logs and no "
    "more; each call it makes is allowed by a policy of its own, one action on one resource"
)
PROVIDER_FUNCTION_REASONS: Final = {
    FUNCTION_DEAD_LETTER_QUEUE: (
        "Invoked by CloudFormation for one stack operation, which fails and rolls back when the call fails: "
        "there is no event to keep for later, a function DLQ would hold only a stale request"
    ),
    FUNCTION_CONCURRENCY_LIMIT: (
        "Runs once per custom-resource event of its stack's deployments, which CloudFormation bounds; a "
        "reserved limit would only take from the account's unreserved concurrency"
    ),
    FUNCTION_IN_VPC: (
        "CDK's provider code calls one AWS API (DynamoDB DescribeTable) over TLS with its own "
        "least-privilege role; egress control through a VPC (NAT or endpoints, at a fixed cost) is "
        "yours to add"
    ),
}


def acknowledge_sdk_call_provider(resource: cr.AwsCustomResource) -> None:
    """Acknowledge the findings on `resource`'s provider function and its role (idempotent: every resource of
    a stack shares them)."""
    role = resource.grant_principal
    if not isinstance(role, iam.Role):
        raise OutboxConstructError(f"{resource.node.path}: its provider's role is not a role of this app")
    acknowledge(role, BASIC_EXECUTION_ROLE, BASIC_EXECUTION_REASON)
    for function in _functions_of(role):
        for check, reason in PROVIDER_FUNCTION_REASONS.items():
            acknowledge_checkov(function, check, reason)


def _functions_of(role: iam.Role) -> list[lambda_.Function]:
    """The functions of `role`'s stack that run as `role` (the provider: one function)."""
    path = role.node.path
    found = [
        node
        for node in Stack.of(role).node.find_all()
        if isinstance(node, lambda_.Function) and node.role is not None and node.role.node.path == path
    ]
    if not found:
        raise OutboxConstructError(f"no function runs as {path}: the custom resource's provider is missing")
    return found
