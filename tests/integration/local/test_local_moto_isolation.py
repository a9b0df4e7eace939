"""moto isolates no request from another; while a runtime runs, requests are isolated as AWS isolates them
(`outbox_local.moto_isolation`). Each test makes a second request try to run at the one moment moto would let
it break the first (a hook inside moto's own loop): the hook waits until the second request has reached moto
(before any lock of the isolation), then gives it half a second to get in. Without the isolation it gets in
and the damage is seen; with it, it waits until the first request is done. The test then waits for the second
request to finish before it looks, so no outcome depends on how fast a loaded machine runs either thread."""

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
from moto.dynamodb.responses import DynamoHandler
from moto.sqs.models import Queue, SQSBackend, sqs_backends

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


ARRIVAL_TIMEOUT_S = 60.0
"""How long the second request may take to reach moto (a new client and a connection, on a loaded machine)."""


class Meanwhile:
    """A second request, run on another thread when the first calls `hook` inside moto.

    `arrived` is called by the test's own wrapper of the moto entry point the second request reaches before
    any isolation lock; `hook` waits for that, then gives the request `CHANCE_S` to get in; `done` waits for
    it to finish and re-raises its error, if any."""

    def __init__(self, request: Callable[[], object]) -> None:
        self._request = request
        self._arrived = threading.Event()
        self._thread: threading.Thread | None = None
        self._errors: list[BaseException] = []

    def arrived(self) -> None:
        if self._thread is not None:
            self._arrived.set()

    def hook(self) -> None:
        self._thread = threading.Thread(target=self._run)
        self._thread.start()
        assert self._arrived.wait(ARRIVAL_TIMEOUT_S), "the second request never reached moto"
        self._thread.join(CHANCE_S)

    def done(self) -> None:
        assert self._thread is not None, "the hook never ran"
        self._thread.join(ARRIVAL_TIMEOUT_S)
        assert not self._thread.is_alive(), "the second request never finished"
        if self._errors:
            raise self._errors[0]

    def _run(self) -> None:
        try:
            self._request()
        except BaseException as error:  # handed to the test's thread by done()
            self._errors.append(error)


def signalling_arrival(method: Callable[..., Any], meanwhile: Meanwhile) -> Callable[..., Any]:
    """`method`, telling `meanwhile` when a call reaches it once the hook has run (the first request is then
    past it already: a call is the second request's)."""

    def arriving(*arguments: Any, **keywords: Any) -> Any:
        meanwhile.arrived()
        return method(*arguments, **keywords)

    return arriving


class _ItemsWithAHook(defaultdict[Any, Any]):
    """A table's items whose iteration calls a hook after the first partition, once."""

    hook: Callable[[], None] | None = None

    def values(self) -> Any:
        for position, partition in enumerate(super().values()):
            yield partition
            if position == 0 and self.hook is not None:
                hook, self.hook = self.hook, None
                hook()


def test_a_scan_is_not_broken_by_a_put_of_a_new_key_under_way(
    endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
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
    put = Meanwhile(
        lambda: client(endpoint, "dynamodb").put_item(TableName="walked", Item={"pk": {"S": "new"}})
    )
    monkeypatch.setattr(DynamoHandler, "call_action", signalling_arrival(DynamoHandler.call_action, put))
    items.hook = put.hook
    table.items = items

    # When the table is scanned
    scanned = dynamodb.scan(TableName="walked")

    # Then the scan answered (moto's own walk raised "dictionary changed size during iteration": HTTP 500),
    # with the items written before it, and the put ran after it
    assert sorted(item["pk"]["S"] for item in scanned["Items"]) == ["a", "b", "c"]
    put.done()
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
    send = Meanwhile(lambda: client(endpoint, "sqs").send_message(QueueUrl=url, MessageBody="second"))
    monkeypatch.setattr(SQSBackend, "send_message", signalling_arrival(SQSBackend.send_message, send))
    hooks = [send.hook]

    def set_attribute(self: Queue, name: str, value: Any) -> None:
        if name == "_messages" and self is queue and hooks:
            hooks.pop()()
        object.__setattr__(self, name, value)

    monkeypatch.setattr(Queue, "__setattr__", set_attribute)

    # When the received message is deleted
    sqs.delete_message(QueueUrl=url, ReceiptHandle=received["ReceiptHandle"])

    # Then the message sent meanwhile is still in the queue (moto's delete dropped it)
    assert not hooks
    send.done()
    [kept] = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert kept["Body"] == "second"
