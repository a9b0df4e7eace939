"""CPU per record (`time.process_time`), ours against the naive publisher, at batch sizes 10, 100 and 1,000.

Two sets of clients, the same for both publishers:
- stub clients (bench.stubs, hand-written stand-ins that answer success): the publishers' own Python only;
- real botocore clients with canned HTTP (bench.canned_http): all of botocore's request building, signing
  and response parsing too, but no socket. Ours uses the clients it deploys with (`publishing_client`,
  `invocation_client`); the naive one plain `boto3.client`, as samples do.

The batch is Lambda's event for round-robin records over 10 aggregates (each aggregate's predecessors are in
the batch: no order-gate read), PENDING and fresh (no claim). Our publisher starts every run with an empty
memory of what it settled (outbox_publisher.memory), as a container handed that batch for the first time does:
else a second run of the same batch would skip every record it settled in the first. Each publisher gets it
through its handler's inner function (ours `outbox_publisher.handler.handle`, the naive one its
`process_partial_response`): the Powertools decorators around the Lambda entry point run once per
invocation, not per record, and are left out of both. Logging and metrics still run, into a silenced
stdout. One warm-up run, then several samples, of which the fastest is the figure (as `timeit` advises: on a
shared machine noise only ever adds time; every sample is in the JSON). CPU time of this process, so other
processes slow it less than they slow wall time, but a loaded machine (caches, frequency, a busy sibling
core) still shows: the figures are indicative.

The cost figures (bench.cost) price Lambda's duration from CPU: `cpu.cost.*` times both publishers, with real
botocore and canned HTTP, on each interleave the publish figures count (bench.publish_figures.scenarios), ours
warm or cold as the scenario says (warm: its memory holds the predecessors it settled; cold: the gate reads
them, every one answered absent, that is out).
"""

from __future__ import annotations

import gc
import os
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import boto3

from bench.canned_http import can
from bench.environment import REGION, quiet
from bench.figures import Figure, Group
from bench.naive import NaivePublisher
from bench.scenarios import Scenario, round_robin, scenarios
from bench.stubs import stub_clients
from outbox.aws import invocation_client
from outbox.clock import parse_timestamp
from outbox.model import OutboxEvent, RowKey
from outbox_local.stream_records import lambda_record
from outbox_publisher.adapters import (
    EventBridgeDestination,
    SnsDestination,
    SqsPoisonQueue,
    publishing_client,
)
from outbox_publisher.config import PublisherConfig
from outbox_publisher.dynamodb_rows import DynamoDBRowUpdater
from outbox_publisher.handler import Publisher, build_publisher, handle
from outbox_publisher.leases import DynamoDBRowClaimer
from outbox_publisher.memory import RowMemory
from outbox_publisher.predecessors import DynamoDBPredecessorReader
from outbox_publisher.routing import Destination
from tests.support.clock import FakeClock
from tests.support.lambda_context import FakeLambdaContext

BATCH_SIZES = (10, 100, 1000)
AGGREGATES = 10
TABLE = "outbox"
STREAM_ARN = f"arn:aws:dynamodb:{REGION}:123456789012:table/{TABLE}/stream/2026-11-29T00:00:00.000"
TOPIC_ARN = f"arn:aws:sns:{REGION}:123456789012:outbox-events"
BUS = "outbox-bus"
SOURCE = "shop.orders"
POISON_QUEUE_URL = f"https://sqs.{REGION}.amazonaws.com/123456789012/outbox-poison"
COMMAND = "python -m bench --only cpu"
RECORDS_PER_SAMPLE = {"stubs": 2000, "botocore": 300}
"""About how many records one timed sample handles (small batches repeat), so that it lasts long enough."""
MIN_SAMPLES = {"stubs": 7, "botocore": 3}
"""Samples at least, per publisher: a stub-client sample of 1,000 records lasts a tenth of a second."""

Handler = Callable[[dict[str, Any]], object]


