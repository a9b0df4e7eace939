"""The publisher end to end on moto: real stream records in, real SNS/EventBridge/SQS deliveries out."""

from __future__ import annotations

import json
from datetime import timedelta
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
from tests.integration.publisher.sweeping import GRACE, OUT, statuses
from tests.support.aws import Tables, event_rows
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
    # and every row left the table: the table holds only what is not out yet
    assert all(world.stored(e) is None for e in (a1, b1, a2, b2, a3))
    assert event_rows(world.dynamodb, world.tables.outbox) == []


def test_settles_and_other_changes_are_skipped_and_counted(world: World) -> None:
    # Given a published batch, whose settles produced REMOVE records on the stream
    first, second = event("A", 1), event("B", 1)
    world.write(first, second)
    world.invoke(world.publisher(), world.stream_event())
    world.drain(world.topic_queue)
    world.drain(world.bus_queue)
    # and a change of a row that is not the publisher's business (a FAILED row's payload fixed)
    world.put_raw(event("C", 1).to_item() | {"status": {"S": "FAILED"}})
    world.dynamodb.update_item(
        TableName=world.tables.outbox,
        Key={"aggregate_key": {"S": "Order#C"}, "seq": {"N": "1"}},
        UpdateExpression="SET payload = :payload",
        ExpressionAttributeValues={":payload": {"S": "{}"}},
    )
    later = world.stream_event(skip=2)
    assert [record["eventName"] for record in later["Records"]] == ["REMOVE", "REMOVE", "INSERT", "MODIFY"]

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
    assert statuses(world, *events) == [OUT] * 5


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


def test_one_destination_down_is_left_to_the_sweeper_and_the_other_gets_each_event_once(
    world: World,
) -> None:
    # Given EventBridge failing every call
    events = [event(f"o-{n}", 1) for n in range(3)]
    world.write(*events)
    stream_event = world.stream_event()
    faulty = EventsClientFailingCalls(world.events, "ThrottlingException", 400, times=1000)

    # When the batch is handled
    response = world.invoke(world.publisher(events_client=faulty), stream_event)

    # Then nothing is handed back (Lambda would send SNS the same events again), SNS got each event once,
    # EventBridge was tried for one call's retries only, and each row stays PENDING recording SNS took it
    assert response == {"batchItemFailures": []}
    assert [e["event_id"] for e in world.topic_envelopes()] == [e.event_id for e in events]
    assert faulty.calls == 5
    assert world.bus_envelopes() == []
    for e in events:
        row = world.row(e)
        assert (row["status"], row["delivered_to"]) == ({"S": "PENDING"}, {"SS": ["sns"]})
        assert row["last_error"] == {"S": "eventbridge:ThrottlingException"}


def test_the_sweeper_sends_a_parked_event_only_where_it_has_not_gone(world: World) -> None:
    # Given an event SNS took while EventBridge was down, left PENDING recording it
    only = event("A", 1)
    world.write(only)
    faulty = EventsClientFailingCalls(world.events, "InternalException", 500, times=1000)
    world.invoke(world.publisher(events_client=faulty), world.stream_event())
    assert [e["event_id"] for e in world.topic_envelopes()] == [only.event_id]

    # When EventBridge is back and the sweeper runs past the grace
    world.clock.advance(GRACE + timedelta(seconds=1))
    report = world.sweep(world.sweeper())

    # Then the bus got it, SNS did not get it again, and the row left the table
    assert report.swept == 1
    assert [e["event_id"] for e in world.bus_envelopes()] == [only.event_id]
    assert world.topic_envelopes() == []
    assert world.stored(only) is None


