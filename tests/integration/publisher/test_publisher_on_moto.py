"""The publisher end to end on moto: real stream records in, real SNS/EventBridge/SQS deliveries out."""

from __future__ import annotations

import json
from typing import Any

import pytest

from outbox.model import OutboxEvent
from tests.integration.publisher.publisher_world import (
    DynamoDBClientFailingWrites,
    EventsClientFailingCalls,
    EventsClientFailingEntries,
    SnsClientFailingEvents,
    SqsClientUnavailable,
    World,
    build_world,
)
from tests.support.aws import Tables
from tests.support.clock import START
from tests.support.events import event


def sequence_numbers(lambda_event: dict[str, Any]) -> list[str]:
    return [record["dynamodb"]["SequenceNumber"] for record in lambda_event["Records"]]


def failures(response: dict[str, Any]) -> list[str]:
    return [item["itemIdentifier"] for item in response["batchItemFailures"]]


def test_events_arrive_on_topic_and_bus_exactly_as_the_contract_says(world: World) -> None:
    # Given two orders with interleaved events written by the library
    a1, b1, a2, b2, a3 = (
        event("A", 1),
        event("B", 1),
        event("A", 2, event_type="OrderPaid"),
        event("B", 2),
        event("A", 3),
    )
    world.write(a1, b1, a2, b2, a3)
    stream_event = world.stream_event()

    # When the publisher handles the stream batch
    response = world.invoke(world.publisher(), stream_event)

    # Then nothing is handed back
    assert response == {"batchItemFailures": []}
    # and the topic's subscriber got every envelope exactly once, per aggregate in seq order
    topic = world.drain(world.topic_queue)
    envelopes = [json.loads(message["Body"]) for message in topic]
    assert envelopes == [e.envelope() for e in (a1, b1, a2, b2, a3)]
    # with the filterable attributes
    assert [
        {name: value["StringValue"] for name, value in message["MessageAttributes"].items()}
        for message in topic
    ] == [
        {"event_type": e.event_type, "aggregate_type": "Order", "event_id": e.event_id}
        for e in (a1, b1, a2, b2, a3)
    ]
    # and the bus rule's queue got the same envelopes as `detail`, with source and detail-type
    bus = [json.loads(message["Body"]) for message in world.drain(world.bus_queue)]
    assert [message["detail"] for message in bus] == [e.envelope() for e in (a1, b1, a2, b2, a3)]
    assert {message["source"] for message in bus} == {"shop.orders"}
    assert [message["detail-type"] for message in bus] == [e.event_type for e in (a1, b1, a2, b2, a3)]
    # and every row is PUBLISHED with its TTL, out of the pending index
    for e in (a1, b1, a2, b2, a3):
        row = world.row(e)
        assert row["status"] == {"S": "PUBLISHED"}
        assert row["published_at"] == {"S": "2026-11-29T12:00:00.000Z"}
        assert row["expires_at"] == {"N": str(int(START.timestamp()) + 7 * 86_400)}
        assert row["attempts"] == {"N": "1"}
        assert "pending_shard" not in row


def test_marking_records_and_other_changes_are_skipped_and_counted(world: World) -> None:
    # Given a published batch, whose marking produced MODIFY records on the stream
    first = event("A", 1)
    world.write(first)
    world.invoke(world.publisher(), world.stream_event())
    world.drain(world.topic_queue)
    world.drain(world.bus_queue)
    # and a row removed (as TTL would)
    world.dynamodb.delete_item(
        TableName=world.tables.outbox, Key={"aggregate_key": {"S": first.aggregate_key}, "seq": {"N": "1"}}
    )
    later = world.stream_event(skip=1)
    assert [record["eventName"] for record in later["Records"]] == ["MODIFY", "REMOVE"]

    # When the publisher gets those records
    response = world.invoke(world.publisher(), later)

    # Then nothing is published, nothing is handed back
    assert response == {"batchItemFailures": []}
    assert world.topic_envelopes() == []
    assert world.bus_envelopes() == []


