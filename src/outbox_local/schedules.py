"""Schedule rules (`rate(...)` expressions) that invoke their Lambda targets, optionally sped up.

`tick()` fires whatever is due on the injected clock, so tests drive schedules without sleeping; the runtime
calls it from a background thread.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from outbox_local.errors import UnsupportedResourceError
from outbox_local.invocation import InvocationResult
from outbox_local.stream_mapping import Clock

_RATE = re.compile(r"^rate\((\d+)\s+(minute|minutes|hour|hours|day|days)\)$")
_UNIT_SECONDS = {"minute": 60, "hour": 3600, "day": 86400}


def rate_seconds(expression: str) -> int:
    """Seconds between firings of a `rate(...)` expression; cron schedules are refused loudly."""
    found = _RATE.match(expression.strip())
    if not found:
        raise UnsupportedResourceError(f"schedule {expression!r}: only rate(...) expressions run locally")
    value, unit = int(found.group(1)), found.group(2).rstrip("s")
    if (value == 1) != (found.group(2) == unit):
        raise UnsupportedResourceError(f"schedule {expression!r}: AWS requires '1 {unit}' or 'N {unit}s'")
    return value * _UNIT_SECONDS[unit]


@dataclass
class Schedule:
    rule_name: str
    rule_arn: str
    expression: str
    function_arn: str
    interval_s: float
    next_due: float
    target_input: Any = None
    firings: list[InvocationResult] = field(default_factory=list)


class ScheduleRunner:
    def __init__(
        self,
        invoke: Callable[[str, Any], InvocationResult],
        clock: Clock,
        *,
        region: str,
        speedup: float = 1.0,
        paused: Callable[[str], bool] | None = None,
    ) -> None:
        """`paused(function_arn)`: a schedule whose function's region is cut off does not fire (it fires once
        at the first tick after its region is restored, as a late schedule does)."""
        if speedup <= 0:
            raise ValueError("speedup must be positive")
        self._invoke = invoke
        self._clock = clock
        self._region = region
        self._speedup = speedup
        self._paused = paused
        self.schedules: list[Schedule] = []

    def add(
        self, rule_name: str, rule_arn: str, expression: str, function_arn: str, target_input: Any = None
    ) -> Schedule:
        interval = rate_seconds(expression) / self._speedup
        schedule = Schedule(
            rule_name, rule_arn, expression, function_arn, interval, self._clock() + interval, target_input
        )
        self.schedules.append(schedule)
        return schedule

    def remove(self, rule_arns: set[str]) -> None:
        """Fire these rules no more (their stack was removed)."""
        self.schedules = [schedule for schedule in self.schedules if schedule.rule_arn not in rule_arns]

    def seconds_until_next(self) -> float | None:
        if not self.schedules:
            return None
        return max(0.0, min(s.next_due for s in self.schedules) - self._clock())

    def tick(self) -> int:
        """Fire every schedule that is due; return how many fired. A late schedule fires once, not N times."""
        now = self._clock()
        fired = 0
        for schedule in self.schedules:
            if now >= schedule.next_due and not (self._paused and self._paused(schedule.function_arn)):
                event = schedule.target_input if schedule.target_input is not None else self._event(schedule)
                schedule.firings.append(self._invoke(schedule.function_arn, event))
                schedule.next_due = now + schedule.interval_s
                fired += 1
        return fired

    def _event(self, schedule: Schedule) -> dict[str, Any]:
        return {
            "version": "0",
            "id": str(uuid.uuid4()),
            "detail-type": "Scheduled Event",
            "source": "aws.events",
            "account": "123456789012",
            "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "region": self._region,
            "resources": [schedule.rule_arn],
            "detail": {},
        }
