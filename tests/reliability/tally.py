"""What every random schedule did, kept per test process and written as JSON lines when the process ends."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

TALLY_DIR_VARIABLE = "RELIABILITY_TALLY_DIR"
_results: list[dict[str, Any]] = []


def record(result: dict[str, Any]) -> None:
    """Keep one schedule's figures. Call it before asserting, so a failing schedule is counted too."""
    _results.append(result)


def recorded() -> list[dict[str, Any]]:
    return list(_results)


def write_at_exit(worker: str) -> None:
    directory = os.environ.get(TALLY_DIR_VARIABLE)
    if not directory or not _results:
        return
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    with (path / f"{worker}.jsonl").open("a", encoding="utf-8") as out:
        for result in _results:
            out.write(json.dumps(result, sort_keys=True) + "\n")
    _results.clear()
