"""What the functions write to CloudWatch, and what an idle sweeper run costs in CPU: the inputs of the cost
figures' CloudWatch lines and of the fixed monthly cost (bench.cost, bench.fixed_cost).

Each function runs through its Lambda entry point, decorators included (Powertools' logger, tracer and
metrics: the summary line and the EMF metrics blob are what CloudWatch Logs ingests and what makes custom
metrics), on
real botocore clients with canned HTTP (bench.canned_http), with standard output captured. The Lambda context
carries names as long as the deployed ones (a log line holds the function's name and ARN, the request id).

- Publisher: a batch of 100 round-robin records, after a first batch (the measured invocation is a warm one);
  the naive publisher on the same batch, through its handler.
- Sweeper: an idle run (no cursor yet, an empty Scan page): its CPU (`time.process_time`, the fastest of
  several runs) and what it writes.
- Custom metrics: the distinct (namespace, dimensions, name) the EMF blobs of one invocation of each define;
  CloudWatch bills each as a custom metric per month.
"""

from __future__ import annotations

import json
import statistics
import time
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import outbox_publisher.handler as publisher_entry
import outbox_sweeper.handler as sweeper_entry
from bench.cpu_figures import (
    BUS,
    POISON_QUEUE_URL,
    SOURCE,
    TABLE,
    TOPIC_ARN,
    canned_clients,
    lambda_batch,
    naive,
    our_publisher,
)
from bench.environment import REGION, captured, quiet
from bench.figures import Figure, Group, per
from bench.scenarios import round_robin
from outbox_publisher.adapters import EventBridgeDestination, SnsDestination, SqsPoisonQueue
from outbox_publisher.dynamodb_rows import DynamoDBRowUpdater
from outbox_publisher.leases import DynamoDBRowClaimer
from outbox_publisher.predecessors import DynamoDBPredecessorReader
from outbox_publisher.routing import Destination
from outbox_sweeper.config import SweeperConfig
from outbox_sweeper.cursor import DynamoDBCursorStore
from outbox_sweeper.failed_index import DynamoDBFailedIndexer
from outbox_sweeper.handler import build_sweeper
from outbox_sweeper.scan import DynamoDBTableScan
from outbox_sweeper.sweep import Sweeper
from tests.support.lambda_context import FakeLambdaContext

COMMAND = "python -m bench --only observability"
RECORDS = 100
AGGREGATES = 10
IDLE_SAMPLES = 7
DEPLOYED_NAME = "OutboxStack-{}Function0ABCDEF1-AbCdEfGh1234"
"""A function name as CloudFormation makes them: the stack, the construct's id with its hash, a suffix."""


def context(function: str) -> FakeLambdaContext:
    name = DEPLOYED_NAME.format(function)
    return FakeLambdaContext(
        remaining_ms=600_000,
        function_name=name,
        memory_limit_in_mb=512,
        invoked_function_arn=f"arn:aws:lambda:{REGION}:123456789012:function:{name}",
        aws_request_id=str(uuid.uuid4()),
        log_group_name=f"/aws/lambda/{name}",
        log_stream_name="2026/12/01/[$LATEST]0123456789abcdef0123456789abcdef",
    )


def metrics_defined(output: bytes) -> list[str]:
    """Every custom metric the EMF blobs in `output` define: "namespace/dimension=value,.../name"."""
    found: set[str] = set()
    for line in output.decode().splitlines():
        try:
            blob = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(blob, dict) or "_aws" not in blob:
            continue
        for directive in blob["_aws"]["CloudWatchMetrics"]:
            for dimensions in directive["Dimensions"] or [[]]:
                where = ",".join(f"{name}={blob.get(name)}" for name in dimensions)
                found.update(
                    f"{directive['Namespace']}/{where}/{metric['Name']}" for metric in directive["Metrics"]
                )
    return sorted(found)


def publisher_invocation() -> bytes:
    """What our publisher's entry point writes for a warm invocation of a batch of RECORDS."""
    with _installed(publisher_entry, "_publisher", our_publisher(canned_clients(deployed=True))):
        with quiet():  # the first, cold invocation: not the one measured
            publisher_entry.handler(_batch("obs-first"), context("Publisher"))
        with captured() as output:
            publisher_entry.handler(_batch("obs"), context("Publisher"))
    return output.data


def naive_invocation() -> bytes:
    handler = naive(canned_clients(deployed=False))
    with quiet():
        handler(_batch("obs-first"))
    with captured() as output:
        handler(_batch("obs"))
    return output.data


