"""The poison and on-failure queues, read without losing anything: each message is either deleted on
purpose or made visible again at once.

An operator's command receives messages (hidden from other readers while it looks, for up to five minutes),
decides per message, deletes the ones it settled and hands the others back (`ChangeMessageVisibility` to 0).
Reading the queue this way leaves its messages as they were, apart from their receive counts. A queue is read
to its end (its approximate depth, allowing for SQS's sampling) or to `max_messages`, whichever comes first.
Batch calls are checked entry by entry: what SQS did not delete or hand back is counted, never assumed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from outbox.generation import generation_of
from outbox.model import RowKey

_RECEIVE_BATCH = 10
# Long enough to act on every message read (a redrive is a few calls per row); one that comes again anyway is
# recognised by its id.
_HIDDEN_FOR_S = 300
DEFAULT_MAX_MESSAGES = 10_000
_LONG_POLLS = 3
_MAX_RECEIVES = 2 * DEFAULT_MAX_MESSAGES
_LONG_POLL_S = 1


@dataclass(frozen=True)
class QueueMessage:
    message_id: str
    receipt_handle: str
    body: Any
    """The body parsed as JSON; None if it is not JSON."""


@dataclass(frozen=True)
class QueueDepth:
    visible: int
    in_flight: int

    @property
    def total(self) -> int:
        return self.visible + self.in_flight


def depth(sqs: Any, queue_url: str) -> QueueDepth:
    attributes = sqs.get_queue_attributes(
        QueueUrl=queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return QueueDepth(
        int(attributes.get("ApproximateNumberOfMessages", 0)),
        int(attributes.get("ApproximateNumberOfMessagesNotVisible", 0)),
    )


class QueueReader:
    """Receives a queue's messages for one command; `settle` deletes some and hands the rest back."""

    def __init__(self, sqs: Any, queue_url: str, *, max_messages: int = DEFAULT_MAX_MESSAGES) -> None:
        self._sqs = sqs
        self._url = queue_url
        self._max = max_messages
        self._held: dict[str, QueueMessage] = {}

    def messages(self) -> Iterator[QueueMessage]:
        """Every message of the queue, each once (up to `max_messages`). SQS's short polling samples only
        some of its servers and may answer nothing while messages wait: an empty answer before the queue's
        approximate depth is reached is retried with a short long poll, a few times. A message that comes
        again (the command took longer than its hiding) is not handed out twice; an answer of nothing new
        ends the read."""
        expected = depth(self._sqs, self._url).visible
        empty = 0
        for _ in range(_MAX_RECEIVES):
            if len(self._held) >= self._max:
                return
            received = self._sqs.receive_message(
                QueueUrl=self._url,
                MaxNumberOfMessages=min(_RECEIVE_BATCH, self._max - len(self._held)),
                VisibilityTimeout=_HIDDEN_FOR_S,
                WaitTimeSeconds=_LONG_POLL_S if empty else 0,
            ).get("Messages", [])
            fresh = [raw for raw in received if raw["MessageId"] not in self._held]
            for raw in received:
                if raw["MessageId"] in self._held:  # keep the newest receipt: only it can delete the message
                    self._held[raw["MessageId"]] = replace(
                        self._held[raw["MessageId"]], receipt_handle=raw["ReceiptHandle"]
                    )
            if received and not fresh:
                return
            if not received:
                if len(self._held) >= expected or empty >= _LONG_POLLS:
                    return
                empty += 1
                continue
            for raw in fresh:
                message = QueueMessage(raw["MessageId"], raw["ReceiptHandle"], _json(raw.get("Body", "")))
                self._held[message.message_id] = message
                yield message

    def settle(self, delete: Callable[[QueueMessage], bool]) -> Settled:
        """Delete the held messages `delete` says to, make the others visible again."""
        settled = Settled()
        held = list(self._held.values())
        self._held.clear()
        for start in range(0, len(held), _RECEIVE_BATCH):
            chunk = held[start : start + _RECEIVE_BATCH]
            gone = [message for message in chunk if delete(message)]
            kept = [message for message in chunk if message not in gone]
            if gone:
                receipts = [{"ReceiptHandle": message.receipt_handle} for message in gone]
                done = self._batch("delete_message_batch", receipts)
                settled.deleted += done
                settled.not_deleted += len(gone) - done
            if kept:
                returned = self._batch(
                    "change_message_visibility_batch",
                    [{"ReceiptHandle": m.receipt_handle, "VisibilityTimeout": 0} for m in kept],
                )
                settled.kept += len(kept)
                settled.hidden += len(kept) - returned
        return settled

    def _batch(self, operation: str, entries: list[dict[str, Any]]) -> int:
        """One batch call, checked entry by entry; the number of entries that succeeded. A failed entry is
        left as it is: its message reappears when its visibility timeout ends."""
        numbered = [{"Id": str(index), **entry} for index, entry in enumerate(entries)]
        response = getattr(self._sqs, operation)(QueueUrl=self._url, Entries=numbered)
        return len(response.get("Successful", []))


@dataclass
class Settled:
    deleted: int = 0
    not_deleted: int = 0
    """Deletions SQS refused: those messages reappear after their visibility timeout."""
    kept: int = 0
    hidden: int = 0
    """Kept messages SQS did not make visible again at once: they reappear after their visibility timeout."""


def poison_key(message: QueueMessage) -> RowKey | None:
    """The row a poison-queue message is about (outbox_publisher.poison.PoisonMessage)."""
    body = message.body
    if not isinstance(body, Mapping):
        return None
    aggregate_key, seq = body.get("aggregate_key"), body.get("seq")
    if isinstance(aggregate_key, str) and isinstance(seq, int) and not isinstance(seq, bool):
        return RowKey(aggregate_key, seq)
    return RowKey.of(body.get("row") or {})


def poison_generation(message: QueueMessage) -> int:
    """The generation of the row as it was when it was parked (0: before any redrive)."""
    body = message.body
    row = body.get("row") if isinstance(body, Mapping) else None
    return generation_of(row) if isinstance(row, Mapping) else 0


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None
