"""Large payloads when something goes wrong, on moto: a transaction cancelled after its body was stored, an
object that is gone, S3 that does not answer; and bad input refused before anything is written."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError

from outbox.dynamodb import DynamoDBTransactionExecutor
from outbox.errors import ConditionFailedError
from outbox.model import OutboxEvent
from outbox.payload_refs import MAX_STORED_ENVELOPE_BYTES
from outbox.payload_store import PayloadTooLargeError, PayloadUnavailableError
from outbox.s3_payloads import S3PayloadStore
from outbox.transaction import TableKeys, Transaction
from outbox.writer import OutboxWriter
from outbox_inbox.envelope import envelope_of
from outbox_inbox.errors import MalformedEnvelopeError
from outbox_publisher.config import PublisherConfig
from outbox_publisher.handler import build_publisher
from outbox_sweeper.config import SweeperConfig
from outbox_sweeper.handler import build_sweeper
from tests.integration.payloads.conftest import BUCKET, stored_key, write
from tests.integration.publisher.publisher_world import World
from tests.support.aws import event_rows
from tests.support.events import event
from tests.support.inbox import sqs_record

KB = 1024


def large(aggregate_id: str, seq: int, size: int = 300 * KB) -> OutboxEvent:
    return event(aggregate_id, seq, payload={"document": "x" * size})


def object_keys(s3: Any) -> list[str]:
    return [item["Key"] for item in s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])]


def published(world: World) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    return world.drain(world.topic_queue), world.drain(world.bus_queue)


class S3ClientFailing:
    """Wraps the real S3 client: GetObject and HeadObject answer `code` (the rest goes to moto)."""

    def __init__(self, real: Any, code: str, status: int) -> None:
        self._real = real
        self._error = ClientError(
            {"Error": {"Code": code, "Message": code}, "ResponseMetadata": {"HTTPStatusCode": status}},
            "GetObject",
        )
        self.calls = 0

    def get_object(self, **_: Any) -> Any:
        self.calls += 1
        raise self._error

    def head_object(self, **_: Any) -> Any:
        self.calls += 1
        raise self._error

    def put_object(self, **arguments: Any) -> Any:
        return self._real.put_object(**arguments)


def publisher_reading(world: World, s3_client: Any) -> Any:
    config = PublisherConfig.from_env(world.env())
    ports = world._ports(config, None, None, None, None)
    return build_publisher(config, payloads=S3PayloadStore(s3_client), **ports)


def sweeper_reading(world: World, s3_client: Any) -> Any:
    """The sweeper as `world.sweeper()` builds it, reading stored envelopes through `s3_client`."""
    config = SweeperConfig.from_env(world.env())
    ports = world._ports(config.publisher, None, None, None, None)
    return build_sweeper(config, payloads=S3PayloadStore(s3_client), **ports, **world.sweeper_tables(config))


def test_a_cancelled_transaction_leaves_an_object_no_row_names_and_publishes_nothing(
    world: World, store: S3PayloadStore, s3: Any
) -> None:
    # Given an order that exists already
    world.dynamodb.put_item(TableName=world.tables.orders, Item={"pk": {"S": "order#A"}})
    # When a transaction that would create it again, with a large event, is cancelled
    transaction = Transaction()
    transaction.put(
        TableKeys(world.tables.orders, "pk"),
        {"pk": {"S": "order#A"}},
        label="order",
        condition="attribute_not_exists(pk)",
    )
    big = large("A", 1)
    OutboxWriter(world.tables.outbox, payload_store=store).append(transaction, big)
    with pytest.raises(ConditionFailedError):
        DynamoDBTransactionExecutor(world.dynamodb).execute(transaction)

    # Then no row was written, but the body stored before the transaction is there for the lifecycle to remove
    assert event_rows(world.dynamodb, world.tables.outbox) == []
    assert object_keys(s3) == [stored_key(s3, big)]
    # and the stream holds nothing, so nothing is published
    assert world.stream_event()["Records"] == []
    assert published(world) == ([], [])


def test_a_row_naming_a_missing_object_is_poison_with_its_reason_and_blocks_its_successor(
    world: World, store: S3PayloadStore, s3: Any
) -> None:
    # Given a large event whose stored envelope was deleted, and the next event of the same order
    big, after = large("A", 1), event("A", 2)
    write(world, store, big, after)
    s3.delete_object(Bucket=BUCKET, Key=stored_key(s3, big))

    # When the publisher handles the stream
    response = world.invoke(world.publisher(), world.stream_event())

    # Then nothing is handed back, the event is poison with its reason and its row is kept FAILED
    assert response == {"batchItemFailures": []}
    poison = world.poison()
    assert [(message["reason"], message["error_code"]) for message in poison] == [
        ("invalid_row", "PayloadMissing")
    ]
    assert "does not exist" in poison[0]["detail"]
    row = world.row(big)
    assert row["status"]["S"] == "FAILED"
    assert "PayloadMissing" in row["last_error"]["S"] or "does not exist" in row["last_error"]["S"]
    # and nothing was published: not the poison, and not its successor before it
    assert published(world) == ([], [])
    assert world.row(after)["status"]["S"] == "PENDING"


@pytest.mark.parametrize(("code", "status"), [("SlowDown", 503), ("AccessDenied", 403)])
def test_a_stored_envelope_that_cannot_be_read_is_retried_not_poison(
    world: World, store: S3PayloadStore, s3: Any, code: str, status: int
) -> None:
    # Given a large event and the next one of the same order, and S3 failing every read
    big, after = large("A", 1), event("A", 2)
    write(world, store, big, after)
    failing = S3ClientFailing(s3, code, status)

    # When the publisher handles the stream
    world.invoke(publisher_reading(world, failing), world.stream_event())

    # Then S3 was asked, nothing is poison, nothing was published (not the successor either) and both rows
    # are still PENDING
    assert failing.calls >= 1
    assert world.poison() == []
    assert published(world) == ([], [])
    assert [world.row(e)["status"]["S"] for e in (big, after)] == ["PENDING", "PENDING"]

    # When S3 answers again and the sweeper finds the rows
    world.clock.advance(seconds=600)
    report = world.sweep(world.sweeper())

    # Then both are out, in order, the large one whole on the topic... or as its claim check
    assert report is not None
    topic, bus = published(world)
    assert [
        json.loads(message["Body"])[1]["s3Key"] if message["Body"].startswith("[") else "inline"
        for message in topic
    ] == [stored_key(s3, big), "inline"]
    assert [json.loads(message["Body"])["detail"]["seq"] for message in bus] == [1, 2]
    assert world.poison() == []
    assert world.stored(big) is None
    assert world.stored(after) is None


def test_a_consumer_dead_letters_a_claim_check_whose_object_is_gone_and_retries_one_it_cannot_read(
    world: World, store: S3PayloadStore, s3: Any
) -> None:
    # Given a large event published as claim checks
    big = large("A", 1)
    write(world, store, big)
    world.invoke(world.publisher(), world.stream_event())
    pointer = world.drain(world.topic_queue)[0]["Body"]

    # When S3 does not answer, the consumer's read raises a retryable error (the message goes back to SQS)
    with pytest.raises(PayloadUnavailableError):
        envelope_of(sqs_record(pointer), payloads=S3PayloadStore(S3ClientFailing(s3, "SlowDown", 503)))
    # and when the object is gone, the envelope is malformed (dead-lettered with its reason)
    s3.delete_object(Bucket=BUCKET, Key=stored_key(s3, big))
    with pytest.raises(MalformedEnvelopeError, match="cannot be read"):
        envelope_of(sqs_record(pointer), payloads=store)


def test_an_envelope_over_the_maximum_is_refused_and_nothing_is_written_or_stored(
    world: World, store: S3PayloadStore, s3: Any
) -> None:
    # Given an event whose envelope is larger than the documented maximum
    huge = event("A", 1, payload={"document": "x" * MAX_STORED_ENVELOPE_BYTES})

    # When it is appended, Then it is refused by type, naming no value
    with pytest.raises(PayloadTooLargeError, match="maximum") as refused:
        OutboxWriter(world.tables.outbox, payload_store=store).append(Transaction(), huge)
    assert "xxx" not in str(refused.value)
    # and nothing is stored or written
    assert object_keys(s3) == []
    assert event_rows(world.dynamodb, world.tables.outbox) == []


def test_a_store_that_fails_stops_the_write_before_the_transaction(world: World, s3: Any) -> None:
    # Given a payload store on a bucket that does not exist
    store = S3PayloadStore(s3, "no-such-outbox-bucket")
    transaction = Transaction()

    # When a large event is appended, Then a retryable error says so, and the transaction holds nothing
    with pytest.raises(PayloadUnavailableError, match="PutObject"):
        OutboxWriter(world.tables.outbox, payload_store=store).append(transaction, large("A", 1))
    assert len(transaction) == 0


def test_a_stored_object_that_is_not_the_row_s_envelope_is_poison_and_never_forwarded(
    world: World, store: S3PayloadStore, s3: Any
) -> None:
    # Given a 100 KB event (stored, and small enough to go whole to both destinations) whose object was
    # overwritten with text of the same size that is no envelope
    middle = large("A", 1, size=100 * KB)
    write(world, store, middle)
    key = stored_key(s3, middle)
    size = s3.head_object(Bucket=BUCKET, Key=key)["ContentLength"]
    s3.put_object(Bucket=BUCKET, Key=key, Body=b"x" * size)

    # When the publisher handles the stream
    world.invoke(world.publisher(), world.stream_event())

    # Then the text is forwarded nowhere, and the event is poison with its reason, its row FAILED
    assert published(world) == ([], [])
    assert [(m["reason"], m["error_code"]) for m in world.poison()] == [("invalid_row", "PayloadMismatch")]
    assert world.row(middle)["status"]["S"] == "FAILED"


def test_a_100_kb_event_is_stored_yet_published_whole_on_both_destinations(
    world: World, store: S3PayloadStore
) -> None:
    # Given a 100 KB event: above the 64 KiB threshold, below both destinations' 256 KB
    middle = large("A", 1, size=100 * KB)
    write(world, store, middle)
    assert "payload_ref" in world.row(middle)

    # When it is published
    world.invoke(world.publisher(), world.stream_event())

    # Then both destinations carry the envelope itself, exactly as stored
    topic, bus = published(world)
    assert [message["Body"] for message in topic] == [middle.envelope_json()]
    assert [json.loads(message["Body"])["detail"] for message in bus] == [json.loads(middle.envelope_json())]