def test_a_fifo_topic_gets_group_and_dedup_ids(tables: Tables, dynamodb: Any) -> None:
    # Given a FIFO topic and two events of one aggregate
    world = build_world(tables, dynamodb, fifo=True)
    a1, a2 = event("A", 1), event("A", 2)
    world.write(a1, a2)

    # When published
    response = world.invoke(world.publisher(EVENT_BUS_NAME="", EVENT_SOURCE=""), world.stream_event())

    # Then the FIFO subscriber got them in order, grouped by aggregate
    assert response == {"batchItemFailures": []}
    messages = world.sqs.receive_message(
        QueueUrl=world.topic_queue, MaxNumberOfMessages=10, AttributeNames=["All"]
    )["Messages"]
    assert [json.loads(m["Body"])["event_id"] for m in messages] == [a1.event_id, a2.event_id]
    assert {m["Attributes"]["MessageGroupId"] for m in messages} == {"Order#A"}


def test_a_throttled_entry_in_the_middle_of_a_put_events_batch_is_retried(world: World) -> None:
    # Given five orders, and EventBridge throttling the 3rd entry of the first PutEvents once
    events = [event(f"o-{n}", 1) for n in range(5)]
    world.write(*events)
    faulty = EventsClientFailingEntries(
        world.events, lambda position, _: position == 2, "ThrottlingException"
    )

    # When the batch is handled
    response = world.invoke(world.publisher(events_client=faulty), world.stream_event())

    # Then only that entry was sent again, after a backoff, and every event arrived once
    assert response == {"batchItemFailures": []}
    assert faulty.calls == [[e.event_id for e in events], [events[2].event_id]]
    assert world.sleep.delays == [0.05]
    assert sorted(e["event_id"] for e in world.bus_envelopes()) == sorted(e.event_id for e in events)
    assert [e["event_id"] for e in world.topic_envelopes()] == [e.event_id for e in events]
    assert world.row(events[2])["attempts"] == {"N": "2"}


def test_a_whole_put_events_call_failure_is_retried(world: World) -> None:
    # Given EventBridge failing the first two calls with a 500
    events = [event(f"o-{n}", 1) for n in range(3)]
    world.write(*events)
    faulty = EventsClientFailingCalls(world.events, "InternalException", 500, times=2)

    # When the batch is handled
    response = world.invoke(world.publisher(events_client=faulty), world.stream_event())

    # Then the third call went through and each event arrived once
    assert response == {"batchItemFailures": []}
    assert faulty.calls == 3
    assert [e["event_id"] for e in world.bus_envelopes()] == [e.event_id for e in events]


def test_a_whole_call_failure_that_outlasts_the_retries_hands_back_the_whole_batch(world: World) -> None:
    # Given EventBridge failing every call
    events = [event(f"o-{n}", 1) for n in range(3)]
    world.write(*events)
    stream_event = world.stream_event()
    faulty = EventsClientFailingCalls(world.events, "ThrottlingException", 400, times=1000)

    # When the batch is handled
    response = world.invoke(world.publisher(events_client=faulty), stream_event)

    # Then every record is reported (Lambda retries from the first) and the rows stay PENDING
    assert failures(response) == sequence_numbers(stream_event)
    assert faulty.calls == 5
    assert world.bus_envelopes() == []
    assert all(world.row(e)["status"] == {"S": "PENDING"} for e in events)