def idle_sweeper() -> Sweeper:
    """The sweeper as deployed, on canned clients: no cursor, an empty table."""
    clients = canned_clients(deployed=True)
    dynamodb = clients["dynamodb"]
    config = SweeperConfig.from_env(
        {
            "OUTBOX_TABLE_NAME": TABLE,
            "TOPIC_ARN": TOPIC_ARN,
            "EVENT_BUS_NAME": BUS,
            "EVENT_SOURCE": SOURCE,
            "POISON_QUEUE_URL": POISON_QUEUE_URL,
        }
    )
    return build_sweeper(
        config,
        destinations={
            Destination.SNS: SnsDestination(clients["sns"], TOPIC_ARN),
            Destination.EVENTBRIDGE: EventBridgeDestination(clients["events"], BUS, SOURCE),
        },
        poison_queue=SqsPoisonQueue(clients["sqs"], POISON_QUEUE_URL),
        updater=DynamoDBRowUpdater(dynamodb, TABLE),
        predecessors=DynamoDBPredecessorReader(dynamodb, TABLE),
        claimer=DynamoDBRowClaimer(dynamodb, TABLE),
        scan=DynamoDBTableScan(dynamodb, TABLE),
        cursors=DynamoDBCursorStore(dynamodb, TABLE),
        indexer=DynamoDBFailedIndexer(dynamodb, TABLE),
    )


def sweeper_runs(samples: int = IDLE_SAMPLES) -> tuple[list[float], bytes]:
    """CPU ms of each idle run through the sweeper's entry point (after one unmeasured run), and what the
    last one wrote."""
    timings: list[float] = []
    output = b""
    with _installed(sweeper_entry, "_sweeper", idle_sweeper()):
        with quiet():
            sweeper_entry.handler({"segment": 0}, context("Sweeper"))
        for _ in range(samples):
            with captured() as written:
                started = time.process_time()
                sweeper_entry.handler({"segment": 0}, context("Sweeper"))
                timings.append((time.process_time() - started) * 1000)
            output = written.data
    return timings, output


def measure() -> list[Group]:
    with warnings.catch_warnings():
        # Powertools warns when a flush finds no metric: the unmeasured first runs' business, not a figure's.
        warnings.simplefilter("ignore", UserWarning)
        ours_output, naive_output = publisher_invocation(), naive_invocation()
        sweep_ms, sweep_output = sweeper_runs()
    publisher_metrics, sweeper_metrics = metrics_defined(ours_output), metrics_defined(sweep_output)
    figures = [
        Figure(
            "logs.publisher.bytes_per_event",
            f"bytes written to CloudWatch Logs per event (a batch of {RECORDS})",
            "bytes/event",
            per(len(ours_output), RECORDS),
            per(len(naive_output), RECORDS),
            decimals=1,
            source="standard output of the Lambda entry point, decorators included, captured",
            detail={"ours_bytes": len(ours_output), "naive_bytes": len(naive_output), "records": RECORDS},
        ),
        Figure(
            "metrics.custom",
            "custom metrics the publisher and the sweeper define",
            "metrics",
            float(len(publisher_metrics) + len(sweeper_metrics)),
            0.0,
            decimals=0,
            source="the EMF blobs of one invocation of each entry point",
            detail={"publisher": publisher_metrics, "sweeper": sweeper_metrics},
        ),
        Figure(
            "sweeper.idle.cpu_ms",
            "CPU per idle sweeper run (entry point, canned HTTP)",
            "ms/run",
            min(sweep_ms),
            decimals=2,
            source="time.process_time around the Lambda entry point; the fastest sample",
            detail={
                "samples_ms": [round(ms, 3) for ms in sweep_ms],
                "median_ms": statistics.median(sweep_ms),
            },
        ),
        Figure(
            "logs.sweeper.bytes_per_run",
            "bytes written to CloudWatch Logs per idle sweeper run",
            "bytes/run",
            float(len(sweep_output)),
            decimals=0,
            source="standard output of the Lambda entry point, decorators included, captured",
        ),
    ]
    return [
        Group(
            "observability",
            "What the functions write to CloudWatch, and an idle sweeper run",
            "naive publisher",
            figures,
            notes=[
                "Through each function's Lambda entry point, decorators included, on real botocore clients "
                "with canned HTTP; a Lambda context with names as long as the deployed ones. Tracing is off "
                "here (no X-Ray daemon): X-Ray writes nothing to the log. The custom metrics' names are in "
                "the figure's detail.",
            ],
            command=COMMAND,
        )
    ]


def _batch(prefix: str) -> dict[str, Any]:
    return lambda_batch(round_robin(RECORDS, AGGREGATES, prefix=prefix))


@contextmanager
def _installed(module: Any, name: str, value: object) -> Iterator[None]:
    """The entry point's module-level wiring replaced by `value` for the block (else the entry point builds
    its own from the environment, on real clients)."""
    saved = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, saved)
