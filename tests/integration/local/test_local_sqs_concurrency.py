"""Concurrent batches on an SQS queue mapping (`outbox_local.queue_mapping`), as Lambda scales its pollers: on
a standard queue several batches in flight at once, up to the mapping's concurrency; on a FIFO queue one batch
in flight per message group, different groups at once. Against moto's SQS behind the runtime's endpoint, with
a mapping runner of the test's own whose invocations meet at a barrier: a test passes only if the batches
were in flight together (a barrier nobody else reaches fails the invocation after its safety timeout, it is
never waited out when the code is right). Nothing sleeps.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from outbox_local.invocation import InvocationResult
from outbox_local.queue_mapping import QueueMappingRunner, QueueMappingSettings
from outbox_local.runtime import LocalRuntime
from outbox_local.stream_mapping import StepKind
from tests.support.local_templates import options, queue_template, write_template

SAFETY_TIMEOUT_S = 30.0
"""Only so that a broken mapping fails the test instead of hanging it."""


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[LocalRuntime]:
    with LocalRuntime(options(write_template(tmp_path, queue_template()))) as started:
        yield started


class Meeting:
    """An invocation that records what is in flight and waits at a barrier for `parties` invocations."""

    def __init__(self, parties: int) -> None:
        self.barrier = threading.Barrier(parties, timeout=SAFETY_TIMEOUT_S)
        self._lock = threading.Lock()
        self.in_flight: Counter[str] = Counter()
        self.most_in_flight = 0
        self.most_per_group = 0
        self.bodies_by_group: dict[str, list[str]] = {}

    def __call__(self, event: dict[str, Any]) -> InvocationResult:
        groups = [str(record["attributes"].get("MessageGroupId")) for record in event["Records"]]
        with self._lock:
            self.in_flight.update(set(groups))
            self.most_in_flight = max(self.most_in_flight, sum(self.in_flight.values()))
            self.most_per_group = max(self.most_per_group, *self.in_flight.values())
            for group, record in zip(groups, event["Records"], strict=True):
                self.bodies_by_group.setdefault(group, []).append(record["body"])
        try:
            self.barrier.wait()
        finally:
            with self._lock:
                self.in_flight.subtract(set(groups))
        return InvocationResult(payload={"batchItemFailures": []})


def runner(
    runtime: LocalRuntime, queue: str, invoke: Meeting, *, concurrency: int, batch_size: int = 1
) -> QueueMappingRunner:
    url = runtime.outputs[queue]
    arn = runtime.client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
    settings = QueueMappingSettings(
        function_arn="arn:aws:lambda:us-east-1:123456789012:function:test",
        queue_arn=arn["Attributes"]["QueueArn"],
        queue_url=url,
        batch_size=batch_size,
        report_batch_item_failures=True,
    )
    return QueueMappingRunner(
        "Concurrent",
        settings,
        sqs_client=runtime.client("sqs"),
        invoke=invoke,
        clock=runtime.clock,
        max_concurrent_batches=concurrency,
    )


def drain(mapping: QueueMappingRunner) -> list[list[StepKind]]:
    """Poll until the mapping is idle; the kinds of each poll's reports."""
    rounds: list[list[StepKind]] = []
    for _ in range(100):
        kinds = [report.kind for report in mapping.poll_once()]
        if kinds == [StepKind.IDLE]:
            return rounds
        rounds.append(kinds)
    raise AssertionError("the mapping never went idle")


def test_a_standard_queue_has_several_batches_in_flight_at_once(runtime: LocalRuntime) -> None:
    # Given three messages on the standard queue and a mapping of one message a batch, three at once
    sqs = runtime.client("sqs")
    for body in ("a", "b", "c"):
        sqs.send_message(QueueUrl=runtime.outputs["WorkUrl"], MessageBody=body)
    meeting = Meeting(parties=3)
    mapping = runner(runtime, "WorkUrl", meeting, concurrency=3)

    # When it polls once
    reports = mapping.poll_once()

    # Then the three batches were in flight together (each waited for the other two), and all were deleted
    assert [report.kind for report in reports] == [StepKind.SUCCEEDED] * 3
    assert meeting.most_in_flight == 3
    assert mapping.stats().deleted_messages == 3
    assert drain(mapping) == []


