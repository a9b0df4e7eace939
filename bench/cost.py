"""Cost per million events: ours, the naive publisher and EventBridge Pipes, on every interleave the publish
figures count, from the measured figures and AWS's published prices (bench.prices), each line with its
arithmetic; and the fixed monthly cost, apart.

What is counted is what publishing adds per event, from the outbox row's write to its settle: the business
write (the order row, an idempotency record) is the same whichever way events are published, and left out.

- Ours, per interleave (`publish.*`): the billed SNS requests and EventBridge events of its publish calls, the
  outbox row's writes (its Put in the business transaction, `write.wcu.place.no_key`'s outbox share; its
  settle and any other write, measured in the interleave), the order gate's reads (measured), Lambda
  invocations at full batches of the mapping's BatchSize, Lambda duration priced from wall time (below), what
  it writes to CloudWatch Logs (`logs.publisher.bytes_per_event`) and the X-Ray traces of its invocations
  (an upper bound: every invocation sampled). Stream reads by Lambda: free.
- Naive: the same, for its one Publish, one PutEvents and one UpdateItem per record; its row is marked, then
  left to its TTL (deletes by TTL are free); it writes no log and keeps no trace.
- Pipes: two pipes (one per target) reading the stream, each request billed; the SNS and EventBridge targets
  batched by 10 (the most Pipes puts in one call to them); the row written once, with its TTL, never settled.
  Pipes' own stream reads are billed (it is not Lambda) but its polling rate is not documented: not counted
  (its fixed cost says what they would be at Lambda's rate). Pipes keeps stream order, but has no order gate,
  no poison isolation per aggregate and no sweeper.

Lambda duration is wall time at the configured memory (bench.latency): the CPU measured on this machine with
real botocore request building (`cpu.cost.*`, the same interleave) divided by the function's vCPU share, plus
the wait of each AWS call the interleave made, one after another, at the latency assumed per service (our
row updates wait as one round trip per `outbox_publisher.dynamodb_rows.WORKERS` of them: they are in flight
together).

The fixed monthly cost, whatever the traffic, is bench.fixed_cost's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench import fixed_cost, latency, prices
from bench.deployment import Deployment
from bench.options import NAIVE, OURS, PIPES
from bench.prices import Price, dollars
from outbox_publisher.dynamodb_rows import WORKERS as ROW_UPDATE_WORKERS

EVENTS = 1_000_000
HEADLINE = "publish.random"
"""The interleave the summary figures of earlier runs used: 100 records over 10 aggregates, random."""
WAIT_STEP_MS = 10
XRAY_SAMPLED_BEYOND_RESERVOIR = 0.05
"""X-Ray's default sampling rule: the first request each second, then 5% of the others
(https://docs.aws.amazon.com/xray/latest/devguide/xray-console-sampling.html)."""
ROW_UPDATES = frozenset({"dynamodb.DeleteItem", "dynamodb.UpdateItem"})
"""Our publisher's calls that its row updater makes several at a time."""


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
            f"{self.price.per:,} = ${self.usd:.3f}"
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
    scenarios = [key for key in figure if key.startswith("publish.")]
    costed = {key: _scenario(figure, key, deployment) for key in scenarios}
    summary = [
        {
            "scenario": key,
            "label": figure[key]["label"],
            **{option["name"]: option["total_usd_per_million_events"] for option in options},
            "below_both": _below_both(options),
        }
        for key, options in costed.items()
    ]
    return {
        "events": EVENTS,
        "region": prices.REGION,
        "prices_checked_on": prices.CHECKED_ON,
        "prices": {name: price.to_json() for name, price in prices.ALL.items()},
        "latency": {name: call.to_json() for name, call in latency.ALL.items()},
        "deployment": deployment.to_json(),
        "headline": HEADLINE,
        "summary": summary,
        "by_scenario": {
            key: {"label": figure[key]["label"], "options": options} for key, options in costed.items()
        },
        "fixed_per_month": fixed_cost.per_month(figure, deployment),
    }


def totals(computed: Mapping[str, Any], scenario: str) -> dict[str, float]:
    """{option name: USD per million events} of one interleave."""
    return {
        option["name"]: option["total_usd_per_million_events"]
        for option in computed["by_scenario"][scenario]["options"]
    }


def _below_both(options: Sequence[Mapping[str, Any]]) -> bool:
    ours, *others = (option["total_usd_per_million_events"] for option in options)
    return all(ours < other for other in others)


def _scenario(figure: Mapping[str, Any], key: str, deployment: Deployment) -> list[dict[str, Any]]:
    publish = figure[key]["detail"]
    name = key.removeprefix("publish.")
    events = publish["events"]
    cpu = figure[f"cpu.cost.{name}"]
    row_wru = figure["write.wcu.place.no_key"]["detail"]["by_table"]["outbox"]["table_wcu"]
    ours_capacity, naive_capacity = publish["ours_capacity_per_event"], publish["naive_capacity_per_event"]
    ours_billed, naive_billed = publish["ours_billed_per_event"], publish["naive_billed_per_event"]
    memory_mb, batch = deployment.publisher_memory_mb, deployment.batch_size
    log_bytes = figure["logs.publisher.bytes_per_event"]
    ours_calls = _per_event(_round_trips(publish["ours_calls"]), events)
    naive_calls = _per_event(publish["naive_calls"], events)
    invocations = 1 / batch
    ours = option(
        OURS,
        [
            Line("SNS publish requests", ours_billed["sns_requests"], "requests", prices.SNS_REQUEST, key),
            Line(
                "EventBridge events",
                ours_billed["eventbridge_events"],
                "events",
                prices.EVENTBRIDGE_EVENT,
                key,
            ),
            Line(
                "DynamoDB writes",
                row_wru + ours_capacity["settle_wcu"] + ours_capacity["other_write_wcu"],
                "WRU",
                prices.DYNAMODB_WRITE_REQUEST_UNIT,
                f"row {row_wru:g} (in the business transaction) + settle {ours_capacity['settle_wcu']:g} "
                f"(DeleteItem) + other writes {ours_capacity['other_write_wcu']:g} ({key})",
            ),
            Line(
                "DynamoDB reads (order gate)",
                ours_capacity["gate_rru"],
                "RRU",
                prices.DYNAMODB_READ_REQUEST_UNIT,
                f"BatchGetItem, strongly consistent ({key})",
            ),
            Line(
                "Lambda requests",
                invocations,
                "invocations",
                prices.LAMBDA_REQUEST,
                f"full batches of {batch}",
            ),
            _duration(cpu["ours"], ours_calls, memory_mb, f"cpu.cost.{name}"),
            Line(
                "CloudWatch Logs ingested",
                log_bytes["ours"],
                "bytes",
                prices.CLOUDWATCH_LOGS_INGESTED,
                "logs.publisher.bytes_per_event (summary line and EMF metrics, a batch of 100)",
            ),
            Line(
                "X-Ray traces",
                invocations,
                "traces",
                prices.XRAY_TRACE_RECORDED,
                "one per invocation (Tracing: Active): the default sampling rule's first request each second "
                "takes every one below a second apart; beyond, 5% of them, "
                f"${_xray_at_scale(invocations):.4f}",
            ),
            Line(
                "DynamoDB Streams reads",
                invocations,
                "GetRecords",
                prices.DYNAMODB_STREAMS_READ_BY_LAMBDA,
                "by Lambda: free",
            ),
        ],
        [_wait_step(ours_calls, memory_mb), "the fixed monthly cost (below)"],
    )
    naive = option(
        NAIVE,
        [
            Line("SNS publish requests", naive_billed["sns_requests"], "requests", prices.SNS_REQUEST, key),
            Line(
                "EventBridge events",
                naive_billed["eventbridge_events"],
                "events",
                prices.EVENTBRIDGE_EVENT,
                key,
            ),
            Line(
                "DynamoDB writes",
                row_wru + naive_capacity["mark_wcu"],
                "WRU",
                prices.DYNAMODB_WRITE_REQUEST_UNIT,
                f"row {row_wru:g} + mark {naive_capacity['mark_wcu']:g} (UpdateItem) + TTL delete 0",
            ),
            Line(
                "Lambda requests",
                invocations,
                "invocations",
                prices.LAMBDA_REQUEST,
                f"full batches of {batch}",
            ),
            _duration(cpu["baseline"], naive_calls, memory_mb, f"cpu.cost.{name}"),
            Line(
                "CloudWatch Logs ingested",
                log_bytes["baseline"],
                "bytes",
                prices.CLOUDWATCH_LOGS_INGESTED,
                "logs.publisher.bytes_per_event (it logs nothing)",
            ),
            Line(
                "DynamoDB Streams reads",
                invocations,
                "GetRecords",
                prices.DYNAMODB_STREAMS_READ_BY_LAMBDA,
                "by Lambda: free",
            ),
        ],
        [_wait_step(naive_calls, memory_mb), "tracing (a sample would not turn it on)"],
    )
    pipes = option(
        PIPES,
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
                row_wru,
                "WRU",
                prices.DYNAMODB_WRITE_REQUEST_UNIT,
                f"row {row_wru:g}, TTL set at write; nothing settles it",
            ),
        ],
        [
            "the pipes' DynamoDB Streams reads (billed for non-Lambda readers; polling rate undocumented): "
            "see the fixed cost",
            "if Pipes billed a batch of 10 events as one request (its pricing page counts 64 KB chunks of a "
            "payload, and says nothing of batches), its requests line would be $0.08 instead of $0.80",
        ],
    )
    return [ours, naive, pipes]


