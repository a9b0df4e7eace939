"""Where the publisher puts what it cannot deliver: the poison queue and the on-failure queue."""

from __future__ import annotations

from dataclasses import dataclass, field

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from outbox_cdk import constants as c
from outbox_cdk.encryption import key_reference
from outbox_cdk.nag import acknowledge
from outbox_publisher.messages import SQS_MAX_MESSAGE_BYTES


def secure_queue(
    scope: Construct,
    construct_id: str,
    *,
    retention: Duration,
    fifo: bool = False,
    max_message_bytes: int | None = None,
    visibility_timeout: Duration | None = None,
    dead_letter_queue: sqs.DeadLetterQueue | None = None,
    encryption_key: kms.IKey | None = None,
) -> sqs.Queue:
    """A queue that refuses plain HTTP and is encrypted at rest.

    By default SSE-SQS (SQS-owned keys) rather than KMS: SNS and EventBridge can deliver to it without a
    key policy, and no role needs kms:* to read or write it. With `encryption_key` (SSE-KMS), the key's
    policy must let SNS and EventBridge deliver (outbox_cdk.encryption.OutboxKey does); the queue knows the
    key by reference, so CDK's subscription helpers add no statements of their own to that policy.
    """
    return sqs.Queue(
        scope,
        construct_id,
        encryption=sqs.QueueEncryption.SQS_MANAGED if encryption_key is None else sqs.QueueEncryption.KMS,
        encryption_master_key=(
            None if encryption_key is None else key_reference(scope, f"{construct_id}Key", encryption_key)
        ),
        enforce_ssl=True,
        retention_period=retention,
        fifo=True if fifo else None,
        max_message_size_bytes=max_message_bytes,
        visibility_timeout=visibility_timeout,
        dead_letter_queue=dead_letter_queue,
    )


@dataclass(frozen=True)
class FailureQueuesProps:
    """Retention of what failed; the maximum SQS allows by default, to leave time to redrive."""

    retention: Duration = field(default_factory=lambda: Duration.days(c.QUEUE_RETENTION_DAYS))
    # Like the tables: the queues hold events that were never delivered, so `cdk destroy` keeps them.
    # False (dev/test stacks only) deletes them with the stack.
    retain_messages: bool = True
    # None: SSE-SQS. A customer-managed key must let the services that deliver to them use it (OutboxKey).
    encryption_key: kms.IKey | None = None


def create_poison_queue(
    scope: Construct, construct_id: str, props: FailureQueuesProps | None = None
) -> sqs.Queue:
    """The queue the publisher sends the full event of a record that can never be published (bad JSON,
    unknown type, too large, no route), so the shard moves on."""
    # A poison message carries the whole row (up to DynamoDB's 400 KB) plus the reason: more than
    # the historical 256 KiB SQS default, so the queue takes SQS's maximum.
    props = props or FailureQueuesProps()
    queue = secure_queue(
        scope,
        construct_id,
        retention=props.retention,
        max_message_bytes=SQS_MAX_MESSAGE_BYTES,
        encryption_key=props.encryption_key,
    )
    retain_if(queue, props.retain_messages)
    _acknowledge_dead_letter_queue(queue)
    return queue


def create_on_failure_queue(
    scope: Construct, construct_id: str, props: FailureQueuesProps | None = None
) -> sqs.Queue:
    """Lambda's on-failure destination for the stream mapping: it receives only metadata (shard,
    sequence range) of batches the mapping gave up on. The rows stay in the table."""
    props = props or FailureQueuesProps()
    queue = secure_queue(scope, construct_id, retention=props.retention, encryption_key=props.encryption_key)
    retain_if(queue, props.retain_messages)
    _acknowledge_dead_letter_queue(queue)
    return queue


def retain_if(queue: sqs.Queue, retain: bool) -> None:
    """Keep a queue of undelivered events (and what it holds) when the stack is deleted, with its policy:
    a kept queue must still refuse plain HTTP."""
    policy = RemovalPolicy.RETAIN if retain else RemovalPolicy.DESTROY
    queue.apply_removal_policy(policy)
    # The queue policy CDK made (enforce_ssl, delivery grants) is its child "Policy".
    queue_policy = queue.node.try_find_child("Policy")
    if isinstance(queue_policy, sqs.QueuePolicy):
        queue_policy.apply_removal_policy(policy)


def _acknowledge_dead_letter_queue(queue: sqs.Queue) -> None:
    acknowledge(
        queue,
        "AwsSolutions-SQS3",
        "This queue is itself a dead-letter queue of the outbox publisher: a queue behind "
        "it would only hide failures; the depth alarm pages on its first message instead.",
    )


class FailureQueues(Construct):
    """The publisher's two dead-letter queues (`poison_queue`, `on_failure_queue`), side by side."""

    def __init__(self, scope: Construct, construct_id: str, props: FailureQueuesProps | None = None) -> None:
        super().__init__(scope, construct_id)
        self.poison_queue = create_poison_queue(self, "PoisonQueue", props)
        self.on_failure_queue = create_on_failure_queue(self, "OnFailureQueue", props)
