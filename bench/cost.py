"""Cost per million events: ours, the naive publisher and EventBridge Pipes, from the measured figures and
AWS's published prices (bench.prices), each line with its arithmetic.

What is counted is what publishing adds per event, from the outbox row's write to its deletion: the business
write (the order row, an idempotency record) is the same whichever way events are published, and left out.

- Ours: the measured publish calls' billed units (random interleave of the issue's 100 records over 10
  aggregates), the outbox row's writes (row, pending-index entry, mark, index removal), the order gate's
  reads (healthy path), Lambda invocations at full batches of the mapping's BatchSize, and Lambda duration
  from the CPU measured here with real botocore request building (a floor: network waits are not measured,
  so their price is given per 10 ms waited per call instead of being guessed). Stream reads by Lambda: free.
- Naive: the same, for its one Publish, one PutEvents and one UpdateItem per record; its row has no index.
- Pipes: two pipes (one per target) reading the stream, each request billed; the SNS and EventBridge targets
  batched by 10 (the most Pipes puts in one call to them); the row written once, with its TTL, never marked.
  Pipes' own stream reads are billed (it is not Lambda) but its polling rate is not documented: not counted.
  Pipes keeps stream order, but has no order gate, no poison isolation per aggregate and no sweeper.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench import prices
from bench.deployment import Deployment
from bench.prices import Price

EVENTS = 1_000_000
INTERLEAVE = "publish.random"
WAIT_PER_CALL_MS = 10


@dataclass(frozen=True)
class Line:
    item: str
    quantity: float
    """Units per event."""
    unit: str
    price: Price
    how: str
    """Where the quantity comes from."""

    @property
    def usd(self) -> float:
        return self.quantity * EVENTS * self.price.per_unit

    def to_json(self) -> dict[str, Any]:
        arithmetic = (
            f"{self.quantity:.4g} {self.unit}/event x {EVENTS:,} events x ${dollars(self.price.usd)} per "
            f"{self.price.per:,} = ${self.usd:.2f}"
        )
        return {
            "item": self.item,
            "quantity_per_event": self.quantity,
            "unit": self.unit,
            "usd_per_million_events": self.usd,
            "arithmetic": arithmetic,
            "how": self.how,
        }


def option(name: str, lines: Sequence[Line], not_counted: Sequence[str]) -> dict[str, Any]:
    return {
        "name": name,
        "lines": [line.to_json() for line in lines],
        "total_usd_per_million_events": sum(line.usd for line in lines),
        "not_counted": list(not_counted),
    }


def compute(groups: Sequence[Mapping[str, Any]], deployment: Deployment) -> dict[str, Any]:
    figure = {f["key"]: f for group in groups for f in group["figures"]}
    publish = figure[INTERLEAVE]
    ours_billed, naive_billed = (
        publish["detail"]["ours_billed_per_event"],
        publish["detail"]["naive_billed_per_event"],
    )
    place = figure["write.wcu.place.no_key"]["detail"]["by_table"]["outbox"]
    lifecycle = figure["lifecycle.wcu.place.no_key"]["detail"]
    row_wcu = place["table_wcu"]
    ours_writes = row_wcu + place["index_wcu"] + lifecycle["mark_table_wcu"] + lifecycle["mark_index_wcu"]
    naive_mark = figure["marking.wcu.first"]["baseline"]
    memory_gb = deployment.publisher_memory_mb / 1024
    batch = deployment.batch_size
    cpu_ours, cpu_naive = figure["cpu.botocore.100"]["ours"], figure["cpu.botocore.100"]["baseline"]
    calls_ours = _calls_per_event(publish["detail"]["ours_calls"], publish["detail"]["events"])
    calls_naive = _calls_per_event(publish["detail"]["naive_calls"], publish["detail"]["events"])
    wait = f"network waits: each {WAIT_PER_CALL_MS} ms waited per API call adds ${{:.2f}} per million events"

    ours = option(
        "ours",
        [
            Line(
                "SNS publish requests",
                ours_billed["sns_requests"],
                "requests",
                prices.SNS_REQUEST,
                f"{INTERLEAVE}",
            ),
            Line(
                "EventBridge events",
                ours_billed["eventbridge_events"],
                "events",
                prices.EVENTBRIDGE_EVENT,
                INTERLEAVE,
            ),
            Line(
                "DynamoDB writes",
                ours_writes,
                "WRU",
                prices.DYNAMODB_WRITE_REQUEST_UNIT,
                f"row {row_wcu:g} + pending index {place['index_wcu']:g} "
                f"+ mark {lifecycle['mark_table_wcu']:g} + index removal {lifecycle['mark_index_wcu']:g} "
                "+ TTL delete 0",
            ),
            Line(
                "DynamoDB reads (order gate)",
                figure["gate.rcu.healthy"]["ours"],
                "RRU",
                prices.DYNAMODB_READ_REQUEST_UNIT,
                "gate.rcu.healthy",
            ),
            Line(
                "Lambda requests", 1 / batch, "invocations", prices.LAMBDA_REQUEST, f"full batches of {batch}"
            ),
            _duration(cpu_ours, memory_gb),
            Line(
                "DynamoDB Streams reads",
                1 / batch,
                "GetRecords",
                prices.DYNAMODB_STREAMS_READ_BY_LAMBDA,
                "by Lambda: free",
            ),
        ],
        [wait.format(_wait_usd(calls_ours, memory_gb)), "the sweeper's fixed cost (below)"],
    )
    naive = option(
        "naive publisher",
        [
            Line(
                "SNS publish requests",
                naive_billed["sns_requests"],
                "requests",
                prices.SNS_REQUEST,
                INTERLEAVE,
            ),
            Line(
                "EventBridge events",
                naive_billed["eventbridge_events"],
                "events",
                prices.EVENTBRIDGE_EVENT,
                INTERLEAVE,
            ),
            Line(
                "DynamoDB writes",
                row_wcu + naive_mark,
                "WRU",
                prices.DYNAMODB_WRITE_REQUEST_UNIT,
                f"row {row_wcu:g} (no index) + mark {naive_mark:g} (UpdateItem) + TTL delete 0",
            ),
            Line(
                "Lambda requests", 1 / batch, "invocations", prices.LAMBDA_REQUEST, f"full batches of {batch}"
            ),
            _duration(cpu_naive, memory_gb),
            Line(
                "DynamoDB Streams reads",
                1 / batch,
                "GetRecords",
                prices.DYNAMODB_STREAMS_READ_BY_LAMBDA,
                "by Lambda: free",
            ),
        ],
        [wait.format(_wait_usd(calls_naive, memory_gb))],
    )
    pipes = option(
        "EventBridge Pipes (one pipe per target)",
        [
            Line(
                "Pipes requests",
                2.0,
                "requests",
                prices.PIPES_REQUEST,
                "2 pipes x 1 request (<= 64 KB) per event",
            ),
            Line("SNS publish requests", 0.1, "requests", prices.SNS_REQUEST, "the SNS target batched by 10"),
            Line(
                "EventBridge events",
                1.0,
                "events",
                prices.EVENTBRIDGE_EVENT,
                "the bus target: one event each",
            ),
            Line(
                "DynamoDB writes",
                row_wcu,
                "WRU",
                prices.DYNAMODB_WRITE_REQUEST_UNIT,
                f"row {row_wcu:g}, TTL set at write; no index, no mark",
            ),
        ],
        ["the pipes' DynamoDB Streams reads (billed for non-Lambda readers; polling rate undocumented)"],
    )
    return {
        "events": EVENTS,
        "region": prices.REGION,
        "prices_checked_on": prices.CHECKED_ON,
        "prices": {name: price.to_json() for name, price in prices.ALL.items()},
        "deployment": deployment.to_json(),
        "options": [ours, naive, pipes],
        "sns_by_interleave": {
            key: {
                "ours_requests_per_event": f["detail"]["ours_billed_per_event"].get("sns_requests"),
                "usd_per_million_events": f["detail"]["ours_billed_per_event"].get("sns_requests", 0)
                * EVENTS
                * prices.SNS_REQUEST.per_unit,
                "label": f["label"],
            }
            for key, f in figure.items()
            if key.startswith("publish.")
        },
        "sweeper_per_month": _sweeper_month(figure),
    }


def dollars(usd: float) -> str:
    """A price as written on AWS's pages: no exponent (0.0000133334, not 1.33334e-05)."""
    return f"{usd:.10f}".rstrip("0").rstrip(".")


