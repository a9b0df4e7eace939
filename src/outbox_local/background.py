"""What AWS does on its own while the runtime runs in the background, each on a thread of its own.

Every event source mapping polls its source on its own thread, as Lambda's pollers are independent of each
other: a long publisher invocation does not hold up a queue consumer. Within a mapping: a stream shard gets
one invocation at a time, in order; a queue mapping starts its concurrent batches (up to its concurrency, one
per FIFO group) from its own poll and waits for them there (`outbox_local.queue_mapping`). The
schedules fire on a thread (a long sweeper invocation holds up no mapping), and the alarms are evaluated each
second on another (an alarm still moves while every function is busy).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Protocol

from outbox_local.poll_activity import QuietPollers
from outbox_local.stream_mapping import NOTHING_DONE, StepKind, StepReport

logger = logging.getLogger("outbox_local.runtime")

IDLE_POLL_INTERVAL_S = 0.25
"""While a poller finds nothing to do, its polls space out to this: Lambda's base rate for a stream shard ("4
times per second"). The first poll after work comes `poll_interval_s` later, doubling while idle."""


class Poller(Protocol):
    name: str

    def poll_once(self) -> list[StepReport]: ...


class _Schedules:
    """The schedules as one more poller: a tick that fired something did work, as a mapping's invocation."""

    name = "schedules"

    def __init__(self, fire: Callable[[], int]) -> None:
        self._fire = fire

    def poll_once(self) -> list[StepReport]:
        return [StepReport(StepKind.SUCCEEDED if self._fire() else StepKind.IDLE)]


class Background:
    def __init__(
        self,
        pollers: Sequence[Poller],
        *,
        fire_schedules: Callable[[], int],
        evaluate_alarms: Callable[[], object],
        poll_interval_s: float,
        alarm_interval_s: float,
    ) -> None:
        self._pollers: list[Poller] = [*pollers, _Schedules(fire_schedules)]
        self._evaluate_alarms = evaluate_alarms
        self._poll_interval_s = poll_interval_s
        self._alarm_interval_s = alarm_interval_s
        self._quiet = QuietPollers([poller.name for poller in self._pollers])
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        self._stop.clear()
        targets: list[tuple[str, Callable[[], None]]] = [
            (f"outbox-local-{poller.name}", self._poll_loop(poller)) for poller in self._pollers
        ]
        targets.append(("outbox-local-alarms", self._alarm_loop))
        self._threads = [threading.Thread(target=target, name=name) for name, target in targets]
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        """Each thread ends after what it is doing (an invocation under way completes)."""
        self.request_stop()
        self.join()

    def request_stop(self) -> None:
        """No thread starts anything new; `join` waits for what they are doing."""
        self._stop.set()

    def join(self) -> None:
        for thread in self._threads:
            thread.join()
        self._threads = []

    def wait_until_idle(self, timeout_s: float) -> bool:
        """Block until every mapping (and the schedules) was idle at once, in polls started after this call
        and after any work any of them did: a mapping idle on its own may still get work from a function
        another one invokes."""
        return self._quiet.wait_until_idle(timeout_s, after=self._quiet.mark())

    def _poll_loop(self, poller: Poller) -> Callable[[], None]:
        def loop() -> None:
            pause = self._poll_interval_s
            while not self._stop.is_set():
                poll = self._quiet.begin(poller.name)
                idle, worked = False, False
                try:
                    reports = poller.poll_once()
                    idle = all(report.kind is StepKind.IDLE for report in reports)
                    worked = any(report.kind not in NOTHING_DONE for report in reports)
                except Exception:
                    logger.exception("%s failed to poll", poller.name)
                finally:
                    self._quiet.end(poller.name, poll, idle=idle, worked=worked)
                if worked:
                    pause = self._poll_interval_s
                    continue
                # Waiting out a batching window keeps the pace; nothing to do at all slows it down.
                self._stop.wait(pause)
                pause = min(pause * 2, IDLE_POLL_INTERVAL_S) if idle else self._poll_interval_s

        return loop

    def _alarm_loop(self) -> None:
        while not self._stop.wait(self._alarm_interval_s):
            try:
                self._evaluate_alarms()
            except Exception:
                logger.exception("the alarms could not be evaluated")
