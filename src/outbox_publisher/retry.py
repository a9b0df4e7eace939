"""Capped exponential backoff with full jitter, bounded by attempts and by the invocation's remaining time.

Full jitter (a uniform delay in [0, min(cap, base * 2**n))) spreads retries of many concurrent shards
apart instead of having them hit a throttled service again in step. Sleep, randomness and remaining
time are injected, so tests never wait.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

# Enough to ride out a throttling burst, few enough to leave the rest of the batch its time.
DEFAULT_MAX_ATTEMPTS = 5
DEFAULT_BASE_DELAY_MS = 100
DEFAULT_MAX_DELAY_MS = 2_000
# Kept free at the end of an invocation: no publish call starts inside it. It outlasts the longest
# publish call (PUBLISH_CONNECT_TIMEOUT_S + PUBLISH_READ_TIMEOUT_S), so a call started just before it
# still ends in time for the poison queue, marking rows and answering Lambda: a timeout would fail
# the whole batch and leave published rows unmarked.
PUBLISH_CONNECT_TIMEOUT_S = 2
PUBLISH_READ_TIMEOUT_S = 5
DEFAULT_SAFETY_MARGIN_MS = 10_000

Sleep = Callable[[float], None]
"""Sleeps for the given number of seconds."""
Random = Callable[[], float]
"""A uniform float in [0, 1)."""


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


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    base_delay_ms: int = DEFAULT_BASE_DELAY_MS
    max_delay_ms: int = DEFAULT_MAX_DELAY_MS
    safety_margin_ms: int = DEFAULT_SAFETY_MARGIN_MS

    def __post_init__(self) -> None:
        if self.max_attempts < 1 or self.base_delay_ms < 0 or self.max_delay_ms < self.base_delay_ms:
            raise ValueError("invalid retry policy")

    def delay_ms(self, attempt: int, random_source: Random) -> float:
        """Delay before retry number `attempt` (1 = the first retry)."""
        ceiling = min(self.max_delay_ms, self.base_delay_ms * (1 << (attempt - 1)))
        return float(random_source() * ceiling)

    def has_time_for(self, deadline: Deadline, delay_ms: float = 0.0) -> bool:
        return deadline.remaining_ms() - delay_ms > self.safety_margin_ms


def system_sleep(seconds: float) -> None:
    time.sleep(seconds)


def system_random() -> float:
    # Jitter only, not security: a non-cryptographic source is the right tool.
    return random.random()  # noqa: S311
