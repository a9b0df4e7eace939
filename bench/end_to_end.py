"""End to end through the local runtime: bench.local_load (its own module and owner), run as its own process.

`python -m bench.local_load --orders N --json FILE` starts `outbox local up` on the synthesized template,
places orders over HTTP at a fixed rate and watches the subscriber queues; its JSON report gives the figures
here (orders/s, commit -> delivery p50/p99 per queue, peak memory). It exits 1 when one of its own targets
(issue 12's) is missed: that is still a measurement, and is reported, not treated as a failure. If the module
is not there, or the run produced no report, the group says so and holds no figure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.environment import CHILD_PYTHONPATH, ROOT
from bench.figures import Figure, Group

LOCAL_LOAD = ROOT / "bench" / "local_load.py"
ORDERS = 10_000
TIMEOUT_S = 1800
COMMAND = "python -m bench.local_load --orders 10000"
TITLE = "End to end through the local runtime (bench.local_load)"
SOURCE = "bench.local_load's JSON report (outbox local up, HTTP load, queues watched)"


def measure(orders: int = ORDERS) -> list[Group]:
    if not LOCAL_LOAD.exists():
        return [_unmeasured("bench/local_load.py is not there yet: nothing measured end to end.")]
    with tempfile.TemporaryDirectory(prefix="bench-local-load-") as directory:
        report_path = Path(directory) / "local_load.json"
        done = subprocess.run(  # noqa: S603 - this interpreter, the repository's own module
            [sys.executable, "-m", "bench.local_load", "--orders", str(orders), "--json", str(report_path)],
            cwd=ROOT,
            env=os.environ | {"PYTHONPATH": CHILD_PYTHONPATH},
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )
        if not report_path.exists():
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
            return [_unmeasured(f"bench.local_load exited {done.returncode} without a report:\n{tail}")]
        report: dict[str, Any] = json.loads(report_path.read_text(encoding="utf-8"))
    return [_group(report, orders, done.returncode)]


def _group(report: dict[str, Any], orders: int, exit_code: int) -> Group:
    delivery, memory = report["delivery"], report["memory"]
    figures = [
        Figure(
            "e2e.orders_per_s",
            f"sustained orders/s on both queues ({orders:,} orders)",
            "orders/s",
            delivery["sustained_orders_per_s"],
            decimals=1,
            source=SOURCE,
            detail={"configuration": report["configuration"], "api": report["api"]},
        )
    ]
    for queue in ("topic", "bus"):
        for percentile in ("p50", "p99"):
            figures.append(
                Figure(
                    f"e2e.{queue}.{percentile}",
                    f"commit -> {queue} queue, {percentile}",
                    "ms",
                    delivery[queue][f"{percentile}_ms"],
                    decimals=0,
                    source=SOURCE,
                    detail={key: value for key, value in delivery[queue].items() if not key.endswith("_ms")},
                )
            )
    figures.append(
        Figure(
            "e2e.peak_memory",
            f"peak memory, runtime + workers ({memory['peak_processes']} processes)",
            "MB",
            memory["peak_rss_bytes"] / 1e6,
            decimals=0,
            source=SOURCE,
        )
    )
    met = {name: target["met"] for name, target in report["targets"].items()}
    return Group(
        "end_to_end",
        TITLE,
        "-",
        figures,
        notes=[
            "The local runtime on moto, on this shared machine: not a measurement of AWS. bench.local_load "
            f"judges its own targets (issue 12): {', '.join(f'{k} {v}' for k, v in met.items())} "
            f"(exit {exit_code}).",
        ],
        command=COMMAND,
    )


def _unmeasured(why: str) -> Group:
    return Group("end_to_end", TITLE, "-", [], notes=[why], command=COMMAND)
