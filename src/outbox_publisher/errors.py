"""Typed errors of the publisher. Messages carry codes and reasons, never payload data."""

from __future__ import annotations

from enum import StrEnum

from outbox.errors import OutboxError


class FailureKind(StrEnum):
    """How a destination's refusal is handled."""

    TRANSIENT = "transient"
    """Throttling, 5xx, timeouts: retried with backoff inside the invocation, then handed back to Lambda."""
    BLOCKED = "blocked"
    """The destination refuses every event (permissions, missing topic or bus): not the event's fault, so
    never poison; retrying within the invocation is pointless. Handed back to Lambda (and alarmed on)."""
    PERMANENT = "permanent"
    """This event can never be accepted (invalid, too large): poison."""


class PublisherError(OutboxError):
    """Base class of the publisher's errors."""


class DestinationCallError(PublisherError):
    """A whole PublishBatch or PutEvents call failed: every entry of it failed the same way."""

    def __init__(self, message: str, *, code: str, kind: FailureKind) -> None:
        super().__init__(message)
        self.code = code
        self.kind = kind


class PoisonQueueUnavailableError(PublisherError):
    """The poison queue did not take a message: the record must be retried, never dropped."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code


class InvalidStreamEventError(PublisherError):
    """The Lambda event is not a DynamoDB stream batch this publisher can answer for."""


class StreamConfigurationError(PublisherError):
    """A stream record shows the publisher is wired wrong (another table's stream, no new image): the
    invocation fails, loudly, until the configuration is fixed. Never skipped, never poison."""
