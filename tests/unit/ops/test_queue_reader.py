"""The queue reader on a queue whose messages come back while it works (their hiding ran out): each message is
handed out once, and the read ends. A hand-written fake of three SQS calls stands in for SQS here: moto cannot
make a visibility timeout expire mid-read deterministically."""

from __future__ import annotations

from typing import Any

from outbox_ops.queues import QueueReader


class RedeliveringQueue:
    """Fake SQS (receive, attributes, batch visibility): every message is visible again at every receive."""

    def __init__(self, count: int) -> None:
        self.bodies = {f"m{index}": f'{{"seq": {index}}}' for index in range(count)}
        self.receives = 0
        self._cursor = 0

    def get_queue_attributes(self, **_: Any) -> dict[str, Any]:
        return {"Attributes": {"ApproximateNumberOfMessages": str(len(self.bodies))}}

    def receive_message(self, MaxNumberOfMessages: int, **_: Any) -> dict[str, Any]:  # noqa: N803 - boto3's
        self.receives += 1
        ids = list(self.bodies)
        batch = [ids[(self._cursor + offset) % len(ids)] for offset in range(MaxNumberOfMessages)]
        self._cursor = (self._cursor + MaxNumberOfMessages) % len(ids)
        return {
            "Messages": [
                {"MessageId": id_, "ReceiptHandle": f"{id_}-{self.receives}", "Body": self.bodies[id_]}
                for id_ in batch
            ]
        }

    def change_message_visibility_batch(self, Entries: list[dict[str, Any]], **_: Any) -> dict[str, Any]:  # noqa: N803
        return {"Successful": [{"Id": entry["Id"]} for entry in Entries]}


def test_messages_that_come_again_are_handed_out_once_and_the_read_ends() -> None:
    # Given 25 messages that all come back on every receive
    queue = RedeliveringQueue(25)
    reader = QueueReader(queue, "url")

    # When the reader reads the queue
    seen = [message.message_id for message in reader.messages()]

    # Then each message came out once, all of them, and the reader stopped on its own
    assert sorted(seen) == sorted(queue.bodies)
    assert queue.receives <= 4

    # And settling hands back each message with its newest receipt
    settled = reader.settle(lambda _: False)
    assert settled.kept == 25
