"""`make reliability`'s report: it fails on an unexplained duplicate, and, in a long run, on a fault kind that
never took effect."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.reliability import report
from tests.reliability.kinds import EFFECTIVE_UNITS


def result(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "commands": 1,
        "commands_failed": 0,
        "events": 1,
        "armed": dict.fromkeys(EFFECTIVE_UNITS, 1),
        "effective": dict.fromkeys(EFFECTIVE_UNITS, 1),
        "duplicates": {},
        "clear_to_drained_s": 1.0,
        "drained": True,
        "lost": 0,
        "invented": 0,
        "out_of_order": 0,
        "duplicate_effects": 0,
        "unexplained_duplicates": 0,
        "schedule": "{}",
    }
    return {**base, **changes}


def run(tmp_path: Path, results: list[dict[str, Any]]) -> int:
    tally = tmp_path / "tally"
    tally.mkdir()
    (tally / "main.jsonl").write_text("".join(json.dumps(r) + "\n" for r in results), encoding="utf-8")
    return report.main([str(tally), "--json", str(tmp_path / "report.json")])


@pytest.fixture(autouse=True)
def _no_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report, "machine", dict)


def test_a_clean_long_run_passes_and_shows_armed_and_effective_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(tmp_path, [result() for _ in range(report.LONG_RUN)]) == 0
    table = capsys.readouterr().out
    assert "faults armed (schedule steps), by kind:" in table
    assert "  stream_gap (stream records trimmed)" in table
    assert "unexplained duplicates" in table


def test_an_unexplained_duplicate_fails_the_run(tmp_path: Path) -> None:
    assert run(tmp_path, [result(unexplained_duplicates=1, duplicates={"unexplained": 1})]) == 1


def test_a_fault_kind_that_never_took_effect_fails_a_long_run_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    never = result(effective={**dict.fromkeys(EFFECTIVE_UNITS, 1), "sweeper_crash": 0})
    assert run(tmp_path, [never] * report.LONG_RUN) == 1
    assert "never took effect: sweeper_crash" in capsys.readouterr().err
    short = tmp_path / "short"
    short.mkdir()
    assert run(short, [never] * (report.LONG_RUN - 1)) == 0
