"""State that survives: what a runtime started with a state directory keeps across a stop, a crash or a
SIGKILL (docs/local.md, "State that survives").

`Persistence` is what the runtime uses: it claims the state directory, hands back the last snapshot to
restore from, serves the AWS endpoint's requests under the cut lock, and runs the snapshotter, whose cuts hold
moto's backends (`moto_state`) and the runtime's own state, read at the same instant (`cut`). The HTTP API
answers only once a cut taken after its invocation ended is on disk (`wait_saved`), so an acknowledged
request survives any crash after its answer.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import traceback
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from importlib.metadata import version
from pathlib import Path
from typing import Any, NoReturn

from outbox_local.faults import WsgiApp
from outbox_local.invocation import InvocationResult
from outbox_local.moto_streams import StreamKey, stream_lengths
from outbox_local.persistence import moto_state
from outbox_local.persistence.cut import CutLock
from outbox_local.persistence.snapshots import Snapshot, StateDirectory, StateDirError
from outbox_local.persistence.snapshotter import Snapshotter, StateNotSavedError

__all__ = ["Persistence", "Snapshot", "StateDirError", "StateNotSavedError"]

CUT_INTERVAL_S = 1.0
"""A cut at least this often while the runtime runs (the mappings' positions move without any request)."""
SAVE_TIMEOUT_S = 30.0
"""How long the HTTP API waits for its answer's cut before answering an error instead."""
WRITE_TIMEOUT_S = 60.0
"""How long a snapshot writer may take (it pickles and writes in ~10-100 ms): one still running then is
killed, and its save fails."""
_WAIT_POLL_S = (0.001, 0.05)


class Persistence:
    def __init__(self, state_dir: Path, *, fresh: bool = False, interval_s: float = CUT_INTERVAL_S) -> None:
        self.directory = StateDirectory(state_dir)
        self._fresh = fresh
        self._interval_s = interval_s
        self.lock = CutLock()
        self.snapshotter: Snapshotter | None = None
        self._saved_lengths: Mapping[StreamKey, int] = {}
        """Each stream's records that the snapshot on disk holds: what the mappings may read."""
        self.write_timeout_s = WRITE_TIMEOUT_S
        self._moto_version = version("moto")
        """Looked up here, not in a writer: a forked process must not read package metadata (it may wait for
        a lock a thread of the runtime held at the fork)."""
        self._changes_at_last_save = -1
        self._last_saved: Any = None
        """The runtime's own state in the last snapshot written: saved again only once it changed."""
        self.saves = 0
        self.held_s = 0.0
        """Time requests were held by cuts (a fork each), and time the saves took in all (cut to fsync)."""
        self.saving_s = 0.0

    def open(self) -> Snapshot | None:
        """Claim the directory (one runtime at a time) and answer the snapshot to restore from: None when
        there is none, or when `fresh` discarded it."""
        self.directory.claim()
        if self._fresh:
            self.directory.discard()
            return None
        return self.directory.read()

    def wrap(self, app: WsgiApp) -> WsgiApp:
        return self.lock.wrap(app)

    def start(
        self, runtime_state: Callable[[], Any], *, guard: AbstractContextManager[Any] | None = None
    ) -> None:
        """Save now (what was just provisioned or restored), then keep saving in the background.
        `runtime_state` is read during each cut, while no request runs. `guard` is held around each cut,
        taken before the cut lock (the runtime's stacks lock: no stack is half created or removed in a cut;
        whoever holds it may make requests meanwhile, which the cut, not yet waiting, lets through)."""

        def save() -> None:
            self._save(runtime_state, guard or contextlib.nullcontext())

        save()  # before the thread: the first state is on disk when start() returns
        self.snapshotter = Snapshotter(save, interval_s=self._interval_s)
        self.snapshotter.start()

    def _save(self, runtime_state: Callable[[], Any], guard: AbstractContextManager[Any]) -> None:
        """One cut, written by a child process forked during it (`_write_in_child`): requests are held only
        for the fork, while the child, a copy of this process frozen at the cut, pickles and writes at its
        pace. No request that may change moto since the last save and the runtime's own state as saved then:
        nothing to write."""
        started = time.perf_counter()
        with guard, self.lock.cut(), moto_state.queues_held():
            changes = self.lock.changes
            state = runtime_state()
            if changes == self._changes_at_last_save and state == self._last_saved:
                return
            lengths = stream_lengths()
            child = os.fork()
            if child == 0:
                self._write_in_child(state)
        held = time.perf_counter() - started
        status = self._wait_for_writer(child)
        if status != 0:
            raise StateNotSavedError(f"the process writing the snapshot failed (wait status {status})")
        self._changes_at_last_save = changes
        self._last_saved = state
        self._saved_lengths = lengths
        self.saves += 1
        self.held_s += held
        self.saving_s += time.perf_counter() - started

    def _wait_for_writer(self, child: int) -> int:
        """The writer's wait status once it ended; killed (and its temporary file removed) when it runs past
        `write_timeout_s`, which fails the save."""
        deadline = time.monotonic() + self.write_timeout_s
        pause, longest = _WAIT_POLL_S
        while True:
            ended, status = os.waitpid(child, os.WNOHANG)
            if ended:
                return status
            if time.monotonic() >= deadline:
                break
            time.sleep(pause)
            pause = min(2 * pause, longest)
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
        self.directory.temporary_path(child).unlink(missing_ok=True)
        raise StateNotSavedError(
            f"the process writing the snapshot did not finish within {self.write_timeout_s} s: killed"
        )

    def _write_in_child(self, state: Any) -> NoReturn:
        """In the forked child: only this thread exists, every other one stopped where it was at the cut
        (no request mid-way, every queue's lock held by this thread). Pickle, write, exit without running
        anything of the parent's (no atexit, no buffered output flushed twice)."""
        try:
            snapshot = Snapshot(moto=moto_state.dump(), runtime=state, moto_version=self._moto_version)
            self.directory.write(snapshot.encode())
        except BaseException:
            with contextlib.suppress(BaseException):
                os.write(
                    2, f"outbox local: the snapshot could not be written:\n{traceback.format_exc()}".encode()
                )
            os._exit(1)
        os._exit(0)

    def visible(self, stream: StreamKey) -> int:
        """How many of a stream's records a snapshot on disk holds: all a mapping may read
        (`outbox_local.moto_streams.InProcessStreams`)."""
        return self._saved_lengths.get(stream, 0)

    def holds_every_record(self) -> bool:
        """Whether the snapshot on disk holds every stream record written so far (none is kept from the
        mappings)."""
        return all(self.visible(stream) >= length for stream, length in stream_lengths().items())

    def wait_saved(self, timeout_s: float = SAVE_TIMEOUT_S) -> None:
        """Return once what happened before this call is on disk (`Snapshotter.wait_saved`)."""
        if self.snapshotter is None:
            raise StateNotSavedError("the runtime is not saving its state (not started)")
        self.snapshotter.wait_saved(timeout_s)

    def durable(self, result: InvocationResult) -> InvocationResult:
        """An HTTP API invocation's result once what it did is on disk; an error result when it cannot be
        saved (the client must not take it as done)."""
        try:
            self.wait_saved()
        except StateNotSavedError as error:
            return InvocationResult(error_type=type(error).__name__, error_message=str(error))
        return result

    def close(self) -> None:
        """A last cut, written (call it once nothing runs any more), then the directory let go."""
        try:
            if self.snapshotter is not None:
                self.snapshotter.stop()
        finally:
            self.directory.release()

    def figures(self) -> str:
        """What saving cost so far, in words (`outbox local up` prints it as it stops)."""
        if not self.saves:
            return f"state in {self.directory.path}"
        path = self.directory.snapshot_path
        size = path.stat().st_size / 1024 if path.exists() else 0
        held, saving = 1000 * self.held_s / self.saves, 1000 * self.saving_s / self.saves
        return (
            f"state in {self.directory.path}: {self.saves} snapshots, requests held {held:.1f} ms and "
            f"saved in {saving:.1f} ms each on average; snapshot {size:.0f} KiB"
        )
