"""A consumer function's Lambda entry point, for a consumer's handler module to expose in two lines:

    summary = SqsConsumerFunction("order-summary", lambda config: Projection(config.inbox.table_name))
    handler = summary.handler

Powertools logging (the inbox's log lines in the same JSON, each event's with its `correlation_id` and
`trace_id`: `outbox_inbox.event_scope`), tracing when given a Powertools `Tracer` (each event a subsegment
annotated with its request's trace id; `outbox_tracing.tracer` is one) and metrics (one count per outcome);
the consumer is built from the environment once per process, on first use, and a bad configuration fails every
invocation loudly (the messages stay in the queue); the answer is the partial batch response.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers

from outbox.schemas import SchemaRegistry
from outbox_inbox.batch import handle_sqs_batch
from outbox_inbox.config import ConsumerConfig
from outbox_inbox.consumer import InboxConsumer
from outbox_inbox.envelope import Envelope
from outbox_inbox.event_scope import powertools_scope
from outbox_inbox.inbox import Effect, no_effect
from outbox_inbox.wiring import aws_consumer

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


class SqsConsumerFunction:
    """For a consumer fed by an SQS queue (any ordering mode): answers with the partial batch response."""

    def __init__(
        self,
        service: str,
        effect_for: Callable[[ConsumerConfig], Effect] = lambda _config: no_effect,
        *,
        external_for: Callable[[ConsumerConfig], Callable[[Envelope], None]] | None = None,
        schema_directory: str | Path | None = None,
        env: Mapping[str, str] = os.environ,
        tracer: Tracer | None = None,
    ) -> None:
        self.logger = Logger(service=service)
        self.metrics = Metrics(service=service)
        self.tracer = tracer
        copy_config_to_registered_loggers(source_logger=self.logger, include={"outbox", "outbox_inbox"})
        self._effect_for = effect_for
        self._external_for = external_for
        # Validate every payload on receipt against the producer's schema files, shipped in this function's
        # code (docs/schemas.md); None: no validation.
        self._schema_directory = schema_directory
        self._env = env
        self._consumer: InboxConsumer | None = None
        handle: Handler = self.metrics.log_metrics(self._handle)
        self.handler: Handler = self.logger.inject_lambda_context(clear_state=True)(handle)

    def consumer(self) -> InboxConsumer:
        if self._consumer is None:
            config = ConsumerConfig.from_environment(self._env)
            self._consumer = aws_consumer(
                config,
                effect=self._effect_for(config),
                external_call=self._external_for(config) if self._external_for else None,
                metrics=self.metrics,
                event_scope=powertools_scope(self.logger, self.tracer),
                schemas=(
                    None
                    if self._schema_directory is None
                    else SchemaRegistry.from_directory(self._schema_directory)
                ),
            )
        return self._consumer

    def _handle(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        return handle_sqs_batch(event, self.consumer(), context)


class EventBridgeConsumerFunction(SqsConsumerFunction):
    """For a consumer a bus rule invokes directly (`latest` or `unordered` only: a strict consumer needs a
    queue to hand an early event back to). A failure raises: Lambda retries the asynchronous invocation, then
    hands the event to the function's on-failure destination; give it one."""

    def _handle(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        consumer = self.consumer()
        consumer.register_lambda_context(context)
        return {"outcome": consumer.consume_eventbridge_event(event).value}