def test_failure_on_the_3rd_of_10_records_reports_3_to_10_and_publishes_none_after_it(world: World) -> None:
    # Given ten events of one order, the 3rd always failing on SNS (service fault)
    events = [event("A", seq) for seq in range(1, 11)]
    world.write(*events)
    stream_event = world.stream_event()
    faulty = SnsClientFailingEvents(world.sns, {events[2].event_id})

    # When the batch is handled
    response = world.invoke(
        world.publisher(sns_client=faulty, EVENT_BUS_NAME="", EVENT_SOURCE=""), stream_event
    )

    # Then records 3..10 are reported, 1..2 are not
    assert failures(response) == sequence_numbers(stream_event)[2:]
    # and only 1..2 were published, 4..10 never were
    assert [e["event_id"] for e in world.topic_envelopes()] == [e.event_id for e in events[:2]]
    assert faulty.published == [e.event_id for e in events[:2]]
    # and only 1..2 are marked
    assert [world.row(e)["status"]["S"] for e in events] == ["PUBLISHED"] * 2 + ["PENDING"] * 8


def test_redelivery_after_a_failure_publishes_the_rest_in_order_without_duplicates(world: World) -> None:
    # Given a batch whose 3rd record failed, reported from there
    events = [event("A", seq) for seq in range(1, 6)]
    world.write(*events)
    stream_event = world.stream_event()
    faulty = SnsClientFailingEvents(world.sns, {events[2].event_id})
    first = world.invoke(world.publisher(sns_client=faulty, EVENT_BUS_NAME="", EVENT_SOURCE=""), stream_event)
    reported = failures(first)

    # When Lambda re-sends from the lowest reported sequence number, and SNS has recovered
    retry_event = {
        "Records": [r for r in stream_event["Records"] if r["dynamodb"]["SequenceNumber"] >= reported[0]]
    }
    second = world.invoke(world.publisher(EVENT_BUS_NAME="", EVENT_SOURCE=""), retry_event)

    # Then the subscriber saw 1..5 in order, each once
    assert second == {"batchItemFailures": []}
    assert [e["seq"] for e in world.topic_envelopes()] == [1, 2, 3, 4, 5]


def bad_rows() -> dict[str, dict[str, Any]]:
    """One row per poison kind that needs no destination's help."""
    not_json = event("bad-json", 1).to_item() | {"payload": {"S": "{oops"}}
    missing = {k: v for k, v in event("missing", 1).to_item().items() if k != "event_id"}
    no_route = event("p-1", 1, aggregate_type="Payment", event_type="PaymentTaken").to_item()
    too_large = event("huge", 1, payload={"blob": "x" * 300_000}).to_item()
    return {"not_json": not_json, "missing": missing, "no_route": no_route, "too_large": too_large}


def test_each_poison_kind_lands_whole_in_the_poison_queue_and_the_batch_goes_on(world: World) -> None:
    # Given good events around rows of every poison kind, and routes for Orders only
    good = [event(f"g-{n}", 1) for n in range(3)]
    rows = bad_rows()
    world.write(good[0])
    world.put_raw(rows["not_json"])
    world.put_raw(rows["missing"])
    world.write(good[1])
    world.put_raw(rows["no_route"])
    world.put_raw(rows["too_large"])
    world.write(good[2])
    routes = json.dumps(
        {"routes": [{"aggregate_type": "Order", "destinations": ["sns", "eventbridge"]}], "default": []}
    )

    # When the batch is handled
    response = world.invoke(world.publisher(OUTBOX_ROUTES=routes), world.stream_event())

    # Then no record is handed back and every good event is published
    assert response == {"batchItemFailures": []}
    assert [e["event_id"] for e in world.topic_envelopes()] == [e.event_id for e in good]
    assert [e["event_id"] for e in world.bus_envelopes()] == [e.event_id for e in good]
    # and each bad row is in the poison queue, whole, with its reason, code and attempts
    poison = world.poison()
    assert [(p["reason"], p["error_code"]) for p in poison] == [
        ("invalid_row", "InvalidPayload"),
        ("invalid_row", "InvalidOutboxRow"),
        ("no_route", "NoRoute"),
        ("too_large", "EntryTooLarge"),
    ]
    assert [p["row"] for p in poison] == [rows[k] for k in ("not_json", "missing", "no_route", "too_large")]
    assert all(p["attempts"] == 0 for p in poison)
    assert "event_id is missing" in poison[1]["detail"]
    assert poison[0]["source"]["event_name"] == "INSERT"
    # and each bad row is FAILED with a payload-free last_error and no TTL
    for key in ("not_json", "missing", "no_route", "too_large"):
        item = world.dynamodb.get_item(
            TableName=world.tables.outbox,
            Key={"aggregate_key": rows[key]["aggregate_key"], "seq": rows[key]["seq"]},
        )["Item"]
        assert item["status"] == {"S": "FAILED"}
        assert "oops" not in item["last_error"]["S"]
        assert "xxxx" not in item["last_error"]["S"]
        assert "expires_at" not in item
        assert "pending_shard" not in item


