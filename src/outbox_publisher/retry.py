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

from outbox.aws import INVOCATION_CALL_S
from outbox_publisher.deadline import Deadline
from outbox_publisher.dynamodb_rows import UPDATE_CALL_MS

# Enough to ride out a throttling burst, few enough to leave the rest of the batch its time.
DEFAULT_MAX_ATTEMPTS = 5
DEFAULT_BASE_DELAY_MS = 100
DEFAULT_MAX_DELAY_MS = 2_000
# One publish call (SNS, EventBridge: one attempt, outbox_publisher.adapters) ends within this.
PUBLISH_CONNECT_TIMEOUT_S = 2
PUBLISH_READ_TIMEOUT_S = 5
PUBLISH_CALL_S = PUBLISH_CONNECT_TIMEOUT_S + PUBLISH_READ_TIMEOUT_S
# Time kept free at the end of an invocation: no call of the run (publish, poison queue, order-gate read)
# starts inside it. It outlasts the longest such call, then one row update and the answer to Lambda
# (outbox_publisher.dynamodb_rows.UPDATE_CALL_MS), so whatever was started in time ends in time: a timeout
# would fail the whole batch, publish it all again and leave published rows unsettled. A test ties it to the
# clients' real timeouts.
DEFAULT_SAFETY_MARGIN_MS = (max(PUBLISH_CALL_S, INVOCATION_CALL_S) * 1000) + UPDATE_CALL_MS

Sleep = Callable[[float], None]
"""Sleeps for the given number of seconds."""
Random = Callable[[], float]
"""A uniform float in [0, 1)."""


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
