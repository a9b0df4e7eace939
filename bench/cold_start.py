"""Import and first-invoke wiring time of each handler, against `import boto3`, each in a fresh process.

Every sample is a new interpreter (`python -m bench.cold_start_probe TARGET`, bench.cold_start_probe) with an
environment like the function's in the template: its configuration variables, fake credentials, and Lambda's
markers, so Powertools' tracer is on as deployed (`Tracing: Active`: it imports the X-Ray SDK and patches
botocore). The same runs without those markers (tracer off) are in each figure's detail. Targets are taken in
turns, round after round, so a burst of load on the machine spreads over all of them; each figure is the
median of its rounds. Wall clock: a cold start is billed and felt as wall time. This machine is shared and
the interpreter is CPython 3.11 on x86, not Lambda's 3.13 on Graviton: compare ratios, not milliseconds.

On a shared machine five wall-clock samples are noise (`import boto3` alone has varied from 140 to 250 ms in
one run), so when `valgrind` is on PATH each target is also counted in instructions: the probe runs under
cachegrind once per stage (`start`, `import`, `wired`: bench.cold_start_probe stops after it), and the
difference between two stages is what ran between them. Instructions executed do not depend on the load; they
leave out the kernel's time (file reads, directory listings), which the wall clock keeps. The instruction
figures judge the targets; the wall-clock ones are reported beside them. Without valgrind the wall-clock
figures judge the targets, and say so.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile

from bench import targets, valgrind
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
INSTRUCTIONS_SOURCE = (
    "instructions executed (valgrind cachegrind), one run per stage in a fresh interpreter; judges the target"
)


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
    wall_source = f"perf_counter in a fresh interpreter, median of {rounds}" + (
        "; indicative (the instruction count judges the target)"
        if counted
        else "; judges the target (valgrind not on PATH: no instruction count)"
    )
    figures = []
    for target, label in HANDLERS.items():
        for field, stage, what, key, ratio in (
            ("import_ms", "import", "import", "import", targets.IMPORT_TARGET_RATIO),
            (
                "import_and_wiring_ms",
                "wired",
                "import + first-invoke wiring",
                "wired",
                targets.WIRING_TARGET_RATIO,
            ),
        ):
            if counted:
                ours, boto3_count = counts[target][stage], counts["boto3"]["import"]
                figures.append(
                    Figure(
                        f"cold_start.instructions.{key}.{target}",
                        f"{label}: {what}, instructions",
                        "M instructions",
                        ours / 1e6,
                        boto3_count / 1e6,
                        target=ratio * boto3_count / 1e6,
                        decimals=0,
                        source=INSTRUCTIONS_SOURCE,
                        detail={"instructions": counts[target], "import_boto3_instructions": counts["boto3"]},
                    )
                )
            figures.append(
                Figure(
                    f"cold_start.{key}.{target}",
                    f"{label}: {what}",
                    "ms",
                    median(target, True, field),
                    boto3_ms,
                    target=None if counted else ratio * boto3_ms,
                    decimals=0,
                    source=wall_source,
                    detail={
                        "target_ratio": ratio,
                        "traced_ms": [round(sample[field], 1) for sample in samples[(target, True)]],
                        "untraced_median_ms": median(target, False, field),
                        "untraced_import_boto3_median_ms": median("boto3", False, "import_ms"),
                        "import_boto3_ms": [round(s["import_ms"], 1) for s in samples[("boto3", True)]],
                    },
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
                "handler's first-invoke build "
                "(configuration, boto3 clients, adapters), with no AWS call. Targets: at most 1.3x (import) "
                "and 2x (import + wiring) `import boto3`, judged by instructions executed (valgrind) when "
                "valgrind is on PATH, else by wall clock. The wall-clock figures on this shared machine are "
                'indicative: the run\'s load average is under "The machine and the run".',
            ],
            command=COMMAND,
        )
    ]
