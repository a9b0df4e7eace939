"""The stream layer: which records are publishable, what is left PENDING, and how a stop becomes
batchItemFailures."""

from __future__ import annotations

from typing import Any

import pytest

from outbox.errors import ThrottledError
from outbox_publisher.config import PublisherConfig
from outbox_publisher.errors import InvalidStreamEventError, StreamConfigurationError
from outbox_publisher.handler import build_publisher, handle
from outbox_publisher.routing import Destination
from tests.support.clock import FakeClock
from tests.support.events import event
from tests.support.lambda_context import FakeLambdaContext
from tests.unit.publisher.fakes import (
    FakeClaimer,
    FakeDestination,
    FakePoisonQueue,
    FakePredecessors,
    FakeUpdater,
    transient,
)

ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/outbox/stream/2026-11-29T00:00:00.000"
ENV = {
    "OUTBOX_TABLE_NAME": "outbox",
    "TOPIC_ARN": "arn:aws:sns:us-east-1:123456789012:events",
    "POISON_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/poison",
}


def record(number: int, item: dict[str, Any] | None, name: str = "INSERT", arn: str = ARN) -> dict[str, Any]:
    stream: dict[str, Any] = {"SequenceNumber": f"{number:021d}", "StreamViewType": "NEW_IMAGE"}
    if item is not None:
        stream["Keys"] = {"aggregate_key": item["aggregate_key"], "seq": item["seq"]}
        stream["NewImage"] = item
    return {
        "eventID": str(number),
        "eventName": name,
        "eventSource": "aws:dynamodb",
        "eventSourceARN": arn,
        "dynamodb": stream,
    }


def setup(predecessors: FakePredecessors | None = None) -> tuple[FakeDestination, FakePoisonQueue, Any]:
    sns = FakeDestination(Destination.SNS)
    poison = FakePoisonQueue()
    app = build_publisher(
        PublisherConfig.from_env(ENV),
        destinations={Destination.SNS: sns},
        poison_queue=poison,
        updater=FakeUpdater(),
        predecessors=predecessors or FakePredecessors(),
        claimer=FakeClaimer(),
        clock=FakeClock(),
        sleep=lambda _: None,
        random=lambda: 0.0,
    )
    return sns, poison, app


def test_only_inserts_of_pending_rows_are_published() -> None:
    # Given an INSERT, a MODIFY, a REMOVE (a settle), INSERTs of rows already PUBLISHED and FAILED (a
    # backfill), and an INSERT of one of the outbox's own items (an audit record: its key starts with '#')
    e1, e2, e3, e4, e5 = (event(f"o-{n}", 1) for n in range(5))
    audit = {
        "aggregate_key": {"S": "#audit#Order#o-9"},
        "seq": {"N": "1"},
        "event_id": e5.to_item()["event_id"],
    }
    records = [
        record(1, e1.to_item()),
        record(2, e2.to_item(), "MODIFY"),
        record(3, e3.to_item(), "REMOVE"),
        record(4, e4.to_item() | {"status": {"S": "PUBLISHED"}}),
        record(5, e5.to_item() | {"status": {"S": "FAILED"}}),
        record(6, audit),
    ]
    sns, poison, app = setup()

    # When they are handled
    response = handle({"Records": records}, FakeLambdaContext(), app)

    # Then only the pending INSERT was published; the others are skipped, not failed nor poisoned
    assert response == {"batchItemFailures": []}
    assert sns.accepted == [e1.event_id]
    assert poison.messages == []


@pytest.mark.parametrize("wrong", ["other_table", "no_new_image"])
def test_a_record_that_shows_a_wiring_fault_fails_the_invocation_and_publishes_nothing(wrong: str) -> None:
    # Given a good INSERT, then one from another table's stream, or one without its new image
    good, second = event("a", 1), event("b", 1)
    bad = (
        record(2, second.to_item(), arn=ARN.replace("table/outbox/", "table/orders/"))
        if wrong == "other_table"
        else record(2, second.to_item())
    )
    if wrong == "no_new_image":
        del bad["dynamodb"]["NewImage"]
        bad["dynamodb"]["StreamViewType"] = "KEYS_ONLY"
    sns, poison, app = setup()

    # When they are handled, Then the invocation fails with the reason (the mapping retries, alarms fire)
    with pytest.raises(StreamConfigurationError, match=r"table/orders/|KEYS_ONLY"):
        handle({"Records": [record(1, good.to_item()), bad]}, FakeLambdaContext(), app)

    # and nothing was published, skipped or poisoned for it
    assert sns.accepted == []
    assert poison.messages == []


def test_an_event_a_destination_does_not_take_is_left_pending_not_handed_back() -> None:
    # Given an INSERT that SNS always refuses for a transient reason, then a MODIFY and its successor
    e1, e2 = event("a", 1), event("a", 2)
    records = [record(1, e1.to_item()), record(2, e1.to_item(), "MODIFY"), record(3, e2.to_item())]
    sns, _, app = setup()
    sns.fail_entry(e1.event_id, transient(), times=1000)

    # When they are handled
    response = handle({"Records": records}, FakeLambdaContext(), app)

    # Then nothing is handed back: a#1 waits PENDING for the sweeper and a#2 is held behind it, unsent
    assert response == {"batchItemFailures": []}
    assert sns.accepted == []


