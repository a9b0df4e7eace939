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
from dataclasses import dataclass
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


@dataclass
class _Running:
    stop: threading.Event
    thread: threading.Thread | None = None


def _key(poller: Poller) -> str:
    """Two stacks' mappings may share a logical id, and so a name: the key is the poller itself."""
    return f"{poller.name}#{id(poller)}"


class Background:
    """The pollers' and the alarms' threads. Pollers come and go while it runs, as stacks are added and
    removed: each has a thread of its own, and a stop of its own."""

    def __init__(
        self,
        pollers: Sequence[Poller],
        *,
        fire_schedules: Callable[[], int],
        evaluate_alarms: Callable[[], object],
        poll_interval_s: float,
        alarm_interval_s: float,
        paused: Callable[[Poller], bool] | None = None,
    ) -> None:
        """`paused(poller)`: a poller of a region cut off (`LocalRuntime.cut_region`) does not poll, as
        Lambda's pollers there stop; it takes up where it was once its region is restored."""
        self._paused = paused
        self._evaluate_alarms = evaluate_alarms
        self._poll_interval_s = poll_interval_s
        self._alarm_interval_s = alarm_interval_s
        self._quiet = QuietPollers([])
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._running: dict[int, _Running] = {}
        """id(poller) -> its thread and its own stop."""
        self._pending: list[Poller] = [*pollers, _Schedules(fire_schedules)]
        self._alarms: threading.Thread | None = None
        self._started = False

    def start(self) -> None:
        self._stop.clear()
        with self._lock:
            pending, self._pending = self._pending, []
            self._started = True
        self.add(pending)
        self._alarms = threading.Thread(target=self._alarm_loop, name="outbox-local-alarms")
        self._alarms.start()

    def add(self, pollers: Sequence[Poller]) -> None:
        """Poll these too, each on a thread of its own (from `start()` on, if it was not called yet)."""
        with self._lock:
            if not self._started:
                self._pending.extend(pollers)
                return
            for poller in pollers:
                key = _key(poller)
                self._quiet.add(key)
                running = _Running(threading.Event())
                running.thread = threading.Thread(
                    target=self._poll_loop(poller, key, running.stop), name=f"outbox-local-{poller.name}"
                )
                self._running[id(poller)] = running
                running.thread.start()

    def remove(self, pollers: Sequence[Poller]) -> None:
        """Poll these no more: each thread ends after what it is doing (an invocation under way completes)."""
        with self._lock:
            removed = [(poller, self._running.pop(id(poller), None)) for poller in pollers]
        for poller, running in removed:
            if running is None:
                continue
            running.stop.set()
            if running.thread is not None and running.thread is not threading.current_thread():
                running.thread.join()
            self._quiet.forget(_key(poller))

    def stop(self) -> None:
        """Each thread ends after what it is doing (an invocation under way completes)."""
        self.request_stop()
        self.join()

    def request_stop(self) -> None:
        """No thread starts anything new; `join` waits for what they are doing."""
        self._stop.set()

    def join(self) -> None:
        with self._lock:
            threads = [running.thread for running in self._running.values() if running.thread is not None]
            self._running = {}
            alarms, self._alarms = self._alarms, None
            self._started = False
        for thread in [*threads, *([alarms] if alarms is not None else [])]:
            thread.join()

    def wait_until_idle(self, timeout_s: float) -> bool:
        """Block until every mapping (and the schedules) was idle at once, in polls started after this call
        and after any work any of them did: a mapping idle on its own may still get work from a function
        another one invokes."""
        return self._quiet.wait_until_idle(timeout_s, after=self._quiet.mark())

    def _poll_loop(self, poller: Poller, key: str, own_stop: threading.Event) -> Callable[[], None]:
        def loop() -> None:
            pause = self._poll_interval_s
            while not (self._stop.is_set() or own_stop.is_set()):
                poll = self._quiet.begin(key)
                idle, worked = False, False
                try:
                    paused = self._paused is not None and self._paused(poller)
                    reports = [StepReport(StepKind.IDLE)] if paused else poller.poll_once()
                    idle = all(report.kind is StepKind.IDLE for report in reports)
                    worked = any(report.kind not in NOTHING_DONE for report in reports)
                except Exception:
                    logger.exception("%s failed to poll", poller.name)
                finally:
                    self._quiet.end(key, poll, idle=idle, worked=worked)
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
