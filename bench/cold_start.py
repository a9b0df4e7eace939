"""Import and first-invoke wiring time of each handler, beside `import boto3`, each in a fresh process.

Every sample is a new interpreter (`python -m bench.cold_start_probe TARGET`, bench.cold_start_probe) with an
environment like the function's in the template: its configuration variables, fake credentials, and Lambda's
markers, so Powertools' tracer is on as deployed (`Tracing: Active`). The same runs without those markers
(tracer off) are in each figure's detail. Targets are taken in turns, round after round, so a burst of load
on the machine spreads over all of them; each figure is the median of its rounds, in wall-clock ms (a cold
start is billed and felt as wall time). This machine is shared and the interpreter is CPython 3.11 on x86,
not Lambda's 3.13 on Graviton: the milliseconds are indicative.

When `valgrind` is on PATH, each figure's detail also holds the instructions its stages execute (the probe
under cachegrind, stopped after `start`, `import` and `wired`): a count the machine's load does not move,
for comparing two versions of the code.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile

from bench import valgrind
from bench.environment import CHILD_PYTHONPATH, FAKE_AWS, REGION, ROOT
from bench.figures import Figure, Group

ROUNDS = 5
HANDLERS = {
    "publisher": "publisher",
    "sweeper": "sweeper",
    "orders_api": "Orders API",
    "inbox_consumer": "inbox consumer",
}
"""Handler modules: bench.cold_start_probe.TARGETS."""
_ACCOUNT = "123456789012"
_OUTBOX = {
    "OUTBOX_TABLE_NAME": "outbox",
    "TOPIC_ARN": f"arn:aws:sns:{REGION}:{_ACCOUNT}:outbox-events",
    "EVENT_BUS_NAME": "outbox-bus",
    "EVENT_SOURCE": "outbox.orders",
    "POISON_QUEUE_URL": f"https://sqs.{REGION}.amazonaws.com/{_ACCOUNT}/outbox-poison",
}
CONFIGURATION = {
    "boto3": {},
    "publisher": _OUTBOX | {"POWERTOOLS_SERVICE_NAME": "outbox-publisher"},
    "sweeper": _OUTBOX | {"POWERTOOLS_SERVICE_NAME": "outbox-sweeper"},
    "orders_api": {
        "ORDERS_TABLE_NAME": "orders",
        "OUTBOX_TABLE_NAME": "outbox",
        "POWERTOOLS_SERVICE_NAME": "orders-api",
    },
    "inbox_consumer": {
        "INBOX_TABLE_NAME": "order-summary",
        "INBOX_CONSUMER": "order-summary",
        "INBOX_DEAD_LETTER_QUEUE_URL": f"https://sqs.{REGION}.amazonaws.com/{_ACCOUNT}/order-summary-dlq",
        "POWERTOOLS_SERVICE_NAME": "order-summary",
    },
}
COMMAND = "python -m bench --only cold_start"


def environment(target: str, *, traced: bool, task_root: str) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": CHILD_PYTHONPATH,
        "AWS_REGION": REGION,
        "POWERTOOLS_METRICS_NAMESPACE": "Outbox",
        "POWERTOOLS_LOG_LEVEL": "INFO",
        **FAKE_AWS,
        **CONFIGURATION[target],
    }
    if traced:
        # What makes Powertools' tracer (and the X-Ray SDK) believe it runs on Lambda.
        env |= {
            "LAMBDA_TASK_ROOT": task_root,
            "AWS_LAMBDA_FUNCTION_NAME": f"bench-{target}",
            "AWS_EXECUTION_ENV": "AWS_Lambda_python3.13",
        }
    else:
        env["POWERTOOLS_TRACE_DISABLED"] = "true"
    return env


def probe(target: str, *, traced: bool, task_root: str) -> dict[str, float]:
    done = subprocess.run(  # noqa: S603 - this interpreter, our own probe
        [sys.executable, "-m", "bench.cold_start_probe", target],
        env=environment(target, traced=traced, task_root=task_root),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"cold-start probe of {target} failed:\n{done.stderr}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def instructions(target: str, stage: str, *, task_root: str) -> int:
    """Instructions one probe executes up to the end of `stage` (tracer on), counted by valgrind."""
    return valgrind.instructions(
        [sys.executable, "-m", "bench.cold_start_probe", target, stage],
        env=environment(target, traced=True, task_root=task_root),
        cwd=ROOT,
        what=f"cold-start probe of {target} ({stage})",
    )


def count_instructions(task_root: str) -> dict[str, dict[str, int]]:
    """Per target, the instructions of its import and of its import + wiring (the `start` stage taken off)."""
    counts = {}
    for target in CONFIGURATION:
        stages = ("start", "import") if target == "boto3" else ("start", "import", "wired")
        ran = {stage: instructions(target, stage, task_root=task_root) for stage in stages}
        counts[target] = {stage: ran[stage] - ran["start"] for stage in stages if stage != "start"} | {
            f"{stage}_run": count for stage, count in ran.items()
        }
    return counts


def measure(rounds: int = ROUNDS) -> list[Group]:
    samples: dict[tuple[str, bool], list[dict[str, float]]] = {}
    counted = valgrind.available()
    with tempfile.TemporaryDirectory(prefix="bench-task-root-") as task_root:
        for _ in range(rounds):
            for traced in (True, False):
                for target in CONFIGURATION:
                    samples.setdefault((target, traced), []).append(
                        probe(target, traced=traced, task_root=task_root)
                    )
        # After the timed rounds: every module the probes import is compiled by now, in each count alike.
        counts = count_instructions(task_root) if counted else {}

    def median(target: str, traced: bool, field: str) -> float:
        return statistics.median(sample[field] for sample in samples[(target, traced)])

    boto3_ms = median("boto3", True, "import_ms")
    source = f"perf_counter in a fresh interpreter, median of {rounds}"
    figures = []
    for target, label in HANDLERS.items():
        for field, stage, what in (
            ("import_ms", "import", "import"),
            ("import_and_wiring_ms", "wired", "import + first-invoke wiring"),
        ):
            detail: dict[str, object] = {
                "traced_ms": [round(sample[field], 1) for sample in samples[(target, True)]],
                "untraced_median_ms": median(target, False, field),
                "untraced_import_boto3_median_ms": median("boto3", False, "import_ms"),
                "import_boto3_ms": [round(s["import_ms"], 1) for s in samples[("boto3", True)]],
            }
            if counted:
                detail["instructions"] = counts[target][stage]
                detail["import_boto3_instructions"] = counts["boto3"]["import"]
            figures.append(
                Figure(
                    f"cold_start.{stage}.{target}",
                    f"{label}: {what}",
                    "ms",
                    median(target, True, field),
                    boto3_ms,
                    decimals=0,
                    source=source,
                    detail=detail,
                )
            )
    return [
        Group(
            "cold_start",
            "Cold start: handler import and first-invoke wiring",
            "`import boto3` in a fresh interpreter",
            figures,
            notes=[
                "Handlers: outbox_publisher.handler, outbox_sweeper.handler, orders_api.handler, "
                "order_consumers.summary_handler. Tracer on, as deployed (Tracing: Active). Wiring: the "
                "handler's first-invoke build (configuration, boto3 clients, adapters), with no AWS call. "
                "Wall clock on a shared machine: indicative (the run's load average is under \"The "
                "machine and the run\"); with valgrind on PATH, each figure's detail holds its "
                "instructions executed, which the load does not move.",
            ],
            command=COMMAND,
        )
    ]
