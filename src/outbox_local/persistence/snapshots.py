"""The state directory: one snapshot file, replaced whole, and a lock file held by the runtime using it.

A snapshot is written atomically: to a temporary file beside it, flushed and fsync'ed, renamed over the
previous one, then the directory fsync'ed, so that after a crash (of the process or of the machine) the file
is either the previous snapshot or the new one, never a mix. Its first line names the format and its version;
the rest is one pickle: moto's state (bytes, `outbox_local.persistence.moto_state`) and the runtime's own.

One runtime per state directory: `StateDirectory.claim` takes an exclusive `flock` on `lock`, which the
operating system lets go when the process ends, however it ends (a SIGKILL included), so a killed runtime
never leaves a stale lock behind. The process writing a snapshot (forked by the runtime,
`outbox_local.persistence`) shares the lock while it writes: when the runtime named in the lock file is gone
but the lock is held, `claim` waits for that writer to finish before the next runtime reads.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pickle
import time
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import IO, Any

from outbox_local.errors import LocalRuntimeError

SNAPSHOT_FILE = "runtime.snapshot"
LOCK_FILE = "lock"
_HEADER = b"outbox-local-state 1\n"
CLAIM_WAIT_S = 60.0
"""How long a runtime waits for a killed runtime's snapshot writer to finish."""
_CLAIM_POLL_S = 0.05


def _locked(lock: IO[bytes], wait_s: float) -> bool:
    """Take the lock; when held, wait for it only while its runtime is gone (its writer finishing)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            if _holder_alive(lock) or time.monotonic() >= deadline:
                return False
            time.sleep(_CLAIM_POLL_S)
        else:
            return True


def _holder_alive(lock: IO[bytes]) -> bool:
    lock.seek(0)
    text = lock.read().decode("ascii", "replace").strip()
    if not text.isdigit():
        return True
    try:
        os.kill(int(text), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class StateDirError(LocalRuntimeError):
    """The state directory cannot be used: in use by another runtime, not writable, or its snapshot is not
    one this version wrote."""


@dataclass(frozen=True)
class Snapshot:
    moto: bytes
    """moto's backends (`moto_state.capture`)."""
    runtime: Any
    """The runtime's own state (its stacks, the mappings' positions): picklable, the runtime's to read."""
    moto_version: str = field(default_factory=lambda: version("moto"))
    """The moto that made it: another one's objects may unpickle and still not be what it expects."""

    def encode(self) -> bytes:
        return pickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL)


class StateDirectory:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock: IO[bytes] | None = None

    @property
    def snapshot_path(self) -> Path:
        return self.path / SNAPSHOT_FILE

    def claim(self) -> None:
        """Create the directory if needed and hold its lock until `release` (or the process's end)."""
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            lock = (self.path / LOCK_FILE).open("a+b")
        except OSError as error:
            raise StateDirError(f"the state directory {self.path} cannot be used: {error}") from None
        if not _locked(lock, CLAIM_WAIT_S):
            lock.seek(0)
            holder = lock.read().decode("ascii", "replace").strip() or "another process"
            lock.close()
            raise StateDirError(
                f"the state directory {self.path} is in use by another `outbox local up` (pid {holder}): "
                "stop it, or pass another --state-dir"
            ) from None
        lock.seek(0)
        lock.truncate()
        lock.write(str(os.getpid()).encode("ascii"))
        lock.flush()
        self._lock = lock

    def release(self) -> None:
        if self._lock is not None:
            self._lock.close()  # closing the last descriptor lets the flock go
            self._lock = None

    def discard(self) -> None:
        """Forget the saved state (`--fresh`)."""
        with contextlib.suppress(FileNotFoundError):
            self.snapshot_path.unlink()

    def read(self) -> Snapshot | None:
        """The last snapshot written, or None when there is none."""
        try:
            data = self.snapshot_path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as error:
            raise StateDirError(f"the snapshot {self.snapshot_path} cannot be read: {error}") from None
        if not data.startswith(_HEADER):
            raise StateDirError(
                f"{self.snapshot_path} is not a snapshot this version of outbox wrote: start with --fresh "
                "to discard it"
            )
        try:
            snapshot = pickle.loads(data[len(_HEADER) :])  # noqa: S301 - the runtime's own file, in its own directory
        except Exception as error:
            raise StateDirError(
                f"the snapshot {self.snapshot_path} cannot be read ({type(error).__name__}: {error}): start "
                "with --fresh to discard it"
            ) from None
        if not isinstance(snapshot, Snapshot):
            raise StateDirError(f"{self.snapshot_path} holds no snapshot: start with --fresh to discard it")
        if snapshot.moto_version != version("moto"):
            raise StateDirError(
                f"{self.snapshot_path} was saved by moto {snapshot.moto_version}, this is moto "
                f"{version('moto')}: start with --fresh to discard it"
            )
        return snapshot

    def temporary_path(self, writer: int) -> Path:
        """Where the process `writer` writes a snapshot before renaming it into place."""
        return self.path / f".{SNAPSHOT_FILE}.{writer}.tmp"

    def write(self, encoded: bytes) -> None:
        """Replace the snapshot with an encoded one (`Snapshot.encode`), atomically and durably."""
        data = _HEADER + encoded
        temporary = self.temporary_path(os.getpid())
        with temporary.open("wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, self.snapshot_path)
        directory = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(directory)  # the rename itself survives a machine's crash
        finally:
            os.close(directory)
