"""One thread that takes cuts and writes them, with group commit: whoever needs its work saved (the HTTP API,
before it answers) waits for the next cut to start and reach the disk; every caller waiting meanwhile is
served by that one cut. Between requests, a cut every `interval_s` keeps the mappings' positions (and
whatever the functions did) saved; a cut equal to the last one written is not written again.

Measured costs are in docs/local.md ("State that survives").
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from outbox_local.errors import LocalRuntimeError

logger = logging.getLogger("outbox_local.persistence")


class StateNotSavedError(LocalRuntimeError):
    """The runtime could not save its state (the cut or the write failed, or the snapshotter stopped)."""


class Snapshotter:
    def __init__(
        self,
        take: Callable[[], bytes],
        write: Callable[[bytes], None],
        *,
        interval_s: float,
        on_saved: Callable[[], None] = lambda: None,
    ) -> None:
        """`take` makes a cut (bytes to write); `write` puts it on disk durably; `on_saved` is told once the
        cut `take` made last is on disk (written now, or equal to the one written before)."""
        self._take = take
        self._write = write
        self._on_saved = on_saved
        self._interval_s = interval_s
        self._changed = threading.Condition()
        self._started = 0
        """Cuts started so far: a caller waits for the one after those started before it asked."""
        self._saved = 0
        self._asked = False
        self._stopping = False
        self._error: BaseException | None = None
        self._failed = 0
        """The last cut that failed: a caller waiting for it (or an earlier one) is told why."""
        self._last: bytes | None = None
        self._thread: threading.Thread | None = None
        self.cuts = 0
        self.writes = 0
        self.cut_seconds = 0.0
        """Time spent in cuts (requests held meanwhile) and writes, for the measurements."""
        self.write_seconds = 0.0

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="outbox-local-snapshots", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop after a last cut, written: a clean stop loses nothing."""
        with self._changed:
            self._stopping = True
            self._changed.notify_all()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def save_now(self) -> None:
        """Take a cut and write it on the calling thread (before the thread starts, or after it stopped)."""
        self._save(self._take())

    def wait_saved(self, timeout_s: float) -> None:
        """Return once a cut started after this call is on disk; else raise StateNotSavedError."""
        with self._changed:
            if self._stopping or self._thread is None:
                raise StateNotSavedError("the runtime is not saving its state (stopping)")
            target = self._started + 1
            self._asked = True
            self._changed.notify_all()
            reached = self._changed.wait_for(
                lambda: self._saved >= target or self._failed >= target or self._stopping, timeout_s
            )
            if self._saved >= target:
                return
            if self._failed >= target:
                raise StateNotSavedError(f"the runtime could not save its state: {self._error}")
            if reached:
                raise StateNotSavedError("the runtime stopped before saving its state")
            raise StateNotSavedError(f"the runtime's state was not saved within {timeout_s} s")

    def _run(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._asked or self._stopping, self._interval_s)
                stopping = self._stopping
                self._asked = False
                self._started += 1
                number = self._started
            try:
                started = time.perf_counter()
                data = self._take()
                self.cut_seconds += time.perf_counter() - started
                self.cuts += 1
                self._save(data)
            except Exception as error:  # reported to every waiter, and the loop goes on
                logger.exception("the runtime could not save its state")
                with self._changed:
                    self._error, self._failed = error, number
                    self._changed.notify_all()
            else:
                with self._changed:
                    self._saved = number
                    self._changed.notify_all()
            if stopping:
                return

    def _save(self, data: bytes) -> None:
        if data != self._last:
            started = time.perf_counter()
            self._write(data)
            self.write_seconds += time.perf_counter() - started
            self.writes += 1
            self._last = data
        self._on_saved()
