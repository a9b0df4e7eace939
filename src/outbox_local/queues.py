"""Reading an SQS queue to the end: what the demo, the tests and a developer's scripts all need."""

from __future__ import annotations

from typing import Any

SQS_MAX_MESSAGES_PER_RECEIVE = 10


def receive_all(sqs: Any, queue_url: str, *, wait_s: int = 0, **receive_options: Any) -> list[dict[str, Any]]:
    """Receive and delete every message the queue has now, in the order SQS hands them out.

    `wait_s` long-polls the first receive only (wait for the next message to arrive, then take
    what is there); `receive_options` go to ReceiveMessage as they are (e.g. attribute names).
    """
    messages: list[dict[str, Any]] = []
    while True:
        page = sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=SQS_MAX_MESSAGES_PER_RECEIVE,
            WaitTimeSeconds=wait_s,
            **receive_options,
        ).get("Messages", [])
        if not page:
            return messages
        for message in page:
            messages.append(message)
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
        wait_s = 0