def test_an_entry_refused_for_good_is_poison_with_its_code(world: World) -> None:
    # Given EventBridge refusing the 2nd of three entries as MalformedDetail
    events = [event(f"o-{n}", 1) for n in range(3)]
    world.write(*events)
    faulty = EventsClientFailingEntries(world.events, lambda position, _: position == 1, "MalformedDetail")

    # When the batch is handled
    response = world.invoke(world.publisher(events_client=faulty), world.stream_event())

    # Then it is poison (SNS had it already), not retried, and the others are published
    assert response == {"batchItemFailures": []}
    [poison] = world.poison()
    assert (poison["reason"], poison["error_code"], poison["attempts"]) == (
        "rejected",
        "eventbridge:MalformedDetail",
        1,
    )
    assert poison["delivered_to"] == ["sns"]
    assert poison["row"] == events[1].to_item()
    assert world.sleep.delays == []
    assert world.row(events[1])["status"] == {"S": "FAILED"}
    assert world.row(events[1])["last_error"] == {
        "S": "rejected: eventbridge:MalformedDetail: eventbridge refused the entry for good (MalformedDetail)"
    }
    assert [world.row(e)["status"]["S"] for e in (events[0], events[2])] == ["PUBLISHED", "PUBLISHED"]


def test_an_unreachable_poison_queue_hands_the_record_back(world: World) -> None:
    # Given a good event, a poison row, another good event, and no poison queue
    good1, good2 = event("g-1", 1), event("g-2", 1)
    world.write(good1)
    world.put_raw(bad_rows()["not_json"])
    world.write(good2)
    stream_event = world.stream_event()

    # When the batch is handled
    response = world.invoke(world.publisher(sqs_client=SqsClientUnavailable()), stream_event)

    # Then the poison record and the one after it are handed back, never dropped; nothing after it is sent
    assert failures(response) == sequence_numbers(stream_event)[1:]
    assert [e["event_id"] for e in world.topic_envelopes()] == [good1.event_id]
    assert world.dynamodb.get_item(
        TableName=world.tables.outbox, Key={"aggregate_key": {"S": "Order#bad-json"}, "seq": {"N": "1"}}
    )["Item"]["status"] == {"S": "PENDING"}


def test_marking_failure_after_publish_does_not_fail_the_record(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    # Given DynamoDB throttling every marking write
    events = [event("A", 1), event("B", 1)]
    world.write(*events)
    failing = DynamoDBClientFailingWrites(world.dynamodb)

    # When the batch is handled
    response = world.invoke(world.publisher(dynamodb_client=failing), world.stream_event())

    # Then the events were delivered and no record is reported
    assert response == {"batchItemFailures": []}
    assert [e["event_id"] for e in world.topic_envelopes()] == [e.event_id for e in events]
    # and the rows stay PENDING (the sweeper reconciles them), which is logged and counted
    assert failing.attempts == 1
    assert all(world.row(e)["status"] == {"S": "PENDING"} for e in events)
    warning = next(r for r in caplog.records if "left PENDING" in r.getMessage())
    assert warning.__dict__["errors"] == ["ThrottledError"]


def row_of(world: World, event: OutboxEvent) -> dict[str, Any]:
    return world.row(event)
