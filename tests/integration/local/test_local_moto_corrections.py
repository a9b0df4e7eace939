"""Where the local runtime corrects moto, on the synthesized app with the real publisher:

- a cancelled TransactWriteItems writes and announces nothing, and the runtime keeps delivering what comes
  after (outbox_local.moto_transactions). On moto as it is, the cancelled transaction's Put reached the stream
  (a phantom event) and the stream reader lost the table's later writes;
- a row with a Binary attribute reaches the publisher as Lambda sends it, base64 text (on moto as it is, the
  bytes failed every invocation's JSON encoding, the shard blocked, then the record was discarded)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from moto.dynamodb.models import DynamoDBBackend

from outbox import outputs
from outbox.model import OutboxEvent
from outbox_local.runtime import LocalRuntime, RuntimeOptions
from tests.support.synth import Synthesized


@pytest.fixture
def runtime(synthesized: Synthesized) -> Iterator[LocalRuntime]:
    with LocalRuntime(RuntimeOptions(template_path=synthesized.template_path, background=False)) as started:
        yield started


def event(aggregate_id: str, seq: int) -> OutboxEvent:
    return OutboxEvent.new(
        aggregate_type="Order",
        aggregate_id=aggregate_id,
        seq=seq,
        event_type="OrderPlaced",
        payload={"n": seq},
    )


def delivered(runtime: LocalRuntime) -> list[str]:
    sqs = runtime.client("sqs")
    queue = runtime.outputs[outputs.SAMPLE_TOPIC_CONSUMER_QUEUE_URL]
    bodies: list[str] = []
    while messages := sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10).get("Messages", []):
        for message in messages:
            bodies.append(json.loads(message["Body"])["event_id"])
            sqs.delete_message(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"])
    return bodies


def put(table: str, item: dict[str, Any], key_attribute: str = "seq") -> dict[str, Any]:
    return {
        "Put": {
            "TableName": table,
            "Item": item,
            "ConditionExpression": f"attribute_not_exists({key_attribute})",
        }
    }


def test_a_cancelled_transaction_announces_nothing_and_later_writes_are_delivered(
    runtime: LocalRuntime,
) -> None:
    # Given the outbox table and a first event, published (its row settled: it left the table), and a
    # business row another request already wrote
    dynamodb = runtime.client("dynamodb")
    table = runtime.outputs[outputs.OUTBOX_TABLE_NAME]
    orders = runtime.outputs[outputs.ORDERS_TABLE_NAME]
    first = event("tx", 1)
    dynamodb.put_item(TableName=table, Item=first.to_item())
    runtime.drain_streams()
    assert delivered(runtime) == [first.event_id]
    taken = {"pk": {"S": "Order#tx"}}
    dynamodb.put_item(TableName=orders, Item=taken)

    # When a transaction puts a second event and then fails its condition on that business row (a racing
    # writer)
    second = event("tx", 2)
    with pytest.raises(dynamodb.exceptions.TransactionCanceledException):
        dynamodb.transact_write_items(
            TransactItems=[put(table, second.to_item()), put(orders, taken, key_attribute="pk")]
        )
    runtime.drain_streams()

    # Then nothing was written and nothing announced
    assert "Item" not in dynamodb.get_item(
        TableName=table, Key={"aggregate_key": {"S": "Order#tx"}, "seq": {"N": "2"}}
    )
    assert delivered(runtime) == []

    # When the second event is then written for real
    dynamodb.transact_write_items(TransactItems=[put(table, second.to_item())])
    runtime.drain_streams()

    # Then it is delivered: the stream reader still follows the table
    assert delivered(runtime) == [second.event_id]


def test_the_correction_is_in_place_only_while_a_runtime_runs(synthesized: Synthesized) -> None:
    original = DynamoDBBackend.transact_write_items
    with LocalRuntime(RuntimeOptions(template_path=synthesized.template_path, background=False)):
        assert DynamoDBBackend.transact_write_items is not original
    assert DynamoDBBackend.transact_write_items is original


def test_a_row_with_a_binary_attribute_reaches_the_publisher_base64_encoded_and_is_published(
    runtime: LocalRuntime,
) -> None:
    # Given an outbox row another writer put with a Binary attribute (and a binary set, in a map)
    dynamodb = runtime.client("dynamodb")
    table = runtime.outputs[outputs.OUTBOX_TABLE_NAME]
    row = event("binary", 1)
    extra = {"blob": {"B": b"\\x00\\xff"}, "meta": {"M": {"sums": {"BS": [b"\\x01", b"\\x02"]}}}}
    dynamodb.put_item(TableName=table, Item={**row.to_item(), **extra})

    # When the stream mapping hands it to the publisher
    runtime.drain_streams()

    # Then the invocation succeeded (Lambda's event carries Binary as base64 text) and the event is out: its
    # row settled, which deletes it
    assert delivered(runtime) == [row.event_id]
    item = dynamodb.get_item(
        TableName=table,
        Key={"aggregate_key": {"S": "Order#binary"}, "seq": {"N": "1"}},
        ConsistentRead=True,
    )
    assert "Item" not in item
