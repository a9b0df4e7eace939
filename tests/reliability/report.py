"""`make reliability`'s table: what every random schedule did, added up from the tally files.

    python -m tests.reliability.report build/reliability/tally --json build/reliability/report.json \
        --min-schedules 1000

Prints one table (schedules, commands, events, faults armed by kind, faults that took effect by kind,
lost, invented, out of order, duplicate effects, unexplained duplicates, replicas that differ after the
drain, duplicates on the wire by cause, what single-destination outages cost the destination that stayed
up, the two-region schedules' figures per region, the longest time from faults cleared to drained, the
seed) and writes the same figures as JSON. Exits 1 when any promise broke, a schedule did
not drain, fewer schedules ran than asked for, or (in a run of `LONG_RUN` schedules or more) a fault kind
of the suites that ran never took effect.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.reliability.invariants import CAUSES
from tests.reliability.kinds import ALL_UNITS, EFFECTIVE_UNITS, REGION_UNITS
from tests.reliability.profiles import profile

FAULT_KINDS = tuple(ALL_UNITS)
REGIONS_SUITE = "regions"
"""A result's `suite` when a two-region schedule made it (tests.reliability.region_schedules)."""
REGION_FIGURES = ("published", "taken_over", "takeovers", "late_replicas", "duplicates_avoided", "duplicates")
REGION_FIGURE_NAMES = {
    "published": "events published (first copy, topic)",
    "taken_over": "another region's events it published",
    "takeovers": "takeovers it began",
    "late_replicas": "late replicas it marked FAILED",
    "duplicates_avoided": "taken-over rows settled unpublished",
    "duplicates": "copies it sent (either destination)",
}

VIOLATIONS = ("lost", "invented", "out_of_order", "duplicate_effects", "unexplained_duplicates", "diverged")
DESTINATIONS = ("sns", "eventbridge")
TARGET_OUTAGE_S = 60.0
"""The outage length the issue sets its target for (at most 1 extra copy of an event on the other
destination): its figure is shown on its own."""
LONG_RUN = 100
"""From this many schedules, every fault kind must have taken effect at least once."""


def machine() -> dict[str, Any]:
    """The machine, as the benchmark records it (bench/machine.py)."""
    from bench.machine import describe

    described: dict[str, Any] = describe()
    return described


