"""Renders docs/BENCHMARKS.md's generated sections from bench/results.json, so the doc cannot drift from the
measurement: `python -m bench.render_doc` (a full `make bench` run does it too).

Each generated section sits between `<!-- bench:begin NAME -->` and `<!-- bench:end NAME -->`; everything
outside them is prose, written by hand, which names figures by key and states no measured number.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bench import payload_sizes
from bench.figures import floor_text, number, ratio_text
from bench.prices import dollars

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "BENCHMARKS.md"
RESULTS = ROOT / "bench" / "results.json"
Results = Mapping[str, Any]


def machine_section(results: Results) -> str:
    machine = results["machine"]
    packages = ", ".join(f"{name} {version}" for name, version in machine["packages"].items())
    load = ", ".join(f"{value:.2f}" for value in machine["load_average"])
    after = ", ".join(f"{value:.2f}" for value in machine.get("load_average_after", []))
    return "\n".join(
        [
            f"- measured by `{results['measured_by']}`, started {results['started_at']}, "
            f"{results['duration_s']} s",
            f"- CPU: {machine['cpu_model']}, {machine['cores']} cores, {machine['memory_gb']} GB",
            f"- {machine['python']} on {machine['platform']}",
            f"- load average (1, 5, 15 min) before: {load}; after: {after}",
            f"- {packages}",
        ]
    )


def figures_section(results: Results) -> str:
    parts: list[str] = []
    for group in results["groups"]:
        parts.append(f"### {group['title']}\n")
        parts.append(f"Baseline: {group['baseline']}. Reproduce: `{group['command']}`.\n")
        if group["figures"]:
            parts.append(
                "| key | figure | unit | ours | baseline | floor (target) | ratio | target met "
                "| measured with |"
            )
            parts.append("|---|---|---|---:|---:|---:|---:|:---:|---|")
            for figure in group["figures"]:
                parts.append(_figure_row(figure))
            parts.append("")
        parts.extend(f"- {_one_line(note)}" for note in group["notes"])
        parts.append("")
    return "\n".join(parts).rstrip()


def misses_section(results: Results) -> str:
    missed = [f for group in results["groups"] for f in group["figures"] if f["meets_target"] is False]
    if not missed:
        return "Every figure with a target meets it."
    rows = ["| key | figure | ours | target |", "|---|---|---:|---:|"]
    for figure in missed:
        decimals = figure["decimals"]
        rows.append(
            f"| `{figure['key']}` | {figure['label']} | {number(figure['ours'], decimals)} {figure['unit']} "
            f"| <= {number(figure['target'], decimals)} |"
        )
    return "\n".join(rows)


def cost_section(results: Results) -> str:
    cost = results.get("cost")
    if cost is None:
        return (
            "Not computed in this run (it needs the publishing, write_path, sweeper, cpu and observability "
            "groups)."
        )
    deployment = cost["deployment"]
    parts = [
        f"Prices: {cost['region']}, list prices checked {cost['prices_checked_on']} (bench/prices.py); "
        f"publisher memory {deployment['publisher_memory_mb']} MB {deployment['architecture']}, batches of "
        f"{deployment['batch_size']}; sweeper {deployment['sweeper_memory_mb']} MB, "
        f"{deployment['sweeper_runs_per_month']:,} runs a month ({deployment['source']}).",
        "",
        "Every interleave, in one table (USD per million events; the lines of each follow):",
        "",
        "| interleave | ours | naive publisher | EventBridge Pipes | ours below both |",
        "|---|---:|---:|---:|:---:|",
    ]
    names = [option["name"] for option in next(iter(cost["by_scenario"].values()))["options"]]
    for row in cost["summary"]:
        amounts = " | ".join(f"{row[name]:.3f}" for name in names)
        parts.append(
            f"| `{row['scenario']}` {row['label']} | {amounts} | {'yes' if row['below_both'] else '**no**'} |"
        )
    parts += [
        "",
        "Waits assumed per AWS call (bench/latency.py), added to the CPU time in Lambda's duration:",
        "",
    ]
    parts += ["| call | ms | why | source |", "|---|---:|---|---|"]
    for name, call in cost["latency"].items():
        parts.append(f"| `{name}` | {call['ms']:g} | {_one_line(call['why'])} | {call['source']} |")
    for key, scenario in cost["by_scenario"].items():
        parts += ["", f"#### `{key}`: {scenario['label']}", ""]
        parts += _scenario_table(scenario["options"])
    parts += ["", "#### Fixed monthly cost, whatever the traffic", ""]
    for name, fixed in cost["fixed_per_month"].items():
        parts.append(f"**{name}**: ${fixed['total_usd']:.2f} per month\n")
        if fixed["lines"]:
            parts += ["| item | arithmetic | from |", "|---|---|---|"]
            parts += [
                f"| {line['item']} | {line['arithmetic']} | {_one_line(line['how'])} |"
                for line in fixed["lines"]
            ]
            parts.append("")
        parts += [f"- not counted: {_one_line(item)}" for item in fixed["not_counted"]]
        parts.append("")
    parts += ["| price | USD | per | unit | source | checked against |", "|---|---:|---:|---|---|---|"]
    for name, price in cost["prices"].items():
        checked = "; ".join(price["checked_against"])
        parts.append(
            f"| `{name}` | {dollars(price['usd'])} | {price['per']:,} | {price['unit']} | {price['source']} "
            f"| {checked} |"
        )
    return "\n".join(parts).rstrip()


def _scenario_table(options: Sequence[Mapping[str, Any]]) -> list[str]:
    """One row per item, one column per option, each cell the line's arithmetic and where it comes from."""
    items: list[str] = []
    for option in options:
        items += [line["item"] for line in option["lines"] if line["item"] not in items]
    rows = ["| item | " + " | ".join(option["name"] for option in options) + " |"]
    rows.append("|---|" + "---|" * len(options))
    for item in items:
        cells = []
        for option in options:
            line = next((line for line in option["lines"] if line["item"] == item), None)
            cells.append("-" if line is None else _one_line(f"{line['arithmetic']} ({line['how']})"))
        rows.append(f"| {item} | " + " | ".join(cells) + " |")
    totals = " | ".join(f"**${option['total_usd_per_million_events']:.3f}**" for option in options)
    rows.append(f"| **total** | {totals} |")
    rows.append("")
    for option in options:
        rows += [f"- not counted ({option['name']}): {_one_line(item)}" for item in option["not_counted"]]
    return rows


