"""How much time an invocation has left: every call that might not finish in time asks first."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol


class Deadline(Protocol):
    def remaining_ms(self) -> int: ...


@dataclass(frozen=True, slots=True)
class LambdaDeadline:
    """The invocation's remaining time, from the Lambda context."""

    context: object

    def remaining_ms(self) -> int:
        remaining: Callable[[], int] = self.context.get_remaining_time_in_millis  # type: ignore[attr-defined]
        return int(remaining())


@dataclass(frozen=True, slots=True)
class NoDeadline:
    """For callers with no time limit (a CLI redrive, tests)."""

    def remaining_ms(self) -> int:
        return 2**31
