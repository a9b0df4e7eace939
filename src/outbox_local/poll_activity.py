"""When a mapping's poller may be called idle, and when all of them are: what `wait_until_idle` waits on.

Shared by the stream and the queue mappings. Polls are numbered as they start; an idle poll only proves
"nothing to do" for what was written before it started (a poll already under way when the caller wrote may
have read its source before the write), so waiters compare against the number of the last idle poll.
"""

from __future__ import annotations

import threading


class PollActivity:
    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._started = 0
        self._last_idle = 0

    def begin(self) -> int:
        """A poll starts: its number."""
        with self._condition:
            self._started += 1
            return self._started

    def end(self, poll: int, *, idle: bool) -> None:
        """Poll number `poll` ended; `idle` when it found nothing to do."""
        with self._condition:
            if idle:
                self._last_idle = max(self._last_idle, poll)
            self._condition.notify_all()

    def mark(self) -> int:
        """The number of polls started so far: a later `wait_until_idle(after=mark)` ignores them."""
        with self._condition:
            return self._started

    def wait_until_idle(self, timeout_s: float, *, after: int | None = None) -> bool:
        """Block until a poll that started after `after` (default: now) found nothing to do."""
        with self._condition:
            mark = self._started if after is None else after
            return self._condition.wait_for(lambda: self._last_idle > mark, timeout_s)


class QuietPollers:
    """When several pollers, each on its own thread, were all idle at once.

    A poll that did work (invoked a function, deleted messages, discarded records) may have written to what
    another poller reads, so only a poll that started after the last work ended vouches for its poller: every
    poller's latest poll must be over, idle, and have started after both the caller's mark and the end of the
    last work anywhere.
    """

    def __init__(self, names: list[str]) -> None:
        self._condition = threading.Condition()
        self._started = 0
        self._work_ended = 0
        """The number of polls started when the last work ended."""
        self._latest: dict[str, tuple[int, bool | None]] = dict.fromkeys(names, (0, None))
        """Poller -> (number of its latest poll, whether it was idle; None while under way)."""

    def add(self, name: str) -> None:
        """A poller that starts polling now (a stack added while the runtime runs)."""
        with self._condition:
            self._latest[name] = (0, None)

    def forget(self, name: str) -> None:
        """A poller that polls no more (its stack was removed): it no longer holds anyone's wait."""
        with self._condition:
            self._latest.pop(name, None)
            self._condition.notify_all()

    def begin(self, name: str) -> int:
        with self._condition:
            self._started += 1
            self._latest[name] = (self._started, None)
            return self._started

    def end(self, name: str, poll: int, *, idle: bool, worked: bool) -> None:
        with self._condition:
            self._latest[name] = (poll, idle)
            if worked:
                self._work_ended = self._started
            self._condition.notify_all()

    def mark(self) -> int:
        with self._condition:
            return self._started

    def wait_until_idle(self, timeout_s: float, *, after: int) -> bool:
        def quiet() -> bool:
            since = max(after, self._work_ended)
            return all(idle is True and poll > since for poll, idle in self._latest.values())

        with self._condition:
            return self._condition.wait_for(quiet, timeout_s)