def summarize(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    armed: Counter[str] = Counter(dict.fromkeys(FAULT_KINDS, 0))
    effective: Counter[str] = Counter(dict.fromkeys(FAULT_KINDS, 0))
    duplicates: Counter[str] = Counter(dict.fromkeys(CAUSES, 0))
    for result in results:
        armed.update(result["armed"])
        effective.update(result["effective"])
        duplicates.update(result["duplicates"])
    longest = max(results, key=lambda r: r["clear_to_drained_s"], default=None)
    two = [r for r in results if r.get("suite") == REGIONS_SUITE]
    kinds = [
        *(EFFECTIVE_UNITS if len(two) < len(results) else ()),
        *(REGION_UNITS if two else ()),
    ]
    failing = [r for r in results if not r["drained"] or any(r.get(name, 0) for name in VIOLATIONS)]
    return {
        "schedules": len(results),
        "commands": sum(r["commands"] for r in results),
        "commands_failed": sum(r["commands_failed"] for r in results),
        "events": sum(r["events"] for r in results),
        "faults_armed": {kind: armed[kind] for kind in sorted(kinds)},
        # The suites' kinds, and what the operator did (not fault kinds: no unit).
        "faults_effective": {
            kind: effective[kind] for kind in sorted({*kinds, *(k for k in effective if k not in ALL_UNITS)})
        },
        "never_effective": sorted(kind for kind in kinds if not effective[kind]),
        **{name: sum(r.get(name, 0) for r in results) for name in VIOLATIONS},
        "not_drained": sum(1 for r in results if not r["drained"]),
        "duplicates_on_the_wire": dict(duplicates),
        "outages": _outages(results) if len(two) < len(results) else {},
        "regions": _regions(two),
        "longest_clear_to_drained_s": longest["clear_to_drained_s"] if longest else 0.0,
        "seed": profile().seed,
        "failing_schedules": [r["schedule"] for r in failing][:20],
    }


def _outages(results: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per destination that was down: its outages (armed, took effect), the events they touched (the downed
    destination refused them, or the other one first got them, during the outage), the extra copies of those
    on the other destination (by cause), the mean and most per event, and the most per event in the outages
    of `TARGET_OUTAGE_S`."""
    figures: dict[str, dict[str, Any]] = {}
    for destination in DESTINATIONS:
        outages = [o for r in results for o in r.get("outages", []) if o["destination"] == destination]
        causes: Counter[str] = Counter(dict.fromkeys(CAUSES, 0))
        for outage in outages:
            causes.update(outage["causes"])
        events = sum(o["events"] for o in outages)
        extra = sum(o["extra_copies"] for o in outages)
        figures[destination] = {
            "healthy": next(d for d in DESTINATIONS if d != destination),
            "outages": len(outages),
            "took_effect": sum(1 for o in outages if o["took_effect"]),
            "events": events,
            "extra_copies": extra,
            "extra_copies_by_cause": dict(causes),
            "extra_copies_per_event": round(extra / events, 4) if events else 0.0,
            "most_per_event": max((o["most_per_event"] for o in outages), default=0),
            "most_per_event_in_target_outages": max(
                (o["most_per_event"] for o in outages if o["seconds"] == TARGET_OUTAGE_S), default=0
            ),
        }
    return figures


def _regions(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The two-region schedules' figures, per region (tests.reliability.regions.TwoRegions.figures)."""
    per_region: dict[str, Counter[str]] = {}
    for result in results:
        for region, figures in result.get("regions", {}).items():
            per_region.setdefault(region, Counter(dict.fromkeys(REGION_FIGURES, 0))).update(figures)
    return {
        "schedules": len(results),
        "events": sum(r["events"] for r in results),
        "taker_crashes": sum(r.get("taker_crashes", 0) for r in results),
        "per_region": {region: dict(figures) for region, figures in sorted(per_region.items())},
    }


def _render_regions(regions: dict[str, Any]) -> list[str]:
    if not regions["schedules"]:
        return []
    names = list(regions["per_region"])
    lines = [
        f"two regions ({regions['schedules']} schedules, {regions['events']} events, "
        f"{regions['taker_crashes']} taker sweepers crashed mid-takeover), per region:",
        f"  {'':<50}" + "".join(f"{name:>12}" for name in names),
    ]
    for figure in REGION_FIGURES:
        lines.append(
            f"  {REGION_FIGURE_NAMES[figure]:<50}"
            + "".join(f"{regions['per_region'][name][figure]:>12}" for name in names)
        )
    return lines


def _render_outages(outages: dict[str, dict[str, Any]]) -> list[str]:
    if not outages:
        return []
    lines = ["single-destination outages (extra copies on the destination that stayed up):"]
    for destination, figures in outages.items():
        healthy = figures["healthy"]
        affected = f"events touched (refused, or sent to {healthy})"
        lines += [
            f"  {destination} down -> {healthy} up:",
            f"    {'outages armed (took effect)':<48}{figures['outages']:>10} ({figures['took_effect']})",
            f"    {affected:<48}{figures['events']:>10}",
            f"    {'extra copies on ' + healthy:<48}{figures['extra_copies']:>10}",
            *(f"      {cause:<46}{count:>10}" for cause, count in figures["extra_copies_by_cause"].items()),
            f"    {'extra copies per event (mean)':<48}{figures['extra_copies_per_event']:>10}",
            f"    {'most extra copies of one event':<48}{figures['most_per_event']:>10}",
            f"    {f'most of one event, {TARGET_OUTAGE_S:.0f} s outages':<48}"
            f"{figures['most_per_event_in_target_outages']:>10}",
        ]
    return lines


def render(summary: dict[str, Any]) -> str:
    lines = [
        f"{'schedules':<52}{summary['schedules']:>10}",
        f"{'commands (failed at the client)':<52}{summary['commands']:>10} ({summary['commands_failed']})",
        f"{'events (outbox rows)':<52}{summary['events']:>10}",
        "faults armed (schedule steps), by kind:",
        *(f"  {kind:<50}{count:>10}" for kind, count in summary["faults_armed"].items()),
        "faults that took effect, by kind:",
        *(
            f"  {kind + ' (' + ALL_UNITS.get(kind, 'done') + ')':<50}{count:>10}"
            for kind, count in summary["faults_effective"].items()
        ),
        *(f"{name.replace('_', ' '):<52}{summary[name]:>10}" for name in (*VIOLATIONS, "not_drained")),
        "duplicates on the wire, by cause:",
        *(f"  {cause:<50}{count:>10}" for cause, count in summary["duplicates_on_the_wire"].items()),
        *_render_outages(summary["outages"]),
        *_render_regions(summary["regions"]),
        f"{'longest faults-cleared -> drained (virtual s)':<52}{summary['longest_clear_to_drained_s']:>10}",
        f"{'seed':<52}{summary['seed']:>10}",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tally", type=Path)
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--min-schedules", type=int, default=0)
    parser.add_argument("--wall-seconds", type=float, default=None)
    arguments = parser.parse_args(argv)
    results = [
        json.loads(line)
        for path in sorted(arguments.tally.glob("*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    summary = summarize(results)
    summary["machine"] = machine()
    if arguments.wall_seconds is not None:
        summary["wall_seconds"] = round(arguments.wall_seconds, 1)
    print(render(summary))
    arguments.json.parent.mkdir(parents=True, exist_ok=True)
    arguments.json.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    broken = any(summary[name] for name in (*VIOLATIONS, "not_drained"))
    if summary["schedules"] >= LONG_RUN and summary["never_effective"]:
        print(f"fault kinds that never took effect: {', '.join(summary['never_effective'])}", file=sys.stderr)
        broken = True
    if summary["schedules"] < arguments.min_schedules:
        print(
            f"only {summary['schedules']} schedules ran, fewer than {arguments.min_schedules}",
            file=sys.stderr,
        )
        return 1
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
