"""One customer-managed KMS key for what an outbox app keeps at rest, and the policy AWS services need for it.

The constructs take a key wherever they create something that holds data (`DataTableProps.encryption_key`,
`FailureQueuesProps.encryption_key`, `DestinationsProps.encryption_key`,
`FunctionSettings.encryption_key`, `InboxConsumerProps.queue_encryption_key`,
`OutboxMonitoring(encryption_key=...)`); without one they keep AWS's own keys. `OutboxKey` is a key they can
share: the functions' roles get their few actions on it through IAM (the default key policy lets this
account's IAM policies grant its use), and its own policy lets each AWS service that handles the app's data
use it, on behalf of this account only.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import ArnFormat, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from outbox_cdk import constants as c

# What each key policy statement is for; the Sids name it in the console and in the tests.
SID_LOGS = "CloudWatchLogsForThisAccountsLogGroups"
SID_SNS_DELIVERIES = "SnsDeliveriesToEncryptedQueues"
SID_EVENTBRIDGE_DELIVERIES = "EventBridgeDeliveriesToEncryptedQueues"
SID_ALARM_ACTIONS = "CloudWatchAlarmsToEncryptedTopics"
SID_ARCHIVES = "EventBridgeArchives"
SID_ARCHIVES_DESCRIBE_KEY = "EventBridgeArchivesDescribeKey"


class OutboxKey(Construct):
    """A symmetric key with yearly rotation, retained on stack deletion like the tables (`retain=False`, for
    dev stacks only, schedules its deletion with the stack), whose policy `allow_outbox_services` writes."""

    def __init__(self, scope: Construct, construct_id: str, *, retain: bool = True) -> None:
        super().__init__(scope, construct_id)
        self.key = kms.Key(
            self,
            "Key",
            description=(
                "Outbox data at rest: tables, queues, topics, event archive, log groups, functions' settings"
            ),
            enable_key_rotation=True,
            removal_policy=RemovalPolicy.RETAIN if retain else RemovalPolicy.DESTROY,
        )
        allow_outbox_services(self.key)


def allow_outbox_services(key: kms.IKey) -> None:
    """Let the AWS services an outbox app relies on use `key` for this account's resources only.

    Each statement carries `aws:SourceAccount`, and `aws:SourceArn` where the service sets it, matched to
    this account's resources of that kind: naming the exact topic or rule would make the key policy refer to
    resources that refer to the key (a cycle CloudFormation refuses). CloudWatch Logs documents no source
    keys for its KMS calls; its statement is held by the log group ARN it puts in the encryption context.
    The event bus states its own use when it is given the key (CDK's EventBus: that bus only).
    """
    stack = Stack.of(key)
    account = {"aws:SourceAccount": stack.account}

    def arns(service: str, resource: str, arn_format: ArnFormat = ArnFormat.SLASH_RESOURCE_NAME) -> str:
        return stack.format_arn(service=service, resource=resource, resource_name="*", arn_format=arn_format)

    def allow(sid: str, service: str, actions: Sequence[str], conditions: dict[str, dict[str, str]]) -> None:
        key.add_to_resource_policy(
            iam.PolicyStatement(
                sid=sid,
                principals=[iam.ServicePrincipal(service)],
                actions=list(actions),
                resources=["*"],  # in a key policy "*" means this key
                conditions=conditions,
            )
        )

    allow(
        SID_LOGS,
        f"logs.{stack.region}.{stack.url_suffix}",
        c.LOGS_KEY_ACTIONS,
        {
            "ArnLike": {
                "kms:EncryptionContext:aws:logs:arn": arns("logs", "log-group", ArnFormat.COLON_RESOURCE_NAME)
            }
        },
    )
    # Topic ARNs have no resource type: arn:<partition>:sns:<region>:<account>:<name>.
    any_topic = stack.format_arn(service="sns", resource="*", arn_format=ArnFormat.NO_RESOURCE_NAME)
    # A topic delivering to an encrypted queue (and to a subscription's dead-letter queue).
    allow(
        SID_SNS_DELIVERIES,
        "sns.amazonaws.com",
        c.QUEUE_DELIVERY_KEY_ACTIONS,
        {"StringEquals": account, "ArnLike": {"aws:SourceArn": any_topic}},
    )
    # A rule delivering to an encrypted queue (and to its target's dead-letter queue).
    allow(
        SID_EVENTBRIDGE_DELIVERIES,
        "events.amazonaws.com",
        c.QUEUE_DELIVERY_KEY_ACTIONS,
        {"StringEquals": account, "ArnLike": {"aws:SourceArn": arns("events", "rule")}},
    )
    # An alarm notifying an encrypted topic (CloudWatch cannot use the AWS-managed SNS key at all).
    allow(
        SID_ALARM_ACTIONS,
        "cloudwatch.amazonaws.com",
        c.ALARM_TOPIC_KEY_ACTIONS,
        {
            "StringEquals": account,
            "ArnLike": {"aws:SourceArn": arns("cloudwatch", "alarm", ArnFormat.COLON_RESOURCE_NAME)},
        },
    )
    # An archive of this account's buses: EventBridge binds each data key to the bus ARN.
    allow(
        SID_ARCHIVES,
        "events.amazonaws.com",
        c.ARCHIVE_KEY_ACTIONS,
        {
            "StringEquals": account,
            "ArnLike": {"kms:EncryptionContext:aws:events:event-bus:arn": arns("events", "event-bus")},
        },
    )
    allow(
        SID_ARCHIVES_DESCRIBE_KEY,
        "events.amazonaws.com",
        c.ARCHIVE_DESCRIBE_KEY_ACTIONS,
        {"StringEquals": account},
    )


def key_reference(scope: Construct, construct_id: str, key: kms.IKey) -> kms.IKey:
    """`key` by its ARN, for the resources CDK wires to AWS services itself: given the key, CDK's
    `SqsSubscription` and `events.Archive` add key policy statements of their own without `aws:SourceAccount`;
    given this reference they cannot change the key's policy, and `allow_outbox_services` states each
    service's use instead. Grants to roles through the reference still name the key's ARN."""
    return kms.Key.from_key_arn(scope, construct_id, key.key_arn)