def _duration(cpu_us: float, memory_gb: float) -> Line:
    return Line(
        "Lambda duration (arm64)",
        memory_gb * cpu_us / 1e6,
        "GB-s",
        prices.LAMBDA_ARM64_GB_SECOND,
        f"{memory_gb:g} GB x {cpu_us:,.0f} us CPU/event (cpu.botocore.100 on this machine; no network wait)",
    )


def _calls_per_event(calls: Mapping[str, int], events: int) -> float:
    return sum(calls.values()) / events


def _wait_usd(calls_per_event: float, memory_gb: float) -> float:
    return (
        calls_per_event
        * WAIT_PER_CALL_MS
        / 1000
        * memory_gb
        * EVENTS
        * prices.LAMBDA_ARM64_GB_SECOND.per_unit
    )


def _sweeper_month(figure: Mapping[str, Any]) -> dict[str, Any]:
    """The idle sweeper's fixed cost, whatever the traffic: one run a minute."""
    runs = 60 * 24 * 30
    rcu = figure["sweeper.idle.rcu"]["ours"]
    read_price, request_price = prices.DYNAMODB_READ_REQUEST_UNIT, prices.LAMBDA_REQUEST
    reads = runs * rcu * read_price.per_unit
    requests = runs * request_price.per_unit
    return {
        "runs": runs,
        "lines": [
            {
                "item": "index reads",
                "arithmetic": f"{runs:,} runs x {rcu:g} RRU x ${dollars(read_price.usd)} "
                f"per {read_price.per:,} = ${reads:.4f}",
            },
            {
                "item": "Lambda requests",
                "arithmetic": f"{runs:,} x ${dollars(request_price.usd)} per {request_price.per:,} "
                f"= ${requests:.4f}",
            },
        ],
        "total_usd": reads + requests,
        "not_counted": ["the idle run's duration (not measured)"],
    }
