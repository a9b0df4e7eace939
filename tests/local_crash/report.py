"""`make local-crash`'s table, from the figures the kill proof wrote:

    python -m tests.local_crash.report build/local-crash/report.json --min-kills 20

Exits 1 when a promise broke, when the run made fewer kills than asked for, or when the report is missing
(the test failed before it could write one).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tests.local_crash.promise import broken


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.local_crash.report")
    parser.add_argument("report", type=Path)
    parser.add_argument("--min-kills", type=int, default=1)
    arguments = parser.parse_args(argv)
    if not arguments.report.exists():
        print(f"no report at {arguments.report}: the kill proof did not finish", file=sys.stderr)
        return 1
    figures = json.loads(arguments.report.read_text(encoding="utf-8"))
    rows = [
        ("profile / seed", f"{figures['profile']} / {figures['seed']}"),
        ("SIGKILLs (restarts that restored)", f"{figures['kills']} ({figures['restored_starts']})"),
        (
            "acknowledged orders / events",
            f"{figures['acknowledged_orders']} / {figures['acknowledged_events']}",
        ),
        ("orders the final runtime holds", figures["orders_held"]),
        (
            "requests cut off by a kill / refused",
            f"{figures['requests_failed']} / {figures['requests_refused']}",
        ),
        *(
            (f"delivered on the {name} queue (copies)", f"{n} ({figures['copies'][name]})")
            for name, n in figures["delivered"].items()
        ),
        *((f"duplicates on the {name} queue", n) for name, n in figures["duplicates"].items()),
        *((f"lost on the {name} queue", n) for name, n in figures["lost"].items()),
        ("acknowledged orders not held", figures["not_held"]),
        ("invented", figures["invented"]),
        *((f"out of order on the {name} queue", n) for name, n in figures["out_of_order"].items()),
        (
            "start to ready: first / slowest restart (s)",
            f"{figures['start_s']['first']} / {figures['start_s']['restarts_max']}",
        ),
        ("last runtime's saving", figures["last_stop"]),
        ("wall time (s)", figures["wall_s"]),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"  {name:<{width}}  {value}")
    problems = broken(figures)
    if figures["kills"] < arguments.min_kills:
        problems.append(f"{figures['kills']} kills, fewer than the {arguments.min_kills} asked for")
    for problem in problems:
        print(f"BROKEN: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
