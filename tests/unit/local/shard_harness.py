"""A scripted function, stream records and a shard processor for the stream mapping emulator's tests."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from outbox_local.filtering import FilterCriteria
from outbox_local.invocation import InvocationResult
from outbox_local.stream_mapping import (
    MappingSettings,
    ShardProcessor,
    StepKind,
)
from outbox_local.stream_records import StreamRecord, lambda_record
from tests.support.clock import FakeClock

STREAM_ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/Outbox/stream/2026-01-01T00:00:00.000"


FUNCTION_ARN = "arn:aws:lambda:us-east-1:123456789012:function:publisher"


DESTINATION_ARN = "arn:aws:sqs:us-east-1:123456789012:on-failure"


INSERT_ONLY = FilterCriteria.from_template({"Filters": [{"Pattern": json.dumps({"eventName": ["INSERT"]})}]})


class ScriptedFunction:
    """A function whose answer to each invocation is decided by `respond(sequence_numbers)`."""

    def __init__(self, respond: Callable[[list[str]], InvocationResult] | None = None) -> None:
        self.batches: list[list[str]] = []
        self._respond = respond or (lambda _: InvocationResult(payload=None))

    def __call__(self, event: dict[str, Any]) -> InvocationResult:
        sequence_numbers = [r["dynamodb"]["SequenceNumber"] for r in event["Records"]]
        self.batches.append(sequence_numbers)
        return self._respond(sequence_numbers)


def fails_on(poison: str) -> Callable[[list[str]], InvocationResult]:
    def respond(batch: list[str]) -> InvocationResult:
        if poison in batch:
            return InvocationResult(error_type="ValueError", error_message="poison")
        return InvocationResult(payload=None)

    return respond


def reports(*failed: str) -> Callable[[list[str]], InvocationResult]:
    def respond(batch: list[str]) -> InvocationResult:
        items = [{"itemIdentifier": s} for s in failed if s in batch]
        return InvocationResult(payload={"batchItemFailures": items})

    return respond


def in_turn(*responders: Callable[[list[str]], InvocationResult]) -> Callable[[list[str]], InvocationResult]:
    """Answer the n-th invocation with the n-th responder."""
    remaining = iter(responders)

    def respond(batch: list[str]) -> InvocationResult:
        return next(remaining)(batch)

    return respond


def record(sequence_number: int, created_at: float = 1_000.0, event_name: str = "INSERT") -> StreamRecord:
    raw = {
        "eventID": f"id-{sequence_number}",
        "eventName": event_name,
        "dynamodb": {
            "ApproximateCreationDateTime": datetime.fromtimestamp(created_at, UTC),
            "Keys": {"pk": {"S": f"k{sequence_number}"}},
            "NewImage": {"pk": {"S": f"k{sequence_number}"}},
            "SequenceNumber": str(sequence_number),
            "SizeBytes": 10,
            "StreamViewType": "NEW_IMAGE",
        },
    }
    return lambda_record(raw, STREAM_ARN, "us-east-1")


def processor(
    function: ScriptedFunction,
    clock: FakeClock | None = None,
    destination: list[dict[str, Any]] | None = None,
    **settings: Any,
) -> ShardProcessor:
    config = MappingSettings(
        function_arn=FUNCTION_ARN,
        stream_arn=STREAM_ARN,
        on_failure_destination_arn=DESTINATION_ARN if destination is not None else None,
        **settings,
    )
    sink = destination.append if destination is not None else None
    return ShardProcessor(
        config,
        shard_id="shardId-1",
        invoke=function,
        send_to_destination=sink,
        clock=(clock or FakeClock(1_000)).seconds,
        new_request_id=lambda: "req-1",
    )


def drain(shard: ShardProcessor, limit: int = 100) -> list[StepKind]:
    kinds: list[StepKind] = []
    for _ in range(limit):
        report = shard.step()
        if report.kind in {StepKind.IDLE, StepKind.WAITING}:
            return kinds
        kinds.append(report.kind)
    raise AssertionError("processor did not settle")


class FlakyDestination:
    """An on-failure destination that is unreachable for its first `failures` sends."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.sent: list[dict[str, Any]] = []

    def __call__(self, document: dict[str, Any]) -> None:
        if self.failures:
            self.failures -= 1
            raise ConnectionError("destination unreachable")
        self.sent.append(document)
