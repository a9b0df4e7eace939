"""Instructions a command executes, counted by valgrind's cachegrind: a count that does not move with the load
on a shared machine, where every timing does. bench.cold_start and bench.cpu_figures judge their targets by it
when `valgrind` is on PATH.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

VALGRIND = ("--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null")
"""Instructions only (no cache simulation), no profile file: the total it prints is all that is read."""
_INSTRUCTIONS = re.compile(r"I\s+refs:\s+([\d,]+)")


def available() -> bool:
    return shutil.which("valgrind") is not None


def instructions(command: Sequence[str], *, env: Mapping[str, str], cwd: Path, what: str) -> int:
    """Instructions `command` executes under cachegrind, with `env` and one hash seed in every run (set and
    dict layouts, and so the count, repeat exactly). Raises naming `what` if it fails."""
    done = subprocess.run(  # noqa: S603 - valgrind on this interpreter and our own probes
        ["valgrind", *VALGRIND, *command],  # noqa: S607
        env={**env, "PYTHONHASHSEED": "0"},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    counted = _INSTRUCTIONS.search(done.stderr)
    if done.returncode != 0 or counted is None:
        raise RuntimeError(f"{what} under valgrind failed:\n{done.stderr}")
    return int(counted.group(1).replace(",", ""))
