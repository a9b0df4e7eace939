"""Large payloads on moto: the publisher's world (tests/integration/publisher/publisher_world.py) plus an S3
bucket for stored envelopes, and queues that take SQS's largest message."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from outbox.dynamodb import DynamoDBTransactionExecutor
from outbox.model import OutboxEvent
from outbox.s3_payloads import S3PayloadStore
from outbox.transaction import Transaction
from outbox.writer import OutboxWriter
from outbox_local.moto_sns_sizes import topic_message_sizes
from outbox_local.moto_transactions import atomic_transactions
from tests.integration.publisher.publisher_world import World, build_world
from tests.support.aws import REGION, Tables

BUCKET = "outbox-payloads"
LARGEST_SQS_MESSAGE = 1_048_576


@pytest.fixture
def corrected_moto() -> Iterator[None]:
    """moto as the `outbox_moto` fixture gives it (outbox_local.pytest_plugin): a cancelled transaction
    streams nothing, and a topic takes what its MaximumMessageSize allows."""
    with mock_aws(), atomic_transactions(), topic_message_sizes():
        yield


@pytest.fixture
def s3(corrected_moto: None) -> Any:
    client = boto3.client("s3", region_name=REGION)
    client.create_bucket(Bucket=BUCKET)
    return client


@pytest.fixture
def store(s3: Any) -> S3PayloadStore:
    return S3PayloadStore(s3, BUCKET, prefix="events/")


@pytest.fixture
def dynamodb(s3: Any) -> Any:
    """On the corrected moto."""
    return boto3.client("dynamodb", region_name=REGION)


@pytest.fixture
def world(tables: Tables, dynamodb: Any, s3: Any) -> World:
    world = build_world(tables, dynamodb)
    for queue in (world.topic_queue, world.bus_queue, world.poison_queue):
        world.sqs.set_queue_attributes(
            QueueUrl=queue, Attributes={"MaximumMessageSize": str(LARGEST_SQS_MESSAGE)}
        )
    return world


def write(world: World, store: S3PayloadStore, *events: OutboxEvent) -> None:
    """Each event in a transaction of its own, written with the payload store."""
    writer = OutboxWriter(world.tables.outbox, payload_store=store)
    for one in events:
        transaction = Transaction()
        writer.append(transaction, one)
        DynamoDBTransactionExecutor(world.dynamodb).execute(transaction)


def stored_key(s3: Any, stored: OutboxEvent) -> str:
    """The key of the one object a write of `stored` left (outbox.payload_refs.object_key: the event's id,
    then the write's)."""
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix=f"events/{stored.event_id}/").get("Contents", [])
    [key] = [item["Key"] for item in listed]
    return str(key)
