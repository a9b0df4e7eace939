"""How much time an invocation has left: every call that might not finish in time asks first."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol


class Deadline(Protocol):
    def remaining_ms(self) -> int: ...


class LambdaDeadline:
    """The invocation's remaining time, from the Lambda context."""

    __slots__ = ("context",)

    def __init__(self, context: object) -> None:
        self.context = context

    def remaining_ms(self) -> int:
        remaining: Callable[[], int] = self.context.get_remaining_time_in_millis  # type: ignore[attr-defined]
        return int(remaining())


class NoDeadline:
    """For callers with no time limit (a CLI redrive, tests)."""

    __slots__ = ()

    def remaining_ms(self) -> int:
        return 2**31
