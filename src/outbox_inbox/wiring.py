"""Builds a consumer on AWS from its configuration: the clients, the inbox, its dead-letter queue."""

from __future__ import annotations

from collections.abc import Callable

from outbox.aws import invocation_client
from outbox.clock import Clock, utc_now
from outbox.dynamodb import DynamoDBTransactionExecutor
from outbox.s3_payloads import S3PayloadStore
from outbox.schemas import SchemaRegistry
from outbox_inbox.adapters import DynamoDBInboxReader, SqsDeadLetters
from outbox_inbox.config import ConsumerConfig
from outbox_inbox.consumer import InboxConsumer, MetricsSink
from outbox_inbox.envelope import Envelope
from outbox_inbox.event_scope import EventScope
from outbox_inbox.external import IdempotentCall
from outbox_inbox.inbox import Effect, Inbox, no_effect


def aws_consumer(
    config: ConsumerConfig,
    *,
    effect: Effect = no_effect,
    external_call: Callable[[Envelope], None] | None = None,
    metrics: MetricsSink | None = None,
    clock: Clock = utc_now,
    event_scope: EventScope | None = None,
    schemas: SchemaRegistry | None = None,
) -> InboxConsumer:
    """Every call is one attempt with short timeouts (outbox.aws.invocation_client): a call that fails hands
    its message back to SQS, which retries it, rather than retrying inside the invocation's deadline."""
    dynamodb = invocation_client("dynamodb")
    inbox = Inbox(
        config.inbox, DynamoDBTransactionExecutor(dynamodb), DynamoDBInboxReader(dynamodb), clock=clock
    )
    external = None
    if external_call is not None:
        external = IdempotentCall(
            external_call,
            table_name=config.inbox.table_name,
            consumer=config.inbox.consumer,
            dedupe_window_s=config.inbox.dedupe_window_s,
            client=dynamodb,
        )
    return InboxConsumer(
        inbox,
        dead_letters=SqsDeadLetters(
            invocation_client("sqs"), config.dead_letter_queue_url, config.inbox.consumer
        ),
        effect=effect,
        external=external,
        settings=config.consumer,
        metrics=metrics,
        clock=clock,
        event_scope=event_scope,
        schemas=schemas,
        # Claim checks name their bucket; the client is one attempt with short waits, like the others.
        payloads=S3PayloadStore(),
    )
