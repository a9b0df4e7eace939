"""What a publishing function may do, granted exactly: the publisher and the sweeper share it."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns

from outbox_cdk import constants as c


def grant_publishing(
    function: lambda_.Function,
    statements: Sequence[tuple[Sequence[str], str]],
    *,
    topic: sns.ITopic | None,
    event_bus: events.IEventBus | None,
    keys: Sequence[tuple[kms.IKey | None, Sequence[str], str]],
) -> None:
    """`statements` (actions on one resource each), publishing to `topic` and `event_bus` when given, and
    the few actions each customer-managed key needs (key, actions, the service it is used through), on that
    key only (no wildcards), the topic's included.

    Explicit statements instead of grant_*: table.grant() would add the table's index ARNs,
    grant_stream_read() puts dynamodb:ListStreams on "*", queue.grant_send_messages() adds two actions
    neither function calls, and topic.grant_publish() grants kms:GenerateDataKey* on the topic's key.
    """
    for actions, resource in statements:
        function.add_to_role_policy(iam.PolicyStatement(actions=list(actions), resources=[resource]))
    if topic is not None:
        function.add_to_role_policy(
            iam.PolicyStatement(actions=list(c.TOPIC_PUBLISH_ACTIONS), resources=[topic.topic_arn])
        )
    if event_bus is not None:
        event_bus.grant_put_events_to(function)
    topic_keys = [(topic.master_key, c.TOPIC_KEY_ACTIONS, c.VIA_SNS)] if topic is not None else []
    for key, key_actions, via in [*keys, *topic_keys]:
        grant_key_use(function, key, key_actions, via=via)


def grant_key_use(grantee: iam.IGrantable, key: kms.IKey | None, actions: Sequence[str], *, via: str) -> None:
    """Let `grantee` use `key` (when it is a customer-managed one) for `actions` through the service `via`
    alone (`key_use`)."""
    statement = key_use(key, actions, via=via)
    if statement is not None:
        grantee.grant_principal.add_to_principal_policy(statement)


def key_use(key: kms.IKey | None, actions: Sequence[str], *, via: str) -> iam.PolicyStatement | None:
    """`actions` on `key`, held to requests the service `via` (dynamodb, sqs, sns) makes on the caller's
    behalf (`kms:ViaService`); None without a key or for an AWS-managed one, which takes no grant."""
    if key is None or aws_managed(key):
        return None
    stack = Stack.of(key)
    return iam.PolicyStatement(
        actions=list(actions),
        resources=[key.key_arn],
        conditions={"StringEquals": {"kms:ViaService": f"{via}.{stack.region}.{stack.url_suffix}"}},
    )


def aws_managed(key: kms.IKey) -> bool:
    """An AWS-managed key (`alias/aws/sns`, ...), imported by its alias: it takes no grant, its own policy
    lets this account use it through its service. Granting on it anyway would, with CDK's recommended flag
    `@aws-cdk/aws-kms:applyImportedAliasPermissionsToPrincipal`, grant on every key of the account
    (`key/*`, held only by an alias condition)."""
    alias = getattr(key, "alias_name", None)
    return isinstance(alias, str) and alias.startswith(AWS_MANAGED_ALIAS_PREFIX)


AWS_MANAGED_ALIAS_PREFIX = "alias/aws/"