def test_records_after_a_stop_are_reported_even_if_they_would_be_skipped() -> None:
    # Given an INSERT whose predecessor cannot be read (the run stops there), then a MODIFY and an INSERT
    e1, e2 = event("a", 2), event("b", 1)
    records = [record(1, e1.to_item()), record(2, e1.to_item(), "MODIFY"), record(3, e2.to_item())]
    predecessors = FakePredecessors()
    predecessors.error = ThrottledError("BatchGetItem left keys unprocessed")
    sns, _, app = setup(predecessors)

    # When they are handled
    response = handle({"Records": records}, FakeLambdaContext(), app)

    # Then all three are reported by sequence number (Lambda checkpoints at the lowest anyway)
    assert response == {
        "batchItemFailures": [{"itemIdentifier": r["dynamodb"]["SequenceNumber"]} for r in records]
    }
    assert sns.accepted == []


def test_a_stop_after_skipped_records_reports_from_the_stopped_record() -> None:
    # Given a REMOVE, a good INSERT, then an INSERT whose predecessor cannot be read
    e1, e2 = event("a", 1), event("b", 2)
    records = [record(1, e1.to_item(), "REMOVE"), record(2, e1.to_item()), record(3, e2.to_item())]
    predecessors = FakePredecessors()
    predecessors.error = ThrottledError("BatchGetItem left keys unprocessed")
    sns, _, app = setup(predecessors)

    # When they are handled
    response = handle({"Records": records}, FakeLambdaContext(), app)

    # Then only the stopped record is reported, and the good one went out
    assert response == {"batchItemFailures": [{"itemIdentifier": "000000000000000000003"}]}
    assert sns.accepted == [e1.event_id]


def test_a_record_sent_again_after_this_process_settled_it_is_skipped() -> None:
    # Given a batch published and settled, then handed to the publisher again (Lambda retrying a batch)
    e1, e2 = event("a", 1), event("b", 1)
    records = [record(1, e1.to_item()), record(2, e2.to_item())]
    sns, _, app = setup()
    handle({"Records": records}, FakeLambdaContext(), app)

    # When the same records come again
    response = handle({"Records": records}, FakeLambdaContext(), app)

    # Then they are not published a second time
    assert response == {"batchItemFailures": []}
    assert sns.accepted == [e1.event_id, e2.event_id]


def test_a_record_sent_again_after_this_process_parked_it_goes_only_where_it_has_not_gone() -> None:
    # Given b#1 taken by SNS and refused by EventBridge until its retries ran out (parked: SNS took it)
    b1 = event("b", 1)
    sns, bus = FakeDestination(Destination.SNS), FakeDestination(Destination.EVENTBRIDGE)
    bus.fail_entry(b1.event_id, transient(), times=5)
    updater = FakeUpdater()
    app = build_publisher(
        PublisherConfig.from_env(ENV | {"EVENT_BUS_NAME": "bus", "EVENT_SOURCE": "outbox.test"}),
        destinations={Destination.SNS: sns, Destination.EVENTBRIDGE: bus},
        poison_queue=FakePoisonQueue(),
        updater=updater,
        predecessors=FakePredecessors(),
        claimer=FakeClaimer(),
        clock=FakeClock(),
        sleep=lambda _: None,
        random=lambda: 0.0,
    )
    handle({"Records": [record(1, b1.to_item())]}, FakeLambdaContext(), app)
    assert [type(update).__name__ for update in updater.updates] == ["Park"]

    # When its record comes again (a batch handed back: the INSERT's image says nothing of the park)
    handle({"Records": [record(1, b1.to_item())]}, FakeLambdaContext(), app)

    # Then it goes to EventBridge alone: SNS took it once, and only once
    assert sns.accepted == [b1.event_id]
    assert bus.accepted == [b1.event_id]
    assert [type(update).__name__ for update in updater.updates] == ["Park", "Settle"]


def test_a_new_event_in_a_slot_this_process_settled_is_not_taken_for_the_old_one() -> None:
    # Given a#1 published and settled, then another event written in the same slot (a writer breaking the
    # contract): same key, another event_id
    first = event("a", 1)
    second = event("a", 1)
    sns, _, app = setup()
    handle({"Records": [record(1, first.to_item())]}, FakeLambdaContext(), app)

    # When its record comes
    handle({"Records": [record(2, second.to_item())]}, FakeLambdaContext(), app)

    # Then it is published, not skipped as already settled
    assert sns.accepted == [first.event_id, second.event_id]


@pytest.mark.parametrize("sequence_number", [None, ""])
def test_a_record_without_sequence_number_fails_the_invocation_before_publishing(
    sequence_number: str | None,
) -> None:
    # Given a good record and one whose SequenceNumber is missing (it could not be reported)
    good = record(1, event("a", 1).to_item())
    broken = record(2, event("b", 1).to_item())
    broken["dynamodb"]["SequenceNumber"] = sequence_number
    sns, _, app = setup()

    # When they are handled
    # Then the invocation fails as a whole, and nothing was published
    with pytest.raises(InvalidStreamEventError, match="SequenceNumber"):
        handle({"Records": [good, broken]}, FakeLambdaContext(), app)
    assert sns.calls == []


def test_an_event_that_is_not_a_stream_batch_is_refused() -> None:
    # Given an event without Records
    _, _, app = setup()

    # When handled
    # Then it is refused
    with pytest.raises(InvalidStreamEventError):
        handle({"detail": {}}, FakeLambdaContext(), app)
