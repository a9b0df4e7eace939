"""The fixed monthly cost of each way of publishing, whatever the traffic (bench.cost prices what each event
adds): ours pays for its custom metrics, its alarms and dashboard, and the sweeper's idle runs (a cursor
GetItem, one Scan page, a cursor PutItem, the invocation, its duration, log and trace); the naive publisher
has none of them (and watches nothing); Pipes has its stream reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bench import latency, prices
from bench.deployment import Deployment
from bench.options import NAIVE, OURS, PIPES
from bench.prices import Price, dollars

LAMBDA_POLLS_PER_SECOND = 4
"""Lambda's mapping polls each shard of a DynamoDB stream 4 times a second (documented for Lambda:
https://docs.aws.amazon.com/lambda/latest/dg/with-ddb.html); Pipes documents no rate."""
SECONDS_PER_MONTH = 60 * 60 * 24 * 30
SWEEPER_IDLE_CALLS = ("dynamodb.GetItem", "dynamodb.Scan", "dynamodb.PutItem")


@dataclass(frozen=True)
class MonthlyLine:
    item: str
    quantity: float
    """Units per month."""
    unit: str
    price: Price
    how: str

    @property
    def usd(self) -> float:
        return self.quantity * self.price.per_unit

    def to_json(self) -> dict[str, Any]:
        return {
            "item": self.item,
            "usd_per_month": self.usd,
            "arithmetic": (
                f"{self.quantity:,.6g} {self.unit} x ${dollars(self.price.usd)} per {self.price.per:,} "
                f"= ${self.usd:.4f}"
            ),
            "how": self.how,
        }


def per_month(figure: Mapping[str, Any], deployment: Deployment) -> dict[str, Any]:
    """Each option's fixed cost a month, line by line, from the measured figures and the deployment."""
    runs = deployment.sweeper_runs_per_month
    idle_rru, idle_wru = figure["sweeper.idle.rru"]["ours"], figure["sweeper.idle.wru"]["ours"]
    cpu_ms = figure["sweeper.idle.cpu_ms"]["ours"]
    share = latency.vcpu_share(deployment.sweeper_memory_mb)
    idle_calls = dict.fromkeys(SWEEPER_IDLE_CALLS, 1.0)
    waited_ms, waits = latency.waits_ms(idle_calls)
    wall_ms = cpu_ms / share + waited_ms
    memory_gb = deployment.sweeper_memory_mb / 1024
    metrics = figure["metrics.custom"]["ours"]
    log_bytes = figure["logs.sweeper.bytes_per_run"]["ours"]
    ours = [
        MonthlyLine(
            "custom metrics",
            metrics,
            "metrics",
            prices.CLOUDWATCH_CUSTOM_METRIC,
            "metrics.custom (the publisher's and the sweeper's EMF metrics)",
        ),
        MonthlyLine(
            "alarms",
            deployment.alarms,
            "alarms",
            prices.CLOUDWATCH_ALARM,
            "the monitoring construct's alarms",
        ),
        MonthlyLine(
            "dashboard",
            deployment.dashboards,
            "dashboards",
            prices.CLOUDWATCH_DASHBOARD,
            "the monitoring construct's dashboard",
        ),
        MonthlyLine(
            "sweeper: reads",
            runs * idle_rru,
            "RRU",
            prices.DYNAMODB_READ_REQUEST_UNIT,
            f"{runs:,} idle runs x {idle_rru:g} RRU (sweeper.idle.rru: cursor GetItem + one Scan page)",
        ),
        MonthlyLine(
            "sweeper: writes",
            runs * idle_wru,
            "WRU",
            prices.DYNAMODB_WRITE_REQUEST_UNIT,
            f"{runs:,} idle runs x {idle_wru:g} WRU (sweeper.idle.wru: cursor PutItem)",
        ),
        MonthlyLine(
            "sweeper: invocations",
            runs,
            "invocations",
            prices.LAMBDA_REQUEST,
            f"{runs:,} runs (its schedules, {deployment.source})",
        ),
        MonthlyLine(
            "sweeper: duration (arm64)",
            runs * memory_gb * wall_ms / 1000,
            "GB-s",
            prices.LAMBDA_ARM64_GB_SECOND,
            f"{runs:,} runs x {memory_gb:g} GB x ({cpu_ms:.2f} ms CPU (sweeper.idle.cpu_ms) / "
            f"{share:.3f} vCPU "
            f"+ waits {waits} = {waited_ms:g} ms) = {wall_ms:,.1f} ms wall a run",
        ),
        MonthlyLine(
            "sweeper: logs",
            runs * log_bytes,
            "bytes",
            prices.CLOUDWATCH_LOGS_INGESTED,
            f"{runs:,} runs x {log_bytes:,.0f} bytes (logs.sweeper.bytes_per_run)",
        ),
        MonthlyLine(
            "sweeper: X-Ray traces",
            runs,
            "traces",
            prices.XRAY_TRACE_RECORDED,
            "one a run: a run a minute is always within the default rule's first request each second",
        ),
    ]
    polls = LAMBDA_POLLS_PER_SECOND * SECONDS_PER_MONTH
    pipes_reads = 2 * polls * prices.DYNAMODB_STREAMS_READ.per_unit
    return {
        OURS: {
            "lines": [line.to_json() for line in ours],
            "total_usd": sum(line.usd for line in ours),
            "not_counted": [
                "log storage (30 days' retention): cents a month at these volumes",
                "the stream mapping's polling: free for Lambda",
            ],
        },
        NAIVE: {
            "lines": [],
            "total_usd": 0.0,
            "not_counted": ["it has no metrics, alarms, dashboard or sweeper: nothing watches what it drops"],
        },
        PIPES: {
            "lines": [],
            "total_usd": 0.0,
            "not_counted": [
                "its stream reads, undocumented; at Lambda's documented rate they would be 2 pipes x "
                f"{LAMBDA_POLLS_PER_SECOND} GetRecords a second x {SECONDS_PER_MONTH:,} s = {2 * polls:,} a "
                f"month per shard x ${dollars(prices.DYNAMODB_STREAMS_READ.usd)} per "
                f"{prices.DYNAMODB_STREAMS_READ.per:,} = ${pipes_reads:.2f} per shard (free tier left out)",
                "metrics, alarms and a dashboard of its own, if one is wanted",
            ],
        },
    }
