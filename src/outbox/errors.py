"""Typed errors of the outbox library.

Callers branch on the type, never on message text. Messages never contain payload data:
they end up in logs and in an outbox row's `last_error`.
"""

from __future__ import annotations


class OutboxError(Exception):
    """Base class of every error this library raises."""


# --- Bad input: raised before anything is sent to AWS, so nothing is written. ---------------------


class OutboxValidationError(OutboxError, ValueError):
    """The request can never succeed as it is; retrying it is pointless."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class InvalidEventError(OutboxValidationError):
    """An outbox event breaks the row contract (bad key, seq, type, timestamp...)."""


class InvalidPayloadError(InvalidEventError):
    """The payload is not a JSON object (or holds values JSON cannot represent)."""


class SchemaError(InvalidEventError):
    """An event's payload is refused by the service's schemas; `event_type` and `schema_version` say which."""

    def __init__(self, message: str, *, event_type: str, schema_version: int) -> None:
        super().__init__(message, field="payload")
        self.event_type = event_type
        self.schema_version = schema_version


class UnknownSchemaError(SchemaError):
    """No schema describes this event type and version, and the service's registry does not let it through."""

    def __init__(self, event_type: str, schema_version: int) -> None:
        super().__init__(
            f"no schema for {event_type} v{schema_version}: add its file or fix the event's type or version",
            event_type=event_type,
            schema_version=schema_version,
        )


class SchemaViolationError(SchemaError):
    """The payload does not match its schema. `path` is the JSON path of the first mismatch (`$.lines[0].sku`;
    a key the schema does not declare shows as `*`), `rule` the JSON Schema keyword it broke (`type`,
    `required`, `enum`...): the value itself is never named."""

    def __init__(self, event_type: str, schema_version: int, *, path: str, rule: str) -> None:
        super().__init__(
            f"{event_type} v{schema_version} payload does not match its schema at {path} ({rule})",
            event_type=event_type,
            schema_version=schema_version,
        )
        self.path = path
        self.rule = rule


class TooManyActionsError(OutboxValidationError):
    """A transaction would exceed DynamoDB's 100-action limit."""


class TransactionTooLargeError(OutboxValidationError):
    """A transaction would exceed DynamoDB's 4 MB aggregate size limit."""


class ItemTooLargeError(OutboxValidationError):
    """One item would exceed DynamoDB's 400 KB item size limit."""


class DuplicateItemKeyError(OutboxValidationError):
    """Two actions of one transaction target the same item, which DynamoDB rejects."""


class InvalidOutboxRowError(OutboxValidationError):
    """A stored outbox row cannot be read back as an event (poison for a publisher)."""


class InvalidNumberError(OutboxValidationError):
    """A number written as text (a setting, a command's argument) is not a positive whole number in range.

    The message is a predicate for the caller to put its subject before ("must be positive, got 0")."""


# --- Outcomes of a transaction DynamoDB cancelled. ---------------------------------------------


class TransactionCancelledError(OutboxError):
    """DynamoDB cancelled the transaction: nothing of it was written.

    `reasons` holds DynamoDB's CancellationReasons codes, one per action, in action order.
    """

    def __init__(self, message: str, *, reasons: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.reasons = reasons


class ConditionFailedError(TransactionCancelledError):
    """An action's condition did not hold. `action` is the label its builder gave it."""

    def __init__(self, action: str, *, index: int, reasons: tuple[str, ...] = ()) -> None:
        super().__init__(f"condition of action {index} ({action}) failed", reasons=reasons)
        self.action = action
        self.index = index


class DuplicateEventError(ConditionFailedError):
    """An outbox row with this aggregate_key and seq already exists (a concurrent writer won)."""


class TransactionValidationError(TransactionCancelledError, OutboxValidationError):
    """DynamoDB rejected the transaction as invalid; retrying it unchanged is pointless."""


# --- Transient failures: the caller may retry. ------------------------------------------------


class RetryableError(OutboxError):
    """A transient failure (throttling, conflict with another transaction, 5xx, timeout)."""


class TransactionConflictError(TransactionCancelledError, RetryableError):
    """Another transaction or request touched one of the items at the same moment."""


class ThrottledError(RetryableError):
    """DynamoDB throttled the request."""


class AwsUnavailableError(RetryableError):
    """AWS answered with a server error or did not answer in time."""


class OutOfTimeError(RetryableError):
    """Too little time is left in the invocation to start the call: it was not made."""


class AwsCallError(OutboxError):
    """An AWS error this library has no more specific type for. `code` is AWS's error code."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code


class ConfigurationError(OutboxError):
    """Configuration is missing or invalid. Raised once, at start-up."""
