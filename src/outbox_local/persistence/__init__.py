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
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

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


class Persistence:
    def __init__(self, state_dir: Path, *, fresh: bool = False, interval_s: float = CUT_INTERVAL_S) -> None:
        self.directory = StateDirectory(state_dir)
        self._fresh = fresh
        self._interval_s = interval_s
        self.lock = CutLock()
        self.snapshotter: Snapshotter | None = None
        self._cut_lengths: Mapping[StreamKey, int] = {}
        self._saved_lengths: Mapping[StreamKey, int] = {}
        """Each stream's records that the snapshot on disk holds: what the mappings may read."""

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

        def take() -> bytes:
            with guard or contextlib.nullcontext(), self.lock.cut():
                moto = moto_state.capture()
                state = runtime_state()
                self._cut_lengths = stream_lengths()
            return Snapshot(moto=moto, runtime=state).encode()

        def saved() -> None:
            self._saved_lengths = self._cut_lengths

        self.snapshotter = Snapshotter(
            take, self.directory.write, interval_s=self._interval_s, on_saved=saved
        )
        self.snapshotter.save_now()
        self.snapshotter.start()

    def visible(self, stream: StreamKey) -> int:
        """How many of a stream's records a snapshot on disk holds: all a mapping may read
        (`outbox_local.moto_streams.InProcessStreams`)."""
        return self._saved_lengths.get(stream, 0)

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
        snapshotter = self.snapshotter
        if snapshotter is None or not snapshotter.cuts:
            return f"state in {self.directory.path}"
        size = self.directory.snapshot_path.stat().st_size if self.directory.snapshot_path.exists() else 0
        cut_ms = 1000 * snapshotter.cut_seconds / snapshotter.cuts
        write_ms = 1000 * snapshotter.write_seconds / max(1, snapshotter.writes)
        return (
            f"state in {self.directory.path}: {snapshotter.cuts} cuts, {cut_ms:.1f} ms each on average "
            f"(requests held meanwhile), {snapshotter.writes} written, {write_ms:.1f} ms each; "
            f"snapshot {size / 1024:.0f} KiB"
        )
