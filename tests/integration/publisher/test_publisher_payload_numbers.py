"""Valid JSON is never poisoned for its numbers: a payload is forwarded byte for byte to every route that
accepts it, and poisoned, with the route's reason, only where a destination would refuse it (hardening
finding: `1e400` and a 5,000-digit integer ended FAILED on every route)."""

from __future__ import annotations

from typing import Any

import pytest

from outbox_ops.failed import FailedRows
from tests.integration.publisher.publisher_world import World
from tests.support.events import event

HUGE_INTEGER = "9" * 5000


class RecordingEvents:
    """The real EventBridge client (moto), keeping every entry it was asked to put."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self.entries: list[dict[str, Any]] = []

    def put_events(self, Entries: list[dict[str, Any]]) -> Any:  # noqa: N803 - boto3's name
        self.entries.extend(Entries)
        return self._real.put_events(Entries=Entries)


def write_with_payload(world: World, payload_text: str) -> Any:
    placed = event("A", 1)
    world.put_raw({**placed.to_item(), "payload": {"S": payload_text}})
    return placed


@pytest.mark.parametrize(
    "payload_text",
    ['{"big":1e400}', '{"price":19.990000000000000000001,"n":-0.0}', '{"small":-9223372036854775808}'],
    ids=["exponent-beyond-double", "more-digits-than-a-double", "int64-minimum"],
)
def test_numbers_every_destination_accepts_are_forwarded_byte_for_byte(
    world: World, payload_text: str
) -> None:
    # Given a row whose payload holds numbers no float or bounded integer holds exactly
    placed = write_with_payload(world, payload_text)
    events = RecordingEvents(world.events)
    # When the publisher handles its record
    response = world.invoke(world.publisher(events_client=events), world.stream_event())
    # Then it is published on both destinations with the payload's text unchanged, and its row settled
    # (what EventBridge received is read from the call: moto re-encodes Detail before delivering it)
    assert response == {"batchItemFailures": []}
    [topic_message] = world.drain(world.topic_queue)
    assert f'"payload":{payload_text}' in topic_message["Body"]
    [entry] = events.entries
    assert f'"payload":{payload_text}' in entry["Detail"]
    assert world.stored(placed) is None


def test_an_integer_beyond_64_bits_is_poison_for_eventbridge_with_that_reason(world: World) -> None:
    # Given a row whose payload holds a 5,000-digit integer (valid JSON; EventBridge takes 64-bit integers)
    placed = write_with_payload(world, f'{{"big":{HUGE_INTEGER}}}')
    # When the publisher (SNS and EventBridge) handles it
    response = world.invoke(world.publisher(), world.stream_event())
    # Then it is poison, found before any call, with EventBridge's reason (no value in it), and nothing sent
    assert response == {"batchItemFailures": []}
    assert world.drain(world.topic_queue) == []
    assert world.drain(world.bus_queue) == []
    row = world.row(placed)
    assert row["status"] == {"S": "FAILED"}
    assert (
        "eventbridge: the payload holds an integer outside EventBridge's signed 64-bit range"
        in row["last_error"]["S"]
    )
    assert HUGE_INTEGER[:20] not in row["last_error"]["S"]


def test_an_integer_beyond_64_bits_goes_byte_for_byte_to_a_publisher_with_sns_only(world: World) -> None:
    # Given the same row and a publisher with SNS as its only destination (SNS takes any text)
    placed = write_with_payload(world, f'{{"big":{HUGE_INTEGER}}}')
    # When it handles the record
    response = world.invoke(world.publisher(EVENT_BUS_NAME="", EVENT_SOURCE=""), world.stream_event())
    # Then the topic gets the payload's 5,000 digits exactly, and the row is settled
    assert response == {"batchItemFailures": []}
    [topic_message] = world.drain(world.topic_queue)
    assert f'"payload":{{"big":{HUGE_INTEGER}}}' in topic_message["Body"]
    assert world.stored(placed) is None


def test_a_row_whose_seq_is_no_whole_number_is_poisoned_and_marked_failed(world: World) -> None:
    # Given a row another writer put with seq N "1.5" (hardening finding: it went to the poison queue but
    # stayed PENDING forever, poisoned again at every sweep)
    row = {**event("A", 1).to_item(), "seq": {"N": "1.5"}}
    world.put_raw(row)
    # When the publisher handles its record
    response = world.invoke(world.publisher(), world.stream_event())
    # Then it went whole to the poison queue, and the row, addressed by its key as stored, is FAILED
    assert response == {"batchItemFailures": []}
    [poison] = world.poison()
    assert poison["row"]["seq"] == {"N": "1.5"}
    stored = world.dynamodb.get_item(
        TableName=world.tables.outbox,
        Key={"aggregate_key": row["aggregate_key"], "seq": {"N": "1.5"}},
        ConsistentRead=True,
    )["Item"]
    assert stored["status"] == {"S": "FAILED"}
    assert "seq" in stored["last_error"]["S"]
    # And an operator sees it in the FAILED list, by its seq as stored
    [failed] = FailedRows(world.dynamodb, world.tables.outbox).select()
    assert (failed.key.aggregate_key, failed.key.seq_text) == ("Order#A", "1.5")
