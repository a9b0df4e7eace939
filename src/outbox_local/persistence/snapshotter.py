"""One thread that saves the runtime's state, with group commit: whoever needs its work saved (the HTTP API,
before it answers) waits for the next save to start and reach the disk; every caller waiting meanwhile is
served by that one save. Between requests, a save every `interval_s` keeps the mappings' positions (and
whatever the functions did) saved.

Measured costs are in docs/local.md ("State that survives").
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from outbox_local.errors import LocalRuntimeError

logger = logging.getLogger("outbox_local.persistence")


class StateNotSavedError(LocalRuntimeError):
    """The runtime could not save its state (the cut or the write failed, or the snapshotter stopped)."""


class Snapshotter:
    def __init__(self, save: Callable[[], None], *, interval_s: float) -> None:
        """`save` takes a cut and puts it on disk durably (or raises)."""
        self._save = save
        self._interval_s = interval_s
        self._changed = threading.Condition()
        self._started = 0
        """Saves started so far: a caller waits for the one after those started before it asked."""
        self._saved = 0
        self._failed = 0
        """The last save that failed: a caller waiting for it (or an earlier one) is told why."""
        self._error: BaseException | None = None
        self._asked = False
        self._stopping = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="outbox-local-snapshots", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop after a last save: a clean stop loses nothing."""
        with self._changed:
            self._stopping = True
            self._changed.notify_all()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def wait_saved(self, timeout_s: float) -> None:
        """Return once a save started after this call is on disk; else raise StateNotSavedError."""
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
                self._save()
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
