"""The threads CloudFormation's stack operations run on: one operation at a time (each changes moto and the
runtime's stacks), each on a thread of its own, as CloudFormation runs it after answering; closed when the
runtime stops (no operation starts any more, the running one ends while everything it attaches to still
runs)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from outbox_local.cloudformation.host import validation_error

logger = logging.getLogger("outbox_local.cloudformation")


class Operations:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._one_at_a_time = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._closing = False

    def start(
        self, name: str, operation: Callable[[], None], failed: Callable[[Exception], None]
    ) -> threading.Thread:
        """Run `operation` (stack `name`'s) on its own thread, after any other; `failed` takes what it
        raises. Refused once `close` began."""

        def run() -> None:
            with self._one_at_a_time:
                try:
                    operation()
                except Exception as error:  # the thread's last word: the stack's status
                    logger.exception("stack %s: operation failed", name)
                    failed(error)

        with self._lock:
            self.refuse_when_closing()
            thread = threading.Thread(target=run, name=f"cloudformation-{name}", daemon=True)
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
            thread.start()
            return thread

    def wait(self, timeout_s: float = 60.0) -> None:
        """Until every operation started has ended, at most `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def refuse_when_closing(self) -> None:
        """Raise once `close` began (a caller checks before it changes anything, then starts)."""
        if self._closing:
            raise validation_error("The local runtime is stopping: no stack operation starts any more.")

    def close(self) -> None:
        """Refuse new operations (`wait` then waits for the running ones)."""
        with self._lock:
            self._closing = True

    def reopen(self) -> None:
        """A runtime started again after its stop: operations start again."""
        with self._lock:
            self._closing = False
