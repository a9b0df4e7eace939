"""`outbox local up` as the benchmark runs it: its own process (as a developer starts it), so the client's
load does not share the runtime's interpreter, and its memory (worker processes included) is read from
/proc apart from the client's."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO

READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0


class LocalUpError(Exception):
    """`outbox local up` did not start, or did not stop cleanly."""


class LocalUp:
    def __init__(self, template: Path, extra_arguments: Sequence[str] = ()) -> None:
        self._log: IO[str] = tempfile.NamedTemporaryFile(  # noqa: SIM115 - kept open for the process's life
            "w+", prefix="local-up-", suffix=".log", delete=False
        )
        command = [sys.executable, "-m", "outbox_cli.main", "local", "up", "--template", str(template)]
        # Its stdout (the functions' logs) goes to a file: a pipe nobody reads would stall the runtime.
        self.process = subprocess.Popen(  # noqa: S603 - our own CLI
            [*command, "--aws-port", "0", "--api-port", "0", *extra_arguments],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        self.printed = self._wait_until_ready()

    @property
    def log_path(self) -> str:
        return self._log.name

    @property
    def endpoint_url(self) -> str:
        return self._printed_url("AWS endpoint")

    @property
    def api_url(self) -> str:
        return self._printed_url("HTTP API")

    def processes(self) -> list[int]:
        """The runtime's process and every process under it (its functions' execution environments)."""
        children: dict[int, list[int]] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                parent = _parent(entry)
                if parent is not None:
                    children.setdefault(parent, []).append(int(entry.name))
        found, todo = [], [self.process.pid]
        while todo:
            pid = todo.pop()
            found.append(pid)
            todo.extend(children.get(pid, []))
        return found

    def cpu_seconds(self) -> dict[str, float]:
        """CPU time (user and system) so far, by role: "runtime" (the moto server, the HTTP API, the pollers)
        and each function (its execution environments together, named by their command line)."""
        used: dict[str, float] = {}
        for pid in self.processes():
            role = "runtime" if pid == self.process.pid else _function_of(pid)
            used[role] = used.get(role, 0.0) + _cpu(pid)
        return used

    def rss_bytes(self) -> int:
        """Resident memory of the runtime and its workers (each process's VmRSS, summed: shared pages counted
        once per process, so this errs high)."""
        return sum(_rss(pid) for pid in self.processes())

    def stop(self) -> list[int]:
        """Ctrl-C, as a developer stops it; returns the processes it left behind (none expected)."""
        before = self.processes()
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise LocalUpError(f"outbox local up did not stop on SIGINT; see {self.log_path}") from None
        finally:
            self._log.close()
        return [pid for pid in before if pid != self.process.pid and Path(f"/proc/{pid}").exists()]

    def _wait_until_ready(self) -> str:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            printed = Path(self._log.name).read_text(encoding="utf-8")
            if "\nready" in printed:
                return printed
            if self.process.poll() is not None:
                raise LocalUpError(f"outbox local up exited ({self.process.returncode}):\n{printed}")
            time.sleep(0.2)
        self.process.kill()
        raise LocalUpError(f"outbox local up not ready after {READY_TIMEOUT_S:.0f} s; see {self.log_path}")

    def _printed_url(self, label: str) -> str:
        found = re.search(rf"{label}\s+(http://[\d.]+:\d+)", self.printed)
        if not found:
            raise LocalUpError(f"outbox local up printed no {label}:\n{self.printed}")
        return found.group(1)


def _parent(entry: Path) -> int | None:
    try:
        # /proc/<pid>/stat: "pid (comm) state ppid ...": comm may hold spaces, so split after its ')'.
        return int(entry.joinpath("stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None  # the process ended meanwhile


def _cpu(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0  # the process ended meanwhile
    # utime and stime: fields 14 and 15 of stat, counted from the state (field 3) after the ')'.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _function_of(pid: int) -> str:
    """An execution environment's function: the last argument of its command line."""
    try:
        arguments = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    words = [argument.decode() for argument in arguments if argument]
    return words[-1] if words and any(w.endswith("environment_worker.py") for w in words) else "other"


def _rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass  # the process ended meanwhile
    return 0
