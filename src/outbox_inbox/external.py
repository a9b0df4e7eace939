"""Effects outside DynamoDB (an email, an HTTP call), made at most once per event with Powertools'
Idempotency utility, keyed by `event_id`, under the same order rules as DynamoDB effects.

The consumer first asks the inbox whether the event may be applied now (not seen, and next in order); only
then it makes the call, through Powertools, which stores the call's completion in the inbox table; then it
records the event in the inbox. A crash after the call and before the record is redelivered: the order check
passes again, Powertools answers from its record without calling again, and the event is recorded.

The caveat, documented in docs/inbox.md: a crash DURING the call (after the remote side acted, before
Powertools saved the completion) makes the call run again once the in-progress record expires (the
invocation's remaining time). Exactly-once then holds only if the remote side itself accepts an idempotency
key: pass `envelope.event_id` to it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from outbox.errors import AwsUnavailableError
from outbox_inbox.envelope import Envelope
from outbox_inbox.errors import ExternalCallInProgressError
from outbox_inbox.inbox import PARTITION_KEY, TTL_ATTRIBUTE

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig

IDEMPOTENCY_KEY_FIELD = "event_id"


class IdempotentCall:
    """An `ExternalEffect` that makes `call(envelope)` at most once per event_id (see the module doc)."""

    def __init__(
        self,
        call: Callable[[Envelope], None],
        *,
        table_name: str,
        consumer: str,
        dedupe_window_s: int,
        client: Any,
    ) -> None:
        # Powertools' idempotency utility (and what it imports) loads when a consumer with an external effect
        # is built: every consumer function imports this module, most never make an external call.
        from aws_lambda_powertools.utilities.idempotency import (  # noqa: PLC0415
            DynamoDBPersistenceLayer,
            IdempotencyConfig,
            idempotent_function,
        )
        from aws_lambda_powertools.utilities.idempotency.exceptions import (  # noqa: PLC0415
            IdempotencyAlreadyInProgressError,
            IdempotencyPersistenceLayerError,
        )

        self._in_progress_error = IdempotencyAlreadyInProgressError
        self._persistence_error = IdempotencyPersistenceLayerError
        self._config: IdempotencyConfig = IdempotencyConfig(
            event_key_jmespath=IDEMPOTENCY_KEY_FIELD,
            raise_on_no_idempotency_key=True,
            expires_after_seconds=dedupe_window_s,
        )
        # The inbox table holds Powertools' records too, under this consumer's prefix, expiring by its TTL.
        persistence = DynamoDBPersistenceLayer(
            table_name=table_name, key_attr=PARTITION_KEY, expiry_attr=TTL_ATTRIBUTE, boto3_client=client
        )

        # Keyed by event_id alone, safely: the prefix is this consumer's (no '#' in it, one external effect).
        def once(*, key: dict[str, str], envelope: Envelope) -> None:
            call(envelope)

        self._once: Callable[..., None] = idempotent_function(
            once,
            data_keyword_argument="key",
            persistence_store=persistence,
            config=self._config,
            key_prefix=f"{consumer}#external",
        )

    def __call__(self, envelope: Envelope) -> None:
        try:
            self._once(key={IDEMPOTENCY_KEY_FIELD: envelope.event_id}, envelope=envelope)
        except self._in_progress_error:
            raise ExternalCallInProgressError(
                f"the external call for event {envelope.event_id} is in progress elsewhere"
            ) from None
        except self._persistence_error as error:
            raise AwsUnavailableError(
                f"the idempotency record of event {envelope.event_id} could not be read or written"
            ) from error

    def register_lambda_context(self, context: Any) -> None:
        """Bounds an in-progress record by the invocation's remaining time (else a crash mid-call would block
        the event until the dedupe window ends)."""
        if context is not None:
            self._config.register_lambda_context(context)
