"""What a running `outbox local up` uses (endpoint, ports, region, stack), in a small file while it runs, so
that `outbox local env` reports that runtime rather than the defaults.

One JSON file per runtime, named after its AWS port, in a directory of this user's (`state_directory()`):
written once the runtime is ready, removed when it stops. A file whose process is gone (the runtime was
killed before it could remove it) is ignored and removed by the next reader. Nothing here is kept across
runs: it describes the runtime running now, not its data.

Standard library only: `outbox local env` reads it without loading moto.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from outbox_local.errors import LocalRuntimeError

STATE_DIRECTORY_VARIABLE = "OUTBOX_LOCAL_STATE_DIR"
"""Where the files go instead of the default (tests running several runtimes at once keep theirs apart)."""


class StateDirectoryError(LocalRuntimeError):
    """The directory the runtime would announce itself in is not this user's own."""


@dataclass(frozen=True)
class RuntimeState:
    endpoint_url: str
    aws_port: int
    region: str
    stack_name: str
    template: str
    pid: int
    api_url: str | None = None

    @classmethod
    def from_json(cls, text: str) -> RuntimeState:
        body: Any = json.loads(text)
        if not isinstance(body, dict):
            raise ValueError("not a JSON object")
        return cls(
            endpoint_url=str(body["endpoint_url"]),
            aws_port=int(body["aws_port"]),
            region=str(body["region"]),
            stack_name=str(body["stack_name"]),
            template=str(body["template"]),
            pid=int(body["pid"]),
            api_url=None if body.get("api_url") is None else str(body["api_url"]),
        )


def state_directory() -> Path:
    """$OUTBOX_LOCAL_STATE_DIR, else a directory of this user's under the system's temporary directory."""
    configured = os.environ.get(STATE_DIRECTORY_VARIABLE)
    if configured:
        return Path(configured)
    user = os.getuid() if hasattr(os, "getuid") else "user"
    return Path(tempfile.gettempdir()) / f"outbox-local-{user}"


def _path(aws_port: int) -> Path:
    return state_directory() / f"{aws_port}.json"


def announce(state: RuntimeState) -> Path:
    """Write the runtime's state (atomically: a reader never sees half a file); returns the file."""
    directory = state_directory()
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not _own(directory):
        raise StateDirectoryError(
            f"{directory} is not this user's own directory (another user may write there): remove it, or set "
            f"{STATE_DIRECTORY_VARIABLE} to a directory of yours"
        )
    target = _path(state.aws_port)
    temporary = target.with_suffix(f".{os.getpid()}.tmp")
    temporary.write_text(json.dumps(asdict(state), indent=2), encoding="utf-8")
    temporary.replace(target)
    return target


def withdraw(state: RuntimeState) -> None:
    """Remove the runtime's file, if it is still this process's (another runtime may have taken the port
    since: its file stays)."""
    target = _path(state.aws_port)
    with contextlib.suppress(FileNotFoundError, ValueError, KeyError):
        if RuntimeState.from_json(target.read_text(encoding="utf-8")).pid == state.pid:
            target.unlink()


def running() -> list[RuntimeState]:
    """The runtimes running now, by AWS port. Files of processes that are gone, or that cannot be read, are
    removed."""
    directory = state_directory()
    if not directory.is_dir() or not _own(directory):
        return []  # nothing announced there by this user (a directory another user can write is not read)
    found = []
    for path in sorted(directory.glob("*.json")):
        try:
            state = RuntimeState.from_json(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            continue  # removed since the listing: that runtime stopped
        except (ValueError, KeyError, TypeError):
            path.unlink(missing_ok=True)
            continue
        if _alive(state.pid):
            found.append(state)
        else:
            path.unlink(missing_ok=True)
    return sorted(found, key=lambda state: state.aws_port)


def _own(directory: Path) -> bool:
    """This user's, and writable by no one else: what is read there was written by this user's runtimes."""
    if not hasattr(os, "getuid"):
        return True
    status = directory.stat()
    return status.st_uid == os.getuid() and not status.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # another user's process has the number now: the directory is this user's, so ours ended
    return True
