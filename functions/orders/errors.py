"""Typed errors of the Orders domain.

The API maps each type to one HTTP status; callers branch on the type, never on message text.
Messages never echo request values (they may be personal data) and are safe to return to clients.
"""

from __future__ import annotations


class OrderError(Exception):
    """Base class of every error the Orders domain raises."""


class OrderValidationError(OrderError, ValueError):
    """The request is malformed. `field` names the offending input, e.g. `items[0].quantity`.

    `field_is_input` is True when the name itself came from the request (an unknown key): it is returned to
    the client that sent it, but never logged (a key name may hold personal data, or not even be text).
    """

    def __init__(self, message: str, *, field: str, field_is_input: bool = False) -> None:
        super().__init__(message)
        self.field = field
        self.field_is_input = field_is_input


class OrderNotFoundError(OrderError):
    """No order with this id exists."""

    def __init__(self, order_id: str) -> None:
        super().__init__("order not found")
        self.order_id = order_id


class InvalidTransitionError(OrderError):
    """The order's status does not allow the command (e.g. confirming a cancelled order)."""

    def __init__(self, order_id: str, current: str, command: str) -> None:
        super().__init__(f"cannot {command} an order that is {current}")
        self.order_id = order_id
        self.current = current
        self.command = command


class ConcurrentModificationError(OrderError):
    """Another request changed the order first (its `version` moved on): re-read and retry."""

    def __init__(
        self, message: str = "the order was changed by another request; re-read it and retry"
    ) -> None:
        super().__init__(message)


class IdempotencyConflictError(OrderError):
    """The idempotency key was already used for a different request."""

    def __init__(self) -> None:
        super().__init__("this Idempotency-Key was already used with a different request")


class OrderStoreUnavailableError(OrderError):
    """The order store failed transiently (throttling, timeout, 5xx): the request may be retried."""


class PreconditionFailedError(OrderError):
    """The request's `If-Match` names no version the order is at: nothing changed. Re-read it and retry."""

    def __init__(self) -> None:
        super().__init__("the order is not at the version If-Match names; re-read it and retry")