def lambda_batch(events: Sequence[OutboxEvent]) -> dict[str, Any]:
    """The Lambda event that delivers these rows' INSERT records (shaped as outbox_local shapes moto's)."""
    records = []
    for position, event in enumerate(events):
        item = event.to_item()
        raw = {
            "eventID": f"bench-{position}",
            "eventName": "INSERT",
            "dynamodb": {
                "ApproximateCreationDateTime": parse_timestamp(event.occurred_at),
                "Keys": {name: item[name] for name in ("aggregate_key", "seq")},
                "NewImage": item,
                "SequenceNumber": f"{position + 1:021d}",
                "SizeBytes": len(str(item)),
                "StreamViewType": "NEW_AND_OLD_IMAGES",
            },
        }
        records.append(dict(lambda_record(raw, STREAM_ARN, REGION).payload))
    return {"Records": records}


def ours(clients: Mapping[str, Any], *, remembered: Sequence[OutboxEvent] = ()) -> Handler:
    """Our publisher on `clients`; each run starts with a memory holding only the `remembered` rows (as a
    container that settled them itself and nothing else)."""
    publisher = our_publisher(clients)
    context = FakeLambdaContext(remaining_ms=600_000)
    engine = publisher.stream.engine
    keys = [(RowKey(event.aggregate_key, event.seq), event.event_id) for event in remembered]

    def run(event: dict[str, Any]) -> object:
        engine.memory = RowMemory()
        for key, event_id in keys:
            engine.memory.settled_row(key, event_id)
        return handle(event, context, publisher)

    return run


def our_publisher(clients: Mapping[str, Any]) -> Publisher:
    """Our publisher, wired as deployed, on `clients`."""
    config = PublisherConfig.from_env(
        {
            "OUTBOX_TABLE_NAME": TABLE,
            "TOPIC_ARN": TOPIC_ARN,
            "EVENT_BUS_NAME": BUS,
            "EVENT_SOURCE": SOURCE,
            "POISON_QUEUE_URL": POISON_QUEUE_URL,
        }
    )
    clock = FakeClock()
    dynamodb = clients["dynamodb"]
    return build_publisher(
        config,
        destinations={
            Destination.SNS: SnsDestination(clients["sns"], TOPIC_ARN),
            Destination.EVENTBRIDGE: EventBridgeDestination(clients["events"], BUS, SOURCE),
        },
        poison_queue=SqsPoisonQueue(clients["sqs"], POISON_QUEUE_URL),
        updater=DynamoDBRowUpdater(dynamodb, TABLE),
        predecessors=DynamoDBPredecessorReader(dynamodb, TABLE),
        claimer=DynamoDBRowClaimer(dynamodb, TABLE),
        clock=clock,
    )


def naive(clients: Mapping[str, Any]) -> Handler:
    publisher = NaivePublisher(
        sns=clients["sns"],
        events=clients["events"],
        dynamodb=clients["dynamodb"],
        table_name=TABLE,
        topic_arn=TOPIC_ARN,
        event_bus_name=BUS,
        event_source=SOURCE,
    )
    context = FakeLambdaContext(remaining_ms=600_000)
    return lambda event: publisher.handle(event, context)


def canned_clients(*, deployed: bool) -> dict[str, Any]:
    """Real clients with canned HTTP: ours as it deploys them, or boto3's defaults."""
    if deployed:
        made = {
            "sns": publishing_client("sns"),
            "events": publishing_client("events"),
            "dynamodb": invocation_client("dynamodb"),
            "sqs": invocation_client("sqs"),
        }
    else:
        made = {
            service: boto3.client(service, region_name=REGION) for service in ("sns", "events", "dynamodb")
        }
    return {service: can(client) for service, client in made.items()}


def cpu_us_per_record(handlers: Sequence[Handler], event: dict[str, Any], samples: int) -> list[list[float]]:
    """Each handler's CPU per record on the event, `samples` times, the handlers taking turns: a change in the
    machine's speed during the run then falls on all of them, not on one."""
    records = len(event["Records"])
    timings: list[list[float]] = [[] for _ in handlers]
    with quiet():
        for handler in handlers:
            handler(event)  # warm-up: first-call caches (botocore's loaders, regexes...) are cold start
        gc.collect()  # once: then the samples pay for the collections that fall in them, as production does
        for _ in range(samples):
            for handler, timed in zip(handlers, timings, strict=True):
                started = time.process_time()
                handler(event)
                timed.append((time.process_time() - started) / records * 1e6)
    return timings


