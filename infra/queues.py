"""Where the publisher puts what it cannot deliver: the poison queue and the on-failure queue."""

from __future__ import annotations

from dataclasses import dataclass, field

from aws_cdk import Duration
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra import constants as c
from infra.nag import acknowledge


def secure_queue(
    scope: Construct,
    construct_id: str,
    *,
    retention: Duration,
    fifo: bool = False,
    max_message_bytes: int | None = None,
) -> sqs.Queue:
    """A queue that refuses plain HTTP and is encrypted at rest.

    SSE-SQS (SQS-owned keys) rather than KMS: SNS and EventBridge can deliver to it without a
    key policy, and no role needs kms:* to read or write it.
    """
    return sqs.Queue(
        scope,
        construct_id,
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        enforce_ssl=True,
        retention_period=retention,
        fifo=True if fifo else None,
        max_message_size_bytes=max_message_bytes,
    )


@dataclass(frozen=True)
class FailureQueuesProps:
    """Retention of what failed; the maximum SQS allows by default, to leave time to redrive."""

    retention: Duration = field(default_factory=lambda: Duration.days(c.QUEUE_RETENTION_DAYS))


class FailureQueues(Construct):
    """Two dead-letter queues with different contents.

    ``poison_queue``: the publisher sends the full event of a record that can never be published
    (bad JSON, unknown type, too large, no route), so the shard moves on.
    ``on_failure_queue``: Lambda's on-failure destination for the stream mapping; it receives only
    metadata (shard, sequence range) of batches the mapping gave up on. The rows stay in the table.
    """

    def __init__(self, scope: Construct, construct_id: str, props: FailureQueuesProps | None = None) -> None:
        super().__init__(scope, construct_id)
        props = props or FailureQueuesProps()
        # A poison message carries the whole row (up to DynamoDB's 400 KB) plus the reason: more than
        # the historical 256 KiB SQS default, so the queue takes SQS's maximum.
        self.poison_queue = secure_queue(
            self, "PoisonQueue", retention=props.retention, max_message_bytes=c.POISON_QUEUE_MAX_MESSAGE_BYTES
        )
        self.on_failure_queue = secure_queue(self, "OnFailureQueue", retention=props.retention)
        for queue in (self.poison_queue, self.on_failure_queue):
            acknowledge(
                queue,
                "AwsSolutions-SQS3",
                "This queue is itself a dead-letter queue of the outbox publisher: a queue behind "
                "it would only hide failures; the depth alarm pages on its first message instead.",
            )
