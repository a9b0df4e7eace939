"""Events of any size on moto: written with a payload store, published inline where they fit and as claim
checks where they do not, on both destinations, and resolved by a consumer to the same envelope."""

from __future__ import annotations

import json
from typing import Any

import pytest

from outbox.model import OutboxEvent
from outbox.payload_refs import POINTER_CLASS, SIZE_ATTRIBUTE
from outbox.s3_payloads import S3PayloadStore
from outbox_inbox.envelope import Envelope, envelope_of
from tests.integration.payloads.conftest import BUCKET, stored_key, write
from tests.integration.publisher.publisher_world import World
from tests.support.events import event
from tests.support.inbox import sns_notification, sqs_record

KB = 1024
ONE_MIB = 1_048_576


def large(aggregate_id: str, seq: int, size: int) -> OutboxEvent:
    """An event whose envelope is about `size` bytes."""
    return event(aggregate_id, seq, payload={"document": "x" * size, "note": "große Bestellung"})


def consumed(store: S3PayloadStore, body: str) -> Envelope:
    """What a consumer's `envelope_of` makes of an SQS body."""
    return envelope_of(sqs_record(body), payloads=store)


@pytest.mark.parametrize(
    "case",
    [
        (300 * KB, None, False),  # the topic's default 256 KiB: a claim check on both destinations
        (300 * KB, ONE_MIB, True),  # a topic raised to 1 MiB takes it whole; EventBridge's 256 KB does not
        (900 * KB, ONE_MIB, True),
    ],
)
def test_a_large_event_reaches_both_destinations_and_a_consumer_whole_and_in_order(
    world: World, store: S3PayloadStore, s3: Any, case: tuple[int, int | None, bool]
) -> None:
    size, topic_bytes, inline_on_sns = case
    # Given a large event between two small ones of the same order, written with a payload store
    first, big, last = event("A", 1), large("A", 2, size), event("A", 3)
    write(world, store, first, big, last)
    # whose row names its stored envelope instead of holding its payload
    row = world.row(big)
    assert "payload" not in row
    assert row["payload_ref"]["S"] == f"s3://{BUCKET}/{stored_key(s3, big)}"
    envelope_text = big.envelope_json()
    assert int(row["payload_bytes"]["N"]) == len(envelope_text.encode())
    stored = s3.get_object(Bucket=BUCKET, Key=stored_key(s3, big))["Body"].read().decode()
    assert stored == envelope_text

    # and a topic whose MaximumMessageSize is set (or left at its default), which the publisher is told
    env = {}
    if topic_bytes:
        world.sns.set_topic_attributes(
            TopicArn=world.topic_arn, AttributeName="MaximumMessageSize", AttributeValue=str(topic_bytes)
        )
        env = {"TOPIC_MAX_MESSAGE_BYTES": str(topic_bytes)}

    # When the publisher handles the stream
    response = world.invoke(world.publisher(**env), world.stream_event())

    # Then nothing is handed back, nothing is poison and every row left the table
    assert response == {"batchItemFailures": []}
    assert world.poison() == []
    assert all(world.stored(e) is None for e in (first, big, last))
    # and the topic's subscriber got the three in seq order: the large one whole, or as the extended clients'
    # pointer with its size attribute
    topic = world.drain(world.topic_queue)
    assert len(topic) == 3
    middle = topic[1]
    if inline_on_sns:
        assert middle["Body"] == envelope_text
        assert SIZE_ATTRIBUTE not in middle["MessageAttributes"]
    else:
        assert json.loads(middle["Body"]) == [
            POINTER_CLASS,
            {"s3BucketName": BUCKET, "s3Key": stored_key(s3, big)},
        ]
        assert middle["MessageAttributes"][SIZE_ATTRIBUTE] == {
            "DataType": "Number",
            "StringValue": str(len(envelope_text.encode())),
        }
    assert middle["MessageAttributes"]["event_type"]["StringValue"] == "OrderPlaced"
    # and the bus got it as a claim check that keeps every field rules match on
    bus = [json.loads(message["Body"]) for message in world.drain(world.bus_queue)]
    assert [message["detail"]["seq"] for message in bus] == [1, 2, 3]
    claim = bus[1]["detail"]
    assert "payload" not in claim
    assert claim["payload_ref"] == {"s3BucketName": BUCKET, "s3Key": stored_key(s3, big)}
    assert claim["payload_bytes"] == len(envelope_text.encode())
    assert {key: claim[key] for key in ("event_id", "event_type", "seq")} == {
        "event_id": big.event_id,
        "event_type": "OrderPlaced",
        "seq": 2,
    }
    # and a consumer sees the same envelope on every path: raw SNS, SNS notification, EventBridge
    expected = Envelope.from_document(json.loads(envelope_text))
    assert consumed(store, middle["Body"]) == expected
    assert consumed(store, sns_notification(middle["Body"])) == expected
    assert consumed(store, json.dumps(bus[1])) == expected
    assert [consumed(store, message["Body"]).seq for message in topic] == [1, 2, 3]


def test_small_events_keep_their_payload_in_the_row_and_never_touch_the_bucket(
    world: World, store: S3PayloadStore, s3: Any
) -> None:
    # Given a small event written with a payload store
    small = event("A", 1)
    write(world, store, small)

    # Then its row holds its payload, and the bucket is empty
    assert world.row(small)["payload"]["S"] == small.payload_json
    assert s3.list_objects_v2(Bucket=BUCKET).get("KeyCount", 0) == 0
