"""`python -m bench` (`make bench`): every measurement in one run, one table printed, the same as JSON.

Run it as `python -m bench`, which sets the fake AWS environment before anything is imported. A full run
writes bench/results.json and renders docs/BENCHMARKS.md's tables from it (bench.render_doc), so
the doc shows exactly what was measured. `--only GROUP` measures some groups and prints them, and writes
nothing unless given `--output`. Progress goes to stderr; stdout holds the table only.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import (
    cold_start,
    cost,
    cpu_figures,
    deployment,
    duplicate_figures,
    end_to_end,
    machine,
    observability_figures,
    outage_figures,
    publish_figures,
    render_doc,
    sweeper_figures,
    write_path_figures,
)
from bench.figures import Figure, Group, render_table
from bench.options import NAIVE, OURS, PIPES

RESULTS = Path(__file__).resolve().parent / "results.json"
MEASURED_BY = "make bench"


def measurements(arguments: argparse.Namespace) -> dict[str, Callable[[], list[Group]]]:
    return {
        "publishing": publish_figures.measure,
        "duplicates": duplicate_figures.measure,
        "write_path": write_path_figures.measure,
        "sweeper": sweeper_figures.measure,
        "outage": outage_figures.measure,
        "cpu": cpu_figures.measure,
        "observability": observability_figures.measure,
        "cold_start": lambda: cold_start.measure(arguments.cold_start_rounds),
        "end_to_end": lambda: end_to_end.measure(arguments.local_load_orders),
    }


GROUP_NAMES = (
    "publishing",
    "duplicates",
    "write_path",
    "sweeper",
    "outage",
    "cpu",
    "observability",
    "cold_start",
    "end_to_end",
)
COSTED_BY = frozenset({"publishing", "write_path", "sweeper", "cpu", "observability"})
"""The groups the cost figures are computed from."""


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _parser().parse_args(argv)
    selected = arguments.only or [
        name for name in GROUP_NAMES if not (name == "end_to_end" and arguments.skip_local_load)
    ]
    started, clock = datetime.now(UTC), time.monotonic()
    machine_before = machine.describe()
    groups: list[Group] = []
    for name in selected:
        _progress(f"measuring {name}...")
        step = time.monotonic()
        measured = measurements(arguments)[name]()
        _progress(f"  {name}: {time.monotonic() - step:.0f} s")
        for group in measured:
            if not group.figures:  # the table would show its title alone: say why here
                _progress(f"  {group.key}: nothing measured: {' '.join(group.notes)}")
        groups.extend(measured)
    grouped = [group.to_json() for group in groups]
    results: dict[str, Any] = {
        "measured_by": MEASURED_BY
        if arguments.only is None
        else f"python -m bench --only {' '.join(selected)}",
        "started_at": started.isoformat(timespec="seconds"),
        "duration_s": round(time.monotonic() - clock),
        "machine": machine_before | {"load_average_after": machine.describe()["load_average"]},
        "groups": grouped,
    }
    if set(selected) >= COSTED_BY:
        results["cost"] = cost.compute(grouped, deployment.deployed())
        results["groups"].append(_cost_group(results["cost"]).to_json())
    print(render_table(results["groups"]))
    output = arguments.output or (RESULTS if arguments.only is None else None)
    if output is not None:
        output.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
        _progress(f"wrote {output}")
    if output == RESULTS and not arguments.no_doc:
        # From the file just written, not from memory: the doc shows what the JSON holds.
        render_doc.write(json.loads(RESULTS.read_text(encoding="utf-8")))
        _progress(f"rendered {render_doc.DOC}")
    return 0


def _cost_group(computed: dict[str, Any]) -> Group:
    source = (
        f"measured counts x AWS list prices ({computed['region']}, checked {computed['prices_checked_on']}); "
        "Lambda duration from wall time (bench.latency)"
    )
    figures = []
    for row in computed["summary"]:
        scenario, label = row["scenario"].removeprefix("publish."), row["label"]
        for name, key in ((NAIVE, "vs_naive"), (PIPES, "vs_pipes")):
            figures.append(
                Figure(
                    f"cost.{key}.{scenario}",
                    f"ours against {name}: {label}",
                    "USD/million events",
                    row[OURS],
                    row[name],
                    target=row[name],
                    decimals=3,
                    source=source,
                )
            )
    fixed = computed["fixed_per_month"]
    figures.append(
        Figure(
            "cost.fixed_per_month",
            "fixed monthly cost, whatever the traffic (metrics, alarms, dashboard, idle sweeper)",
            "USD/month",
            fixed[OURS]["total_usd"],
            fixed[NAIVE]["total_usd"],
            decimals=2,
            source=source,
        )
    )
    return Group(
        "cost",
        "Cost per million events, USD (docs/BENCHMARKS.md shows every line)",
        "the alternative named on the row",
        figures,
        notes=[
            "Issue 29's target: ours below both the naive publisher and EventBridge Pipes on every "
            "interleave. "
            "Every line, with its arithmetic, is in the cost section.",
        ],
        command=MEASURED_BY,
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", choices=GROUP_NAMES, help="measure these groups only")
    parser.add_argument("--output", type=Path, help=f"write the JSON here (a full run: {RESULTS.name})")
    parser.add_argument("--no-doc", action="store_true", help="do not render docs/BENCHMARKS.md")
    parser.add_argument("--skip-local-load", action="store_true", help="leave bench.local_load out")
    parser.add_argument(
        "--local-load-orders", type=int, default=10_000, help="orders bench.local_load places"
    )
    parser.add_argument("--cold-start-rounds", type=int, default=5, help="fresh interpreters per target")
    return parser


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
