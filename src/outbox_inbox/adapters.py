"""AWS adapters of the inbox: its reads on DynamoDB and the dead-letter queue on SQS."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, NamedTuple, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from outbox.aws_errors import error_code
from outbox.dynamodb import call
from outbox.limits import Item
from outbox_inbox.errors import DeadLetterError

REASON_ATTRIBUTE: Final = "inbox_reason"
CONSUMER_ATTRIBUTE: Final = "inbox_consumer"
SOURCE_MESSAGE_ATTRIBUTE: Final = "inbox_source_message_id"


class DynamoDBInboxReader:
    def __init__(self, client: Any) -> None:
        self._client = client

    def get(self, table_name: str, key: Item) -> Item | None:
        response = call(
            "GetItem", self._client.get_item, TableName=table_name, Key=dict(key), ConsistentRead=True
        )
        item: Item | None = response.get("Item")
        return item


class DeadLetter(NamedTuple):
    """A message the consumer gives up on: its body exactly as received, and why (no payload data)."""

    body: str
    reason: str
    source_message_id: str
    group_id: str | None = None
    """The message group, for a FIFO dead-letter queue."""


class DeadLetters(Protocol):
    """Port: where a consumer puts what it will never apply. `send` returns only once the queue has it."""

    def send(self, letter: DeadLetter) -> None: ...


class SqsDeadLetters:
    """The consumer's own dead-letter queue (the one its queue's redrive policy names), written directly so
    that each message carries the reason the inbox gave it up, as message attributes."""

    def __init__(self, client: Any, queue_url: str, consumer: str) -> None:
        self._client = client
        self._queue_url = queue_url
        self._consumer = consumer
        self._fifo = queue_url.endswith(".fifo")

    def send(self, letter: DeadLetter) -> None:
        request: dict[str, Any] = {
            "QueueUrl": self._queue_url,
            "MessageBody": letter.body,
            "MessageAttributes": _attributes(
                {
                    REASON_ATTRIBUTE: letter.reason,
                    CONSUMER_ATTRIBUTE: self._consumer,
                    SOURCE_MESSAGE_ATTRIBUTE: letter.source_message_id,
                }
            ),
        }
        if self._fifo:
            request["MessageGroupId"] = letter.group_id or letter.source_message_id
            # A retried send of the same message is deduplicated (for 5 minutes) instead of doubled.
            request["MessageDeduplicationId"] = letter.source_message_id
        try:
            self._client.send_message(**request)
        except ClientError as error:
            raise DeadLetterError(
                f"the dead-letter queue refused the message ({error_code(error)})"
            ) from error
        except BotoCoreError as error:
            raise DeadLetterError(f"the dead-letter queue did not answer: {type(error).__name__}") from error


def _attributes(values: Mapping[str, str]) -> dict[str, dict[str, str]]:
    return {name: {"DataType": "String", "StringValue": value} for name, value in values.items() if value}