def test_an_event_failing_on_its_only_destination_holds_the_rest_of_its_aggregate(world: World) -> None:
    # Given ten events of one order, the 3rd always failing on SNS (service fault)
    events = [event("A", seq) for seq in range(1, 11)]
    world.write(*events)
    faulty = SnsClientFailingEvents(world.sns, {events[2].event_id})

    # When the batch is handled
    response = world.invoke(
        world.publisher(sns_client=faulty, EVENT_BUS_NAME="", EVENT_SOURCE=""), world.stream_event()
    )

    # Then nothing is handed back; only 1..2 were published (4..10 held behind 3, never sent)
    assert response == {"batchItemFailures": []}
    assert [e["event_id"] for e in world.topic_envelopes()] == [e.event_id for e in events[:2]]
    assert faulty.published == [e.event_id for e in events[:2]]
    # and only 1..2 left the table: 3..10 wait PENDING for the sweeper
    assert statuses(world, *events) == [OUT] * 2 + ["PENDING"] * 8


def test_the_sweeper_publishes_what_the_stream_left_in_order_each_once(world: World) -> None:
    # Given a batch whose 3rd event failed on its only destination, 4..5 held behind it
    events = [event("A", seq) for seq in range(1, 6)]
    world.write(*events)
    faulty = SnsClientFailingEvents(world.sns, {events[2].event_id})
    world.invoke(world.publisher(sns_client=faulty, EVENT_BUS_NAME="", EVENT_SOURCE=""), world.stream_event())

    # When SNS has recovered and the sweeper runs past the grace
    world.clock.advance(GRACE + timedelta(seconds=1))
    world.sweep(world.sweeper(EVENT_BUS_NAME="", EVENT_SOURCE=""))

    # Then the subscriber saw 1..5 in order, each once, and the table is empty
    assert [e["seq"] for e in world.topic_envelopes()] == [1, 2, 3, 4, 5]
    assert statuses(world, *events) == [OUT] * 5


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
    assert statuses(world, events[0], events[2]) == [OUT, OUT]


def test_an_unreachable_poison_queue_leaves_the_row_pending_never_dropped(world: World) -> None:
    # Given a good event, a poison row, another good event, and no poison queue
    good1, good2 = event("g-1", 1), event("g-2", 1)
    world.write(good1)
    world.put_raw(bad_rows()["not_json"])
    world.write(good2)
    stream_event = world.stream_event()

    # When the batch is handled
    response = world.invoke(world.publisher(sqs_client=SqsClientUnavailable()), stream_event)

    # Then the poison row stays PENDING (the sweeper poisons it once the queue is back), never dropped, and
    # the good events went out; nothing is handed back
    assert response == {"batchItemFailures": []}
    assert [e["event_id"] for e in world.topic_envelopes()] == [good1.event_id, good2.event_id]
    assert world.dynamodb.get_item(
        TableName=world.tables.outbox, Key={"aggregate_key": {"S": "Order#bad-json"}, "seq": {"N": "1"}}
    )["Item"]["status"] == {"S": "PENDING"}
    assert len(sequence_numbers(stream_event)) == 3


def test_a_settle_failing_after_publish_does_not_fail_the_record(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    # Given DynamoDB throttling every write
    events = [event("A", 1), event("B", 1)]
    world.write(*events)
    failing = DynamoDBClientFailingWrites(world.dynamodb)

    # When the batch is handled
    response = world.invoke(world.publisher(dynamodb_client=failing), world.stream_event())

    # Then the events were delivered and no record is reported
    assert response == {"batchItemFailures": []}
    assert [e["event_id"] for e in world.topic_envelopes()] == [e.event_id for e in events]
    # and the rows stay PENDING (the sweeper reconciles them), which is logged and counted; each settle was
    # tried twice (a throttled call is sent once more)
    assert failing.attempts == 4
    assert all(world.row(e)["status"] == {"S": "PENDING"} for e in events)
    warning = next(r for r in caplog.records if "left PENDING" in r.getMessage())
    assert warning.__dict__["errors"] == ["ThrottledError"]


def row_of(world: World, event: OutboxEvent) -> dict[str, Any]:
    return world.row(event)
