"""Typed errors of the operations: each says, in one line, why nothing (more) was done."""

from __future__ import annotations

from outbox.errors import OutboxError


class OperationError(OutboxError):
    """An operation cannot do what was asked; nothing was changed."""


class ResourceNotFoundError(OperationError):
    """The stack, an output, or a resource the operation needs is not there."""


class RowNotFoundError(OperationError):
    """No outbox row matches what was asked for."""