def test_a_standard_queue_never_has_more_batches_in_flight_than_its_concurrency(
    runtime: LocalRuntime,
) -> None:
    # Given five messages and a mapping allowed two batches at once
    sqs = runtime.client("sqs")
    for body in "abcde":
        sqs.send_message(QueueUrl=runtime.outputs["WorkUrl"], MessageBody=body)
    meeting = Meeting(parties=2)
    mapping = runner(runtime, "WorkUrl", meeting, concurrency=2)

    # When the first two polls run (the barrier of two passes for each pair)
    first, second = mapping.poll_once(), mapping.poll_once()

    # Then each poll had two batches in flight, never more
    assert len(first) == len(second) == 2
    assert meeting.most_in_flight == 2
    assert mapping.stats().deleted_messages == 4


def test_a_fifo_queue_has_one_batch_in_flight_per_group_and_groups_run_concurrently(
    runtime: LocalRuntime,
) -> None:
    # Given three messages in each of two groups on the FIFO queue, and a mapping of one message a batch
    sqs = runtime.client("sqs")
    for index in range(3):
        for group in ("A", "B"):
            sqs.send_message(
                QueueUrl=runtime.outputs["OrderedUrl"],
                MessageBody=f"{group}{index}",
                MessageGroupId=group,
                MessageDeduplicationId=f"{group}{index}",
            )
    meeting = Meeting(parties=2)
    mapping = runner(runtime, "OrderedUrl", meeting, concurrency=4)

    # When the mapping runs until the queue is empty
    rounds = drain(mapping)

    # Then each poll had one batch of each group in flight together (never two of one group, even with room
    # for four), and each group was processed in its order
    assert rounds == [[StepKind.SUCCEEDED] * 2] * 3
    assert meeting.most_per_group == 1
    assert meeting.most_in_flight == 2
    assert meeting.bodies_by_group == {"A": ["A0", "A1", "A2"], "B": ["B0", "B1", "B2"]}


def test_what_a_6_mb_cut_holds_back_of_a_fifo_group_waits_for_the_batch_of_that_group(
    runtime: LocalRuntime,
) -> None:
    # Given eight messages of 900 KB in one group: a batch of ten would pass 6 MB, so it is cut
    sqs = runtime.client("sqs")
    for index in range(8):
        sqs.send_message(
            QueueUrl=runtime.outputs["OrderedUrl"],
            MessageBody=f"{index}" + "x" * 900_000,
            MessageGroupId="A",
            MessageDeduplicationId=f"big-{index}",
        )
    meeting = Meeting(parties=1)
    mapping = runner(runtime, "OrderedUrl", meeting, concurrency=4, batch_size=10)

    # When the mapping runs until the queue is empty
    rounds = drain(mapping)

    # Then the cut-off rest went in a batch of its own after the first, never beside it
    assert rounds == [[StepKind.SUCCEEDED], [StepKind.SUCCEEDED]]
    assert meeting.most_per_group == 1
    assert [body[0] for body in meeting.bodies_by_group["A"]] == [str(index) for index in range(8)]


def test_the_runtime_sets_a_queue_mappings_concurrency_from_the_function_and_its_scaling_config(
    tmp_path: Path,
) -> None:
    # Given worker environments (three per function) and one mapping with MaximumConcurrency 2
    body = queue_template(ordered={"BatchSize": 10, "ScalingConfig": {"MaximumConcurrency": 2}})

    # When the runtime starts
    with LocalRuntime(options(write_template(tmp_path, body), max_environments=3)) as runtime:
        concurrency = {mapping.name: mapping.max_concurrent_batches for mapping in runtime.queue_mappings}

    # Then the one without a ScalingConfig may use the function's three, the other two
    assert concurrency == {"WorkMapping": 3, "OrderedMapping": 2}


def test_in_process_a_queue_mapping_has_one_batch_in_flight(runtime: LocalRuntime) -> None:
    assert {mapping.max_concurrent_batches for mapping in runtime.queue_mappings} == {1}