def _xray_at_scale(invocations_per_event: float) -> float:
    """The X-Ray line when the default rule samples XRAY_SAMPLED_BEYOND_RESERVOIR of the invocations."""
    return (
        invocations_per_event * XRAY_SAMPLED_BEYOND_RESERVOIR * EVENTS * prices.XRAY_TRACE_RECORDED.per_unit
    )


def _round_trips(calls: Mapping[str, int]) -> dict[str, float]:
    """The waits of our publisher's calls, one after another: its row updates (settles, FAILED marks, parks)
    go `ROW_UPDATE_WORKERS` at a time (outbox_publisher.dynamodb_rows), so their waits are that many fewer."""
    return {
        operation: math.ceil(count / ROW_UPDATE_WORKERS) if operation in ROW_UPDATES else count
        for operation, count in calls.items()
    }


def _per_event(calls: Mapping[str, float], events: int) -> dict[str, float]:
    return {operation: count / events for operation, count in calls.items()}


def _duration(cpu_us: float, calls_per_event: Mapping[str, float], memory_mb: int, source: str) -> Line:
    share = latency.vcpu_share(memory_mb)
    waited_ms, waits = latency.waits_ms(calls_per_event)
    wall_us = cpu_us / share + waited_ms * 1000
    memory_gb = memory_mb / 1024
    return Line(
        "Lambda duration (arm64)",
        memory_gb * wall_us / 1e6,
        "GB-s",
        prices.LAMBDA_ARM64_GB_SECOND,
        f"{memory_gb:g} GB x ({cpu_us:,.0f} us CPU ({source}) / {share:.3f} vCPU = {cpu_us / share:,.0f} us, "
        f"+ waits {waits} = {waited_ms:,.2f} ms) = {wall_us:,.0f} us wall",
    )


def _wait_step(calls_per_event: Mapping[str, float], memory_mb: int) -> str:
    calls = sum(calls_per_event.values())
    usd = calls * WAIT_STEP_MS / 1000 * (memory_mb / 1024) * EVENTS * prices.LAMBDA_ARM64_GB_SECOND.per_unit
    return (
        f"waits longer than assumed: each {WAIT_STEP_MS} ms more per call ({calls:.3g} calls/event) adds "
        f"${usd:.3f} per million events"
    )