SECTIONS: dict[str, Callable[[Results], str]] = {
    "machine": machine_section,
    "figures": figures_section,
    "misses": misses_section,
    "cost": cost_section,
    # Priced from bench.prices, not measured: the same on every run.
    "payload_sizes": lambda _results: payload_sizes.table(),
}


def render(doc: str, results: Results) -> str:
    for name, section in SECTIONS.items():
        found = re.search(rf"(<!-- bench:begin {name} -->).*?(<!-- bench:end {name} -->)", doc, re.DOTALL)
        if found is None:
            raise ValueError(f"{DOC.name} has no '{name}' section markers")
        generated = f"{found.group(1)}\n{section(results)}\n{found.group(2)}"
        doc = doc[: found.start()] + generated + doc[found.end() :]
    return doc


def write(results: Results, doc: Path = DOC) -> None:
    doc.write_text(render(doc.read_text(encoding="utf-8"), results), encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    results_path = Path(arguments[0]) if arguments else RESULTS
    write(json.loads(results_path.read_text(encoding="utf-8")))
    return 0


def _figure_row(figure: Mapping[str, Any]) -> str:
    decimals = figure["decimals"]
    met = {True: "yes", False: "**no**", None: ""}[figure["meets_target"]]
    return (
        f"| `{figure['key']}` | {figure['label']} | {figure['unit']} | {number(figure['ours'], decimals)} "
        f"| {number(figure['baseline'], decimals)} "
        f"| {floor_text(figure['floor'], figure['target'], decimals)} "
        f"| {ratio_text(figure['ratio'])} | {met} | {_one_line(figure['source'])} |"
    )


def _one_line(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


if __name__ == "__main__":
    raise SystemExit(main())
