"""Consumers under test: the inbox table as deployed, the messages AWS delivers, an order's events."""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from outbox.dynamodb import DynamoDBTransactionExecutor
from outbox.model import OutboxEvent
from outbox_inbox.adapters import DynamoDBInboxReader, SqsDeadLetters
from outbox_inbox.consumer import ConsumerSettings, InboxConsumer
from outbox_inbox.inbox import Effect, Inbox, InboxSettings, Ordering, no_effect
from tests.support.clock import START, FakeClock
from tests.support.events import event

QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:consumer"
FIFO_QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:consumer.fifo"
_message_numbers = itertools.count(1)


def create_inbox_table(dynamodb: Any, name: str = "inbox") -> str:
    """A consumer's table as deployed (outbox_cdk.consumers): partition key `pk`, TTL `expires_at`."""
    dynamodb.create_table(
        TableName=name,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
    )
    dynamodb.update_time_to_live(
        TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires_at"}
    )
    return name


def order_events(order_id: str = "o-1") -> list[OutboxEvent]:
    """An order's first five events: placed, confirmed, then three events of a type consumers ignore."""
    placed = event(
        order_id,
        1,
        payload={
            "order_id": order_id,
            "customer_id": "c-1",
            "currency": "EUR",
            "total": "19.98",
            "lines": [{"sku": "sku-1", "quantity": 2, "unit_price": "9.99"}],
        },
    )
    confirmed = event(
        order_id,
        2,
        event_type="OrderConfirmed",
        payload={"order_id": order_id, "previous_status": "PLACED", "status": "CONFIRMED", "version": 2},
    )
    noted = [
        event(order_id, seq, event_type="OrderNoted", payload={"order_id": order_id, "note": seq})
        for seq in (3, 4, 5)
    ]
    return [placed, confirmed, *noted]


def cancelled(order_id: str, seq: int) -> OutboxEvent:
    return event(
        order_id,
        seq,
        event_type="OrderCancelled",
        payload={"order_id": order_id, "previous_status": "CONFIRMED", "status": "CANCELLED", "version": seq},
    )


def sqs_record(
    body: str,
    *,
    first_received: datetime = START,
    queue_arn: str = QUEUE_ARN,
    group_id: str | None = None,
    message_id: str | None = None,
) -> dict[str, Any]:
    """One record of the event Lambda gives an SQS consumer, as AWS shapes it."""
    number = next(_message_numbers)
    attributes = {
        "ApproximateReceiveCount": "1",
        "SentTimestamp": str(int(first_received.timestamp() * 1000)),
        "SenderId": "AIDAEXAMPLE",
        "ApproximateFirstReceiveTimestamp": str(int(first_received.timestamp() * 1000)),
    }
    if group_id is not None:
        attributes.update(
            MessageGroupId=group_id, MessageDeduplicationId=f"dedup-{number}", SequenceNumber=str(number)
        )
    return {
        "messageId": message_id or f"00000000-0000-4000-8000-{number:012d}",
        "receiptHandle": f"handle-{number}",
        "body": body,
        "attributes": attributes,
        "messageAttributes": {},
        "md5OfBody": hashlib.md5(body.encode()).hexdigest(),  # noqa: S324 - what SQS sends
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": "us-east-1",
    }


def sns_notification(envelope_json: str) -> str:
    """An SQS body from SNS without raw message delivery."""
    return json.dumps(
        {
            "Type": "Notification",
            "MessageId": "95df01b4-ee98-5cb9-9903-4c221d41eb5e",
            "TopicArn": "arn:aws:sns:us-east-1:123456789012:events",
            "Message": envelope_json,
            "Timestamp": "2026-11-29T12:00:00.000Z",
            "SignatureVersion": "1",
            "Signature": "EXAMPLE",
            "SigningCertURL": "https://sns.us-east-1.amazonaws.com/cert.pem",
            "UnsubscribeURL": "https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe",
            "MessageAttributes": {"event_type": {"Type": "String", "Value": "OrderPlaced"}},
        }
    )


def eventbridge_event(envelope: dict[str, Any], *, time: str = "2026-11-29T12:00:00Z") -> dict[str, Any]:
    """What an EventBridge rule delivers (to a function, or as an SQS body) for a published event."""
    return {
        "version": "0",
        "id": "6a7e8feb-b491-4cf7-a9f1-bf3703467718",
        "detail-type": envelope["event_type"],
        "source": "outbox.orders",
        "account": "123456789012",
        "time": time,
        "region": "us-east-1",
        "resources": [],
        "detail": envelope,
    }


@dataclass
class Consumer:
    """A consumer on moto in process: its table, its dead-letter queue, its fake clock."""

    dynamodb: Any
    sqs: Any
    table: str
    dead_letter_url: str
    clock: FakeClock = field(default_factory=FakeClock)

    def build(
        self,
        *,
        ordering: Ordering = Ordering.STRICT,
        effect: Effect = no_effect,
        settings: ConsumerSettings | None = None,
        name: str = "summary",
        **options: Any,
    ) -> InboxConsumer:
        inbox = Inbox(
            InboxSettings(self.table, name, ordering),
            DynamoDBTransactionExecutor(self.dynamodb),
            DynamoDBInboxReader(self.dynamodb),
            clock=self.clock,
        )
        return InboxConsumer(
            inbox,
            dead_letters=SqsDeadLetters(self.sqs, self.dead_letter_url, name),
            effect=effect,
            settings=settings,
            clock=self.clock,
            **options,
        )

    def dead_letters(self) -> list[dict[str, Any]]:
        # Here, not at the top: the unit tests import this module and load no local-runtime code.
        from outbox_local.queues import receive_all

        return receive_all(self.sqs, self.dead_letter_url, MessageAttributeNames=["All"])