def measure(
    batch_sizes: Sequence[int] = BATCH_SIZES, cost_scenarios: Sequence[Scenario] | None = None
) -> list[Group]:
    stubbed = stub_clients()
    sets: dict[str, tuple[Handler, Handler]] = {
        "stubs": (ours(stubbed), naive(stubbed)),
        "botocore": (ours(canned_clients(deployed=True)), naive(canned_clients(deployed=False))),
    }
    figures = []
    for clients, (our_handler, naive_handler) in sets.items():
        for size in batch_sizes:
            event = lambda_batch(round_robin(size, AGGREGATES, prefix=f"cpu{size}"))
            samples = max(MIN_SAMPLES[clients], RECORDS_PER_SAMPLE[clients] // size)
            load = os.getloadavg()[0]
            our_samples, naive_samples = cpu_us_per_record((our_handler, naive_handler), event, samples)
            figures.append(_figure(clients, size, our_samples, naive_samples, load))
    figures += cost_figures(scenarios() if cost_scenarios is None else cost_scenarios)
    return [
        Group(
            "cpu",
            "CPU per record (time.process_time)",
            "naive publisher",
            figures,
            notes=[
                "Stubs: hand-written stand-in clients answering success (bench.stubs), our own Python only. "
                "botocore: real clients, every request validated, serialized and signed, answered by a "
                "canned response at before-send (bench.canned_http).",
                "Measured on a shared machine: indicative. The fastest sample; all samples and their median "
                "are in the JSON detail.",
                "cpu.cost.*: real botocore with canned HTTP on each interleave of the publish figures, ours "
                "warm or cold as named (cold: its gate's BatchGetItem answered with every predecessor "
                "absent); "
                "what the cost figures price Lambda's duration from.",
            ],
            command=COMMAND,
        )
    ]


def _figure(
    clients: str, size: int, our_samples: list[float], naive_samples: list[float], load: float
) -> Figure:
    ours_us, naive_us = min(our_samples), min(naive_samples)
    stubbed = clients == "stubs"
    return Figure(
        f"cpu.{clients}.{size}",
        f"{'stub clients' if stubbed else 'real botocore, canned HTTP'}, batch of {size:,}",
        "us/record",
        ours_us,
        naive_us,
        decimals=1,
        source="time.process_time around the handler's inner function; the fastest sample",
        detail={
            "samples": len(our_samples),
            "ours_us": [round(sample, 2) for sample in our_samples],
            "naive_us": [round(sample, 2) for sample in naive_samples],
            "ours_median_us": statistics.median(our_samples),
            "naive_median_us": statistics.median(naive_samples),
            "load_average_1m": load,
            "at": datetime.now().astimezone().isoformat(timespec="seconds"),
        },
    )


def cost_figures(measured: Sequence[Scenario]) -> list[Figure]:
    """CPU per record of both publishers, real botocore and canned HTTP, on each scenario's batch."""
    figures = []
    naive_handler = naive(canned_clients(deployed=False))
    for scenario in measured:
        remembered = scenario.earlier if scenario.earlier is not None and scenario.warm else ()
        our_handler = ours(canned_clients(deployed=True), remembered=remembered)
        event = lambda_batch(scenario.events)
        size = len(scenario.events)
        samples = max(MIN_SAMPLES["botocore"], RECORDS_PER_SAMPLE["botocore"] // size)
        load = os.getloadavg()[0]
        our_samples, naive_samples = cpu_us_per_record((our_handler, naive_handler), event, samples)
        figures.append(
            Figure(
                f"cpu.cost.{scenario.name}",
                f"real botocore, canned HTTP: {scenario.label}",
                "us/record",
                min(our_samples),
                min(naive_samples),
                decimals=1,
                source="time.process_time around the handler's inner function; the fastest sample",
                detail={
                    "records": size,
                    "samples": len(our_samples),
                    "ours_us": [round(sample, 2) for sample in our_samples],
                    "naive_us": [round(sample, 2) for sample in naive_samples],
                    "ours_median_us": statistics.median(our_samples),
                    "naive_median_us": statistics.median(naive_samples),
                    "load_average_1m": load,
                },
            )
        )
    return figures
