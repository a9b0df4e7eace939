"""The stream layer: which records are publishable, and how a stop becomes batchItemFailures."""

from __future__ import annotations

from typing import Any

import pytest

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
    FakeMarker,
    FakePoisonQueue,
    FakePredecessors,
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


def setup() -> tuple[FakeDestination, FakePoisonQueue, Any]:
    sns = FakeDestination(Destination.SNS)
    poison = FakePoisonQueue()
    app = build_publisher(
        PublisherConfig.from_env(ENV),
        destinations={Destination.SNS: sns},
        poison_queue=poison,
        marker=FakeMarker(),
        predecessors=FakePredecessors(),
        claimer=FakeClaimer(),
        clock=FakeClock(),
        sleep=lambda _: None,
        random=lambda: 0.0,
    )
    return sns, poison, app


def test_only_inserts_of_pending_rows_are_published() -> None:
    # Given an INSERT, a MODIFY, a REMOVE, and INSERTs of rows already PUBLISHED and FAILED (a backfill)
    e1, e2, e3, e4, e5 = (event(f"o-{n}", 1) for n in range(5))
    records = [
        record(1, e1.to_item()),
        record(2, e2.to_item(), "MODIFY"),
        record(3, e3.to_item(), "REMOVE"),
        record(4, e4.to_item() | {"status": {"S": "PUBLISHED"}}),
        record(5, e5.to_item() | {"status": {"S": "FAILED"}}),
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


def test_records_after_a_stop_are_reported_even_if_they_would_be_skipped() -> None:
    # Given an INSERT that always fails, then a MODIFY and another INSERT
    e1, e2 = event("a", 1), event("a", 2)
    records = [record(1, e1.to_item()), record(2, e1.to_item(), "MODIFY"), record(3, e2.to_item())]
    sns, _, app = setup()
    sns.fail_entry(e1.event_id, transient(), times=1000)

    # When they are handled
    response = handle({"Records": records}, FakeLambdaContext(), app)

    # Then all three are reported by sequence number (Lambda checkpoints at the lowest anyway)
    assert response == {
        "batchItemFailures": [{"itemIdentifier": r["dynamodb"]["SequenceNumber"]} for r in records]
    }
    assert sns.accepted == []


def test_a_stop_after_skipped_records_reports_from_the_failing_record() -> None:
    # Given a REMOVE, a good INSERT, then an INSERT that always fails
    e1, e2 = event("a", 1), event("b", 1)
    records = [record(1, e1.to_item(), "REMOVE"), record(2, e1.to_item()), record(3, e2.to_item())]
    sns, _, app = setup()
    sns.fail_entry(e2.event_id, transient(), times=1000)

    # When they are handled
    response = handle({"Records": records}, FakeLambdaContext(), app)

    # Then only the failing record is reported
    assert response == {"batchItemFailures": [{"itemIdentifier": "000000000000000000003"}]}


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
