"""`make reliability`'s report: it fails on an unexplained duplicate, and, in a long run, on a fault kind that
never took effect; it shows what single-destination outages cost the destination that stayed up."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.reliability import report
from tests.reliability.invariants import CAUSE_CRASH, CAUSE_ROW_UPDATE
from tests.reliability.kinds import EFFECTIVE_UNITS, REGION_UNITS


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
        "outages": [],
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


def outage(
    destination: str, seconds: float, events: int, per_event: dict[str, int], **causes: int
) -> dict[str, Any]:
    """One schedule's figures for one outage, as tests.reliability.schedules.outage_figures writes them."""
    return {
        "kind": f"{destination}_outage",
        "destination": destination,
        "healthy": "eventbridge" if destination == "sns" else "sns",
        "seconds": seconds,
        "took_effect": True,
        "events": events,
        "extra_copies": sum(per_event.values()),
        "most_per_event": max(per_event.values(), default=0),
        "causes": causes,
    }


def test_the_extra_copies_of_single_destination_outages_are_added_up_per_destination(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given two SNS outages (60 s: 10 events, one of them copied once more on the bus after a crash; 300 s:
    # 5 events, one copied twice after DynamoDB failed) and an EventBridge outage that cost nothing
    results = [
        result(outages=[outage("sns", 60.0, 10, {"e-1": 1}, **{CAUSE_CRASH: 1})]),
        result(outages=[outage("sns", 300.0, 5, {"e-2": 2}, **{CAUSE_ROW_UPDATE: 2})]),
        result(outages=[outage("eventbridge", 60.0, 4, {})]),
    ]
    # When the report adds them up
    assert run(tmp_path, results) == 0
    figures = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))["outages"]
    # Then each destination's outages are summed on their own, with the extra copies by cause and per event
    sns = figures["sns"]
    assert (sns["healthy"], sns["outages"], sns["events"], sns["extra_copies"]) == ("eventbridge", 2, 15, 3)
    assert sns["extra_copies_by_cause"][CAUSE_CRASH] == 1
    assert sns["extra_copies_by_cause"][CAUSE_ROW_UPDATE] == 2
    assert sns["extra_copies_per_event"] == 0.2
    assert (sns["most_per_event"], sns["most_per_event_in_target_outages"]) == (2, 1)
    assert (figures["eventbridge"]["extra_copies"], figures["eventbridge"]["most_per_event"]) == (0, 0)
    # And the table shows them
    table = capsys.readouterr().out
    assert "  sns down -> eventbridge up:" in table
    assert "  eventbridge down -> sns up:" in table


def region_result(**changes: Any) -> dict[str, Any]:
    figures = dict.fromkeys(report.REGION_FIGURES, 1)
    base = {
        "suite": report.REGIONS_SUITE,
        "armed": dict.fromkeys(REGION_UNITS, 1),
        "effective": dict.fromkeys(REGION_UNITS, 1),
        "regions": {"us-east-1": figures, "us-west-2": {**figures, "taken_over": 3}},
        "diverged": 0,
    }
    return result(**{**base, **changes})


def test_a_two_region_run_shows_its_figures_per_region(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A long run of two-region schedules alone: the single-region kinds are not asked to take effect
    assert run(tmp_path, [region_result() for _ in range(report.LONG_RUN)]) == 0
    table = capsys.readouterr().out
    assert f"two regions ({report.LONG_RUN} schedules" in table
    taken = next(line for line in table.splitlines() if "another region's events it published" in line)
    assert taken.split()[-2:] == [str(report.LONG_RUN), str(3 * report.LONG_RUN)]
    assert "  region_loss (origins taken over)" in table


def test_replicas_that_differ_after_the_drain_fail_the_run(tmp_path: Path) -> None:
    assert run(tmp_path, [region_result(diverged=1)]) == 1


def test_a_region_kind_that_never_took_effect_fails_a_long_run(tmp_path: Path) -> None:
    idle = region_result(effective={**dict.fromkeys(REGION_UNITS, 1), "replication_lag": 0})
    assert run(tmp_path, [result() for _ in range(report.LONG_RUN)] + [idle]) == 1
