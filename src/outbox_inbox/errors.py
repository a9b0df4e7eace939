"""The inbox's typed errors. Their messages carry ids and field names only, never payload data."""

from __future__ import annotations

from outbox.errors import OutboxError, RetryableError


class InboxError(OutboxError):
    """Base class of every error the inbox raises."""


class MalformedEnvelopeError(InboxError):
    """A message that is not an outbox envelope in any shape a consumer receives. It can never be applied:
    the consumer sends it to its dead-letter queue with this reason instead of failing the batch."""


class GapNotFilledError(InboxError):
    """The event's predecessor has not been applied yet: the message is handed back (a batch item failure)
    and comes again after the queue's visibility timeout, until the missing event arrives or the wait ends."""

    def __init__(self, *, event_id: str, aggregate_key: str, seq: int, last_applied: int) -> None:
        super().__init__(
            f"event {event_id} ({aggregate_key} seq {seq}) waits for seq {last_applied + 1}: "
            f"seq {last_applied} is the last applied"
        )
        self.event_id = event_id
        self.seq = seq
        self.last_applied = last_applied


class DeadLetterError(InboxError):
    """The dead-letter queue did not take a message: it is handed back rather than lost."""


class ExternalCallInProgressError(InboxError, RetryableError):
    """Another delivery of the same event is making its external call now: handed back, comes again."""


class InvalidSqsEventError(InboxError):
    """An SQS consumer's invocation that carries no batch of SQS records: it fails, rather than answering that
    nothing failed for an event it never applied."""
