"""Envelope, attributes, entry shapes and sizes (docs/contracts.md, "Published envelope"), and the backoff
policy."""

from __future__ import annotations

import json
from typing import Any

import pytest

from outbox.model import OutboxEvent
from outbox_publisher.messages import (
    ENTRY_ID,
    GROUP_ID,
    Message,
    entry_id,
    eventbridge_entry,
    eventbridge_refusal,
    eventbridge_size,
    message_group_id,
    sns_entry,
    sns_size,
)
from outbox_publisher.retry import RetryPolicy
from tests.support.events import event


def test_the_envelope_is_the_published_contract() -> None:
    # Given an event with a correlation id and a non-ASCII payload
    source = event("o-1", 3, payload={"note": "café"})

    # When its message is built
    message = Message.of(source)

    # Then the body is exactly the envelope, compact JSON
    assert json.loads(message.body) == {
        "event_id": source.event_id,
        "event_type": "OrderPlaced",
        "schema_version": 1,
        "aggregate_type": "Order",
        "aggregate_id": "o-1",
        "seq": 3,
        "occurred_at": source.occurred_at,
        "correlation_id": None,
        "payload": {"note": "café"},
    }
    assert "café" in message.body


def test_sns_entries_carry_attributes_and_fifo_ids() -> None:
    # Given a message
    message = Message.of(event("o-1", 1))

    # When it is shaped for a FIFO and a standard topic
    fifo = sns_entry(message, 3, fifo=True)
    standard = sns_entry(message, 3, fifo=False)

    # Then attributes are there for filter policies, and only FIFO has group and dedup ids
    assert fifo["Id"] == "m3"
    assert fifo["MessageAttributes"] == {
        "event_type": {"DataType": "String", "StringValue": "OrderPlaced"},
        "aggregate_type": {"DataType": "String", "StringValue": "Order"},
        "event_id": {"DataType": "String", "StringValue": message.event.event_id},
    }
    assert fifo["MessageGroupId"] == "Order#o-1"
    assert fifo["MessageDeduplicationId"] == message.event.event_id
    assert "MessageGroupId" not in standard


def test_eventbridge_entries_name_source_type_and_bus() -> None:
    # Given a message
    message = Message.of(event("o-1", 1))

    # When it is shaped for EventBridge
    entry = eventbridge_entry(message, source="shop.orders", event_bus_name="bus")

    # Then
    assert entry == {
        "Source": "shop.orders",
        "DetailType": "OrderPlaced",
        "Detail": message.body,
        "EventBusName": "bus",
    }


def test_sizes_count_utf8_bytes_of_everything_sent() -> None:
    # Given a message with multi-byte characters
    message = Message.of(event("o-1", 1, payload={"note": "é" * 10}))
    body = len(message.body.encode())

    # When sized
    # Then SNS counts the body plus attribute names, types and values; EventBridge source, type and detail
    attributes = sum(
        len(n) + len("String") + len(v)
        for n, v in [
            ("event_type", "OrderPlaced"),
            ("aggregate_type", "Order"),
            ("event_id", message.event.event_id),
        ]
    )
    assert sns_size(message) == body + attributes
    assert eventbridge_size(message, source="shop.orders") == body + len("shop.orders") + len("OrderPlaced")
    assert body > len(message.body)


