"""moto isolates no request from another; while a runtime runs, requests are isolated as AWS isolates them
(`outbox_local.moto_isolation`). Each test makes a second request try to run at the one moment moto would let
it break the first (a hook inside moto's own loop), and gives it half a second to do so: without the
isolation it gets in and the damage is seen; with it, it waits until the first request is done."""

from __future__ import annotations

import contextlib
import threading
import urllib.request
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.dynamodb.models import dynamodb_backends
from moto.sqs.models import Queue, sqs_backends

from outbox_local.aws_server import LocalAwsServer
from outbox_local.endpoint import LOCAL_CREDENTIALS
from outbox_local.faults import FaultInjector
from outbox_local.moto_isolation import isolated_requests
from outbox_local.moto_performance import lighter_moto

REGION = "us-east-1"
CHANCE_S = 0.5
"""How long the second request is given to slip in: long enough for it to get there, if it can."""


@pytest.fixture(params=["isolation alone", "the runtime's corrections in its order"])
def endpoint(request: pytest.FixtureRequest) -> Iterator[str]:
    """Isolation on its own, and with what LocalRuntime.start enters after it (the cheaper hot paths), which
    must not undo any of its locks."""
    server = LocalAwsServer(FaultInjector())
    server.start()
    try:
        reset = urllib.request.Request(f"{server.endpoint_url}/moto-api/reset", method="POST")  # noqa: S310
        with urllib.request.urlopen(reset, timeout=10):  # noqa: S310 - our own loopback server
            pass
        with contextlib.ExitStack() as corrections:
            corrections.enter_context(isolated_requests())
            if request.param != "isolation alone":
                corrections.enter_context(lighter_moto())
            yield server.endpoint_url
    finally:
        server.stop()


def client(endpoint: str, service: str) -> Any:
    # No retries: an answer moto got wrong must show, not be retried away.
    no_retries = Config(retries={"mode": "standard", "total_max_attempts": 1})
    return boto3.client(
        service, endpoint_url=endpoint, region_name=REGION, config=no_retries, **LOCAL_CREDENTIALS
    )


def in_the_meantime(request: Callable[[], object]) -> Callable[[], None]:
    """A hook that lets `request` run on another thread, if it can, while the current request is under way."""

    def hook() -> None:
        other = threading.Thread(target=request)
        other.start()
        other.join(CHANCE_S)

    return hook


class _ItemsWithAHook(defaultdict[Any, Any]):
    """A table's items whose iteration calls a hook after the first partition, once."""

    hook: Callable[[], None] | None = None

    def values(self) -> Any:
        for position, partition in enumerate(super().values()):
            yield partition
            if position == 0 and self.hook is not None:
                hook, self.hook = self.hook, None
                hook()


def test_a_scan_is_not_broken_by_a_put_of_a_new_key_under_way(endpoint: str) -> None:
    # Given a table with items, and a scan that lets a put of a new item run while it walks the table
    dynamodb = client(endpoint, "dynamodb")
    dynamodb.create_table(
        TableName="walked",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    for key in ("a", "b", "c"):
        dynamodb.put_item(TableName="walked", Item={"pk": {"S": key}})
    table = dynamodb_backends[DEFAULT_ACCOUNT_ID][REGION].get_table("walked")
    items = _ItemsWithAHook(dict, table.items)
    items.hook = in_the_meantime(
        lambda: client(endpoint, "dynamodb").put_item(TableName="walked", Item={"pk": {"S": "new"}})
    )
    table.items = items

    # When the table is scanned
    scanned = dynamodb.scan(TableName="walked")

    # Then the scan answered (moto's own walk raised "dictionary changed size during iteration": HTTP 500),
    # with the items written before it, and the put ran after it
    assert sorted(item["pk"]["S"] for item in scanned["Items"]) == ["a", "b", "c"]
    assert "Item" in dynamodb.get_item(TableName="walked", Key={"pk": {"S": "new"}})


def test_a_message_sent_while_another_is_deleted_is_kept(
    endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a queue with a message received, and a delete of it that lets a send to the queue run at the
    # moment moto replaces the queue's list of messages with the one it built without the deleted message
    sqs = client(endpoint, "sqs")
    url = sqs.create_queue(QueueName="consumer")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="first")
    [received] = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1)["Messages"]
    queue = sqs_backends[DEFAULT_ACCOUNT_ID][REGION].get_queue("consumer")
    hooks = [
        in_the_meantime(lambda: client(endpoint, "sqs").send_message(QueueUrl=url, MessageBody="second"))
    ]

    def set_attribute(self: Queue, name: str, value: Any) -> None:
        if name == "_messages" and self is queue and hooks:
            hooks.pop()()
        object.__setattr__(self, name, value)

    monkeypatch.setattr(Queue, "__setattr__", set_attribute)

    # When the received message is deleted
    sqs.delete_message(QueueUrl=url, ReceiptHandle=received["ReceiptHandle"])

    # Then the message sent meanwhile is still in the queue (moto's delete dropped it)
    assert not hooks
    [kept] = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert kept["Body"] == "second"
