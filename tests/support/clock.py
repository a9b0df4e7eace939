"""The one fake clock of the test suite: time moves only when a test moves it, so no test waits or
depends on the wall clock."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

START = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)


class FakeClock:
    """A settable clock. The library takes it as a `Clock` (`clock()` is a datetime); the local
    runtime's emulators take `clock.seconds` (epoch seconds)."""

    def __init__(self, start: datetime | float = START) -> None:
        self.now = start if isinstance(start, datetime) else datetime.fromtimestamp(start, UTC)

    def __call__(self) -> datetime:
        return self.now

    def seconds(self) -> float:
        return self.now.timestamp()

    def advance(self, delta: timedelta | float = timedelta(0), **parts: float) -> None:
        """Move forward by `delta` (a timedelta or seconds) plus `parts` (timedelta's keywords)."""
        step = delta if isinstance(delta, timedelta) else timedelta(seconds=delta)
        self.now += step + timedelta(**parts)


@dataclass
class RecordingSleep:
    """A `sleep` that records the delays instead of waiting, and moves the fake clock so time still passes."""

    clock: FakeClock | None = None
    delays: list[float] = field(default_factory=list)

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        if self.clock is not None:
            self.clock.advance(seconds)