@pytest.mark.parametrize(
    "row",
    [
        {},
        {"event_type": {"S": "Order.Placed_v2-x"}, "aggregate_type": {"S": "A" * 64}},
        {"event_id": {"S": "0000000A-0000-0000-0000-00000000000B"}},  # a UUID as another writer spells it
        {"aggregate_id": {"S": "ü" * 256}, "payload": {"S": '{"note":"é€😀"}'}},
        {  # trace context travels as two more attributes
            "trace_header": {
                "S": "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
            },
            "traceparent": {"S": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
        },
    ],
)
def test_the_sns_size_is_what_the_entry_it_sends_weighs(row: dict[str, Any]) -> None:
    # Given an event read from a row (sns_size counts the attributes' names and types once, as a constant)
    item = event("o-1", 1).to_item() | row
    item["aggregate_key"] = {"S": f"{item['aggregate_type']['S']}#{item['aggregate_id']['S']}"}
    message = Message.of(OutboxEvent.from_item(item))
    # When the entry is built / Then its body and attributes, in UTF-8 bytes, are what sns_size says
    entry = sns_entry(message, 0, fifo=False)
    attributes = entry["MessageAttributes"].items()
    weighed = sum(len(f"{n}{v['DataType']}{v['StringValue']}".encode()) for n, v in attributes)
    assert sns_size(message) == len(entry["Message"].encode()) + weighed


def test_entry_ids_are_valid_batch_ids() -> None:
    # Given positions 0..9
    # Then each id matches the documented pattern and is unique
    assert all(ENTRY_ID.match(entry_id(position)) for position in range(10))
    assert len({entry_id(position) for position in range(10)}) == 10


def test_backoff_is_full_jitter_capped_exponential() -> None:
    # Given a policy of 100 ms base and 1 s cap
    policy = RetryPolicy(base_delay_ms=100, max_delay_ms=1000)

    # When delays are drawn at the top of the jitter range
    # Then they double per attempt until the cap, and the bottom of the range is zero
    assert [policy.delay_ms(n, lambda: 0.999) for n in range(1, 7)] == pytest.approx(
        [99.9, 199.8, 399.6, 799.2, 999, 999]
    )
    assert policy.delay_ms(3, lambda: 0.0) == 0


def test_a_policy_rejects_nonsense() -> None:
    # Given impossible settings
    # Then they are refused
    with pytest.raises(ValueError, match="invalid retry policy"):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError, match="invalid retry policy"):
        RetryPolicy(base_delay_ms=500, max_delay_ms=100)


@pytest.mark.parametrize("aggregate_id", ["x" * 200, "josé", "with space"])
def test_fifo_group_ids_stay_valid_for_any_aggregate_id_the_row_contract_allows(aggregate_id: str) -> None:
    # Given two events of an aggregate whose key is not a valid group id (too long, non-ASCII, a space),
    # and an event of another aggregate
    first, second = event(aggregate_id, 1), event(aggregate_id, 2)
    other = event(aggregate_id + "2", 1)

    # When they are shaped for a FIFO topic
    groups = [sns_entry(Message.of(e), 0, fifo=True)["MessageGroupId"] for e in (first, second, other)]

    # Then every group id is one SNS accepts, one aggregate keeps one group, and aggregates stay apart
    assert all(GROUP_ID.fullmatch(group) for group in groups)
    assert groups[0] == groups[1]
    assert groups[0] != groups[2]


def test_a_valid_aggregate_key_is_its_own_group_id() -> None:
    # Given an aggregate key SNS accepts as it is
    # When its group id is derived
    # Then it is the key itself (docs/contracts.md, "Published envelope")
    assert message_group_id("Order#5d0c-ab") == "Order#5d0c-ab"


@pytest.mark.parametrize(
    "payload",
    [
        '{"n":1}',
        '{"n":9223372036854775807,"m":-9223372036854775808}',
        '{"n":9223372036854775808}',
        '{"n":-9223372036854775809}',
        '{"n":1.2345678901234567890123}',
        '{"n":12345678901234567890e-5}',
        '{"list":[1,[2,{"deep":99999999999999999999}]]}',
        '{"text":"12345678901234567890"}',
        '{"n":1e400}',
        '{"n":0.0000000000000000001}',
    ],
)
@pytest.mark.parametrize("seq", ["1", "9" * 38])
def test_the_eventbridge_check_of_the_payload_text_agrees_with_walking_the_payload(
    payload: str, seq: str
) -> None:
    # Given an event read from its row (a seq of 38 digits puts a long run in the envelope, not the payload)
    item = event("o-1", 1).to_item() | {"payload": {"S": payload}, "seq": {"N": seq}}
    read = OutboxEvent.from_item(item)
    # When checked with the payload's text, the envelope's, or no text (the walk) / Then the same verdict
    walked = eventbridge_refusal(read)
    assert eventbridge_refusal(read, read.payload_json) == walked
    assert eventbridge_refusal(read, read.envelope_json()) == walked
