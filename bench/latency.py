"""What a Lambda function waits for, per AWS call, and how much CPU it gets: the assumptions that turn
measured CPU time and call counts into the wall time Lambda bills (bench.cost). One place, each with its
source.

Lambda bills duration, wall time from start to end, at the configured memory. A handler's wall time is its
CPU time at the function's share of a vCPU, plus the time it waits for each AWS call, in sequence (both
publishers make their calls one after another: ours a publish call per destination per call group, then its
settles, ten DeleteItems in flight at once (bench.cost); the naive one a Publish, a PutEvents and an
UpdateItem per record). Nothing here is measured on AWS: the CPU is this machine's (bench.cpu_figures), the
waits are the constants below, and each cost line says which it used.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

MB_PER_VCPU = 1769
"""Lambda allocates CPU in proportion to memory: at 1,769 MB a function has the equivalent of one vCPU (one
vCPU-second of credit per second). https://docs.aws.amazon.com/lambda/latest/dg/configuration-memory.html"""


def vcpu_share(memory_mb: int) -> float:
    """The vCPU a function of `memory_mb` gets (512 MB: 0.289), capped at one: the handlers run one thread."""
    return min(1.0, memory_mb / MB_PER_VCPU)


@dataclass(frozen=True)
class CallLatency:
    ms: float
    """The wait per call, in milliseconds, as the cost figures assume it."""
    source: str
    why: str

    def to_json(self) -> dict[str, object]:
        return {"ms": self.ms, "source": self.source, "why": self.why}


DYNAMODB_ITEM_CALL = CallLatency(
    10.0,
    "https://repost.aws/knowledge-center/dynamodb-high-latency",
    "AWS: most atomic operations (GetItem, PutItem...) average single-digit milliseconds, measured inside "
    "DynamoDB (SuccessfulRequestLatency); taken at the top of that range to cover the in-region round trip. "
    "DeleteItem, UpdateItem, PutItem, GetItem, TransactWriteItems",
)
DYNAMODB_BATCH_CALL = CallLatency(
    20.0,
    "https://repost.aws/knowledge-center/dynamodb-high-latency",
    "AWS: the latency of non-atomic operations (Query, Scan) depends on the size of the result; a "
    "BatchGetItem of up to 100 keys or a Scan page is assumed twice a single-item call",
)
SNS_CALL = CallLatency(
    20.0,
    "https://bitesizedserverless.com/bite/serverless-messaging-latency-compared/",
    "AWS publishes no latency for Publish or PublishBatch; that measurement (eu-west-1, 2022) puts SNS's "
    "publish-to-consumer p50 at 73 ms, delivery included, so the call alone takes less. 20 ms is an "
    "assumption; it weighs on the naive publisher (one call per event) ten times more than on ours",
)
EVENTBRIDGE_CALL = CallLatency(
    20.0,
    "https://bitesizedserverless.com/bite/serverless-messaging-latency-compared/",
    "AWS publishes no latency for PutEvents; that measurement (eu-west-1, 2023) puts EventBridge's "
    "put-to-consumer p50 at 148 ms, delivery included, so the call alone takes less. 20 ms is an "
    "assumption, chosen low like SNS's: a low wait favours the publisher that makes more calls, the naive "
    "one",
)
SQS_CALL = CallLatency(
    20.0,
    "https://bitesizedserverless.com/bite/serverless-messaging-latency-compared/",
    "the poison queue's SendMessage, never on the healthy path; assumed as SNS's",
)

BY_OPERATION: dict[str, CallLatency] = {
    "sns.PublishBatch": SNS_CALL,
    "sns.Publish": SNS_CALL,
    "events.PutEvents": EVENTBRIDGE_CALL,
    "sqs.SendMessage": SQS_CALL,
    "dynamodb.BatchGetItem": DYNAMODB_BATCH_CALL,
    "dynamodb.Scan": DYNAMODB_BATCH_CALL,
    "dynamodb.Query": DYNAMODB_BATCH_CALL,
}
"""Latency by "service.Operation" (a figure's `calls` detail); any other DynamoDB call is a single-item
one."""


def of(operation: str) -> CallLatency:
    """The assumed wait of one "service.Operation" call."""
    if operation in BY_OPERATION:
        return BY_OPERATION[operation]
    if operation.startswith("dynamodb."):
        return DYNAMODB_ITEM_CALL
    raise KeyError(f"no latency assumed for {operation}")


ALL = {
    "dynamodb_item_call": DYNAMODB_ITEM_CALL,
    "dynamodb_batch_call": DYNAMODB_BATCH_CALL,
    "sns_call": SNS_CALL,
    "eventbridge_call": EVENTBRIDGE_CALL,
    "sqs_call": SQS_CALL,
}


def waits_ms(calls_per_event: Mapping[str, float]) -> tuple[float, str]:
    """The waits of these calls (per event, by operation), one after another: total ms, and the sum as
    written out."""
    waited = 0.0
    parts = []
    for operation, calls in sorted(calls_per_event.items()):
        ms = of(operation).ms
        waited += calls * ms
        parts.append(f"{calls:.3g} {operation.split('.', 1)[1]} x {ms:g} ms")
    return waited, " + ".join(parts) or "no call"
