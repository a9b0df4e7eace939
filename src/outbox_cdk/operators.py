"""The operator's permissions as a managed policy: exactly what the `outbox` operations commands call, on this
outbox's resources (docs/operations.md, "Operator permissions")."""

from __future__ import annotations

from enum import StrEnum

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from outbox.model import FAILED_INDEX_NAME
from outbox_cdk import constants as c
from outbox_cdk.grants import key_use
from outbox_cdk.nag import acknowledge
from outbox_cdk.publisher import OutboxPublisher
from outbox_ops import permissions as p

_INDEXES = (FAILED_INDEX_NAME,)


class OperatorAccess(StrEnum):
    READ_ONLY = "read_only"
    """`status`, `failed list|show`, `audit`, every `--dry-run`: for an on-call role."""
    OPERATOR = "operator"
    """... and `redrive`, `skip`."""


class OutboxOperatorPolicy(iam.ManagedPolicy):
    """A managed policy for the people or roles who run `outbox` against this stack's outbox: attach it to
    your operator role (`policy.attach_to_role(role)`)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        publisher: OutboxPublisher,
        access: OperatorAccess = OperatorAccess.OPERATOR,
    ) -> None:
        super().__init__(scope, construct_id, description=f"Run `outbox` operations ({access.value})")
        stack = Stack.of(publisher)  # the stack the commands find by its outputs
        table = publisher.table
        writes = access is not OperatorAccess.READ_ONLY
        statements = [
            (p.FIND_STACK, [stack.stack_id]),
            (
                p.READ_ROWS + (p.RELEASE_ROWS if writes else ()),
                [table.table_arn, *(f"{table.table_arn}/index/{name}" for name in _INDEXES)],
            ),
            # The publisher refuses a table without a stream (outbox_cdk.table.check_outbox_table).
            (p.READ_STREAM, [str(table.table_stream_arn)]),
            (
                p.READ_QUEUES + (p.SETTLE_QUEUES if writes else ()),
                [publisher.poison_queue.queue_arn, publisher.on_failure_queue.queue_arn],
            ),
            (p.ACCOUNT_WIDE, ["*"]),
        ]
        for actions, resources in statements:
            self.add_statements(iam.PolicyStatement(actions=list(actions), resources=resources))
        # Customer-managed keys, where the table or a queue has one: reading them needs the key too, and
        # writing (a redrive, a release) its encrypting actions.
        table_key = c.TABLE_KEY_ACTIONS if writes else c.TABLE_READ_KEY_ACTIONS
        queue_key = c.QUEUE_KEY_ACTIONS if writes else c.QUEUE_RECEIVE_KEY_ACTIONS
        for key, actions, via in (
            (table.encryption_key, table_key, c.VIA_DYNAMODB),
            (publisher.poison_queue.encryption_master_key, queue_key, c.VIA_SQS),
            (publisher.on_failure_queue.encryption_master_key, queue_key, c.VIA_SQS),
        ):
            if (statement := key_use(key, actions, via=via)) is not None:
                self.add_statements(statement)
        acknowledge(
            self,
            "AwsSolutions-IAM5[Resource::*]",
            "lambda:ListEventSourceMappings and cloudwatch:GetMetricData take no resource-level restriction "
            "in IAM; every other action is on this outbox's own table, indexes, stream, queues and stack",
        )

    def allow_reading_dead_letters(self, queue: sqs.IQueue) -> None:
        """Let `outbox status` count what a consumer of this outbox's events gave up on (its dead-letter
        queue, which the stack names in a `<Consumer>DeadLetterQueueUrl` output): its depth only."""
        self.add_statements(iam.PolicyStatement(actions=list(p.COUNT_QUEUE), resources=[queue.queue_arn]))
