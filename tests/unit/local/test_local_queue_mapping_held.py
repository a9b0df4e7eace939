"""A message the queue mapping holds for its batching window and that SQS hands out again (its visibility
ran out meanwhile) goes to the function once, with the receipt handle that can still delete it."""

from __future__ import annotations

from typing import Any

from outbox_local.invocation import InvocationResult
from outbox_local.queue_mapping import QueueMappingRunner, QueueMappingSettings
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
