"""What the queue mapping holds for its batching window: a message SQS hands out again (its visibility ran
out meanwhile) goes to the function once, with the receipt handle that can still delete it; and a batch
stops at Lambda's 6 MB invocation payload."""

from __future__ import annotations

import json
from typing import Any

import boto3

from outbox_local.invocation import InvocationResult
from outbox_local.queue_mapping import QueueMappingRunner, QueueMappingSettings
from outbox_local.stream_mapping import MAX_INVOCATION_PAYLOAD_BYTES
from tests.support.clock import FakeClock

QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:work"


class RedeliveringQueue:
    """A hand-written stand-in for SQS (moto keeps visibility in real time, which a unit test cannot wait
    out): it hands the same message out twice, with a new receipt handle each time, then nothing."""

    def __init__(self) -> None:
        self.handouts = 0
        self.deleted: list[str] = []

    def receive_message(self, **_: Any) -> dict[str, Any]:
        self.handouts += 1
        if self.handouts > 2:
            return {}
        message = {
            "MessageId": "m-1",
            "ReceiptHandle": f"handle-{self.handouts}",
            "Body": "{}",
            "MD5OfBody": "99914b932bd37a50b983c5e7c90ae93b",
            "Attributes": {"ApproximateReceiveCount": str(self.handouts)},
        }
        return {"Messages": [message]}

    def delete_message_batch(self, **arguments: Any) -> dict[str, Any]:
        self.deleted.extend(entry["ReceiptHandle"] for entry in arguments["Entries"])
        return {"Successful": [{"Id": entry["Id"]} for entry in arguments["Entries"]]}


def test_a_held_message_handed_out_again_is_invoked_once_with_its_newest_receipt_handle() -> None:
    # Given a mapping with a 5 s batching window on a queue that hands the message out again
    clock = FakeClock(1_000)
    queue = RedeliveringQueue()
    events: list[dict[str, Any]] = []

    def invoke(event: dict[str, Any]) -> InvocationResult:
        events.append(event)
        return InvocationResult(payload=None)

    settings = QueueMappingSettings(
        function_arn="arn:aws:lambda:us-east-1:123456789012:function:f",
        queue_arn=QUEUE_ARN,
        queue_url="http://localhost/123456789012/work",
        maximum_batching_window_s=5,
    )
    runner = QueueMappingRunner("WorkMapping", settings, sqs_client=queue, invoke=invoke, clock=clock.seconds)
    # When it polls (holding it), polls again after its window (SQS hands it out anew), and invokes
    runner.poll_once()
    clock.advance(5)
    runner.poll_once()
    # Then the function got it once, and the handle deleted is the newest
    assert [[record["receiptHandle"] for record in event["Records"]] for event in events] == [["handle-2"]]
    assert queue.deleted == ["handle-2"]


def test_a_batch_is_cut_before_lambdas_6_mb_payload_limit_and_a_full_one_does_not_wait_for_the_window(
    aws: None,
) -> None:
    # Given 40 messages of 200 KB (8 MB in all) on a moto queue, and a mapping of BatchSize 100 with a 5 s
    # batching window
    sqs = boto3.client("sqs", region_name="us-east-1")
    url = sqs.create_queue(QueueName="work")["QueueUrl"]
    bodies = [f"{n:03d}".ljust(200_000, "x") for n in range(40)]
    for body in bodies:
        sqs.send_message(QueueUrl=url, MessageBody=body)
    clock = FakeClock(1_000)
    events: list[dict[str, Any]] = []

    def invoke(event: dict[str, Any]) -> InvocationResult:
        events.append(event)
        return InvocationResult(payload=None)

    settings = QueueMappingSettings(
        function_arn="arn:aws:lambda:us-east-1:123456789012:function:f",
        queue_arn=QUEUE_ARN,
        queue_url=url,
        batch_size=100,
        maximum_batching_window_s=5,
    )
    runner = QueueMappingRunner("WorkMapping", settings, sqs_client=sqs, invoke=invoke, clock=clock.seconds)

    # When it polls once at once, then again once the window has passed
    runner.poll_once()
    invoked_at_once = len(events)
    clock.advance(5)
    runner.poll_once()

    # Then the first batch went without waiting (it reached 6 MB), every payload is within 6 MB, and every
    # message reached the function once, in the order received
    assert invoked_at_once == 1
    assert len(events) == 2
    assert all(len(json.dumps(event).encode()) <= MAX_INVOCATION_PAYLOAD_BYTES for event in events)
    received = [record["body"] for event in events for record in event["Records"]]
    assert received == bodies
    assert len(events[0]["Records"]) > 1


def test_on_a_fifo_queue_what_the_6_mb_cut_held_back_never_goes_past_a_failed_message(aws: None) -> None:
    # Given ten 800 KB messages of one group on a FIFO queue (8 MB: the first batch is cut after seven), and
    # a function that fails the batch's third message
    sqs = boto3.client("sqs", region_name="us-east-1")
    url = sqs.create_queue(
        QueueName="work.fifo",
        Attributes={
            "FifoQueue": "true",
            "ContentBasedDeduplication": "true",
            "MaximumMessageSize": "1048576",
        },
    )["QueueUrl"]
    bodies = [f"{n:03d}".ljust(400_000, "é") for n in range(10)]  # 2 bytes per "é" in UTF-8
    for body in bodies:
        sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId="order-1")
    events: list[dict[str, Any]] = []

    def invoke(event: dict[str, Any]) -> InvocationResult:
        events.append(event)
        failed = event["Records"][2]["messageId"]
        return InvocationResult(payload={"batchItemFailures": [{"itemIdentifier": failed}]})

    settings = QueueMappingSettings(
        function_arn="arn:aws:lambda:us-east-1:123456789012:function:f",
        queue_arn="arn:aws:sqs:us-east-1:123456789012:work.fifo",
        queue_url=url,
        report_batch_item_failures=True,
    )
    runner = QueueMappingRunner(
        "OrderedMapping", settings, sqs_client=sqs, invoke=invoke, clock=FakeClock().seconds
    )

    # When it polls twice
    runner.poll_once()
    runner.poll_once()

    # Then the first batch was cut below 6 MB of compact UTF-8 (the size Lambda counts), and nothing after
    # the failed third message reached the function: the held-back rest waits for SQS to hand it out again
    assert len(events) == 1
    assert 1 < len(events[0]["Records"]) < len(bodies)
    compact = json.dumps(events[0], ensure_ascii=False, separators=(",", ":")).encode()
    assert len(compact) <= MAX_INVOCATION_PAYLOAD_BYTES
    assert runner.stats().held == 0
