"""The kill proof's moving parts: `outbox local up --state-dir` in its own process, killed with SIGKILL and
started again; a load placing and confirming orders over its HTTP API; two queues of the test's own,
subscribed to the stack's topic and (through a rule) its bus before the first kill, drained all along.

Everything here talks to the runtime as a user does: the HTTP API, boto3 on the AWS endpoint. Its ports
change at each start (the runtime picks free ones): the load and the watchers follow the current ones.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from random import Random
from typing import IO, Any

import boto3
from botocore.config import Config

from outbox_local.endpoint import LOCAL_CREDENTIALS

REGION = "us-east-1"
READY_TIMEOUT_S = 120.0
_CLIENT_CONFIG = Config(
    retries={"mode": "standard", "total_max_attempts": 2}, connect_timeout=2, read_timeout=10
)


class Runtime:
    """`outbox local up --state-dir DIR` in a process of its own, on free ports."""

    def __init__(self, template: Path, state_dir: Path, log_dir: Path) -> None:
        self._template = template
        self._state_dir = state_dir
        self._log_dir = log_dir
        self.process: subprocess.Popen[str] | None = None
        self._log: IO[str] | None = None
        self.endpoint_url = ""
        self.api_url = ""
        self.starts: list[float] = []
        """Seconds from each start to `ready`."""
        self.restored: list[bool] = []

    def start(self) -> None:
        number = len(self.starts)
        self._log = (self._log_dir / f"local-up-{number}.log").open("w+", encoding="utf-8")
        started = time.monotonic()
        self.process = subprocess.Popen(  # noqa: S603 - our own CLI
            [
                *(sys.executable, "-m", "outbox_cli.main", "local", "up"),
                *("--template", str(self._template), "--state-dir", str(self._state_dir)),
                *("--aws-port", "0", "--api-port", "0", "--schedule-speedup", "12"),
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        printed = self._wait_until_ready()
        self.starts.append(time.monotonic() - started)
        self.restored.append("restored from its last snapshot" in printed)
        self.endpoint_url = _printed_url(printed, "AWS endpoint")
        self.api_url = _printed_url(printed, "HTTP API")

    def kill(self) -> None:
        """SIGKILL: no handler runs, nothing is flushed or saved on the way out."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        self.endpoint_url = self.api_url = ""

    def stop(self) -> str:
        """Ctrl-C; answers what it printed last (its state's figures)."""
        assert self.process is not None
        assert self._log is not None
        self.process.send_signal(signal.SIGINT)
        self.process.wait(timeout=60)
        self._log.seek(0)
        return self._log.read()

    def _wait_until_ready(self) -> str:
        assert self.process is not None
        assert self._log is not None
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            self._log.seek(0)
            printed = self._log.read()
            if "\nready" in printed:
                return printed
            if self.process.poll() is not None:
                raise AssertionError(f"outbox local up exited ({self.process.returncode}):\n{printed}")
            time.sleep(0.1)
        self.process.kill()
        raise AssertionError(f"outbox local up not ready after {READY_TIMEOUT_S:.0f} s")


def _printed_url(printed: str, label: str) -> str:
    found = re.search(rf"{label}\s+(http://[\d.]+:\d+)", printed)
    assert found, f"outbox local up printed no {label}:\n{printed}"
    return found.group(1)


def client(runtime: Runtime, service: str) -> Any:
    return boto3.client(
        service,
        endpoint_url=runtime.endpoint_url,
        region_name=REGION,
        config=_CLIENT_CONFIG,
        **LOCAL_CREDENTIALS,
    )


@dataclass(frozen=True)
class Acknowledged:
    order_id: str
    event_id: str
    seq: int


@dataclass
class Load:
    """Orders placed and confirmed over the HTTP API at `rate` requests a second, from a few client threads;
    only what the API answered with success counts as acknowledged."""

    runtime: Runtime
    rate: float
    random: Random
    acknowledged: list[Acknowledged] = field(default_factory=list)
    failed_requests: int = 0
    refused_requests: int = 0
    """Sent while the runtime was down (nothing listening): never reached it."""
    _placed: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stopping: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="load", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        with ThreadPoolExecutor(max_workers=6, thread_name_prefix="client") as pool:
            index = 0
            while not self._stopping.wait(1 / self.rate):
                api_url = self.runtime.api_url
                if not api_url:
                    continue
                with self._lock:
                    confirmable = (
                        self._placed.pop(self.random.randrange(len(self._placed)))
                        if (self._placed and self.random.random() < 0.4)
                        else None
                    )
                index += 1
                pool.submit(self._request, api_url, index, confirmable)

    def _request(self, api_url: str, index: int, confirm: str | None) -> None:
        if confirm is None:
            path, body = (
                "/orders",
                {
                    "customer_id": f"crash-{index % 10}",
                    "currency": "EUR",
                    "items": [{"sku": f"SKU-{index % 7}", "quantity": 1, "unit_price": "9.99"}],
                },
            )
        else:
            path, body = f"/orders/{confirm}/confirm", {}
        request = urllib.request.Request(  # noqa: S310 - the local API
            f"{api_url}{path}",
            data=json.dumps(body).encode(),
            method="POST",
            headers={"content-type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
                answer = json.loads(response.read())
        except urllib.error.HTTPError:
            with self._lock:
                self.failed_requests += 1
            return
        except ConnectionRefusedError:
            with self._lock:
                self.refused_requests += 1
            return
        except OSError:
            with self._lock:
                self.failed_requests += 1  # cut off by a kill: it may or may not have been committed
            return
        with self._lock:
            self.acknowledged.append(
                Acknowledged(answer["order_id"], answer["event_id"], int(answer["version"]))
            )
            if confirm is None:
                self._placed.append(answer["order_id"])


@dataclass(frozen=True)
class Delivery:
    event_id: str
    aggregate_id: str
    seq: int


class Watcher:
    """Receives and deletes everything reaching one queue of the test's own, in arrival order, following
    the runtime across restarts (a receive cut off by a kill is simply tried again)."""

    def __init__(self, runtime: Runtime, queue_name: str, *, bus: bool) -> None:
        self.queue_name = queue_name
        self.deliveries: list[Delivery] = []
        self._runtime = runtime
        self._bus = bus
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"watch-{queue_name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join()

    def seen(self) -> list[Delivery]:
        with self._lock:
            return list(self.deliveries)

    def _run(self) -> None:
        sqs, endpoint, queue_url = None, "", ""
        while not self._stopping.is_set():
            if self._runtime.endpoint_url != endpoint:
                endpoint = self._runtime.endpoint_url
                sqs = client(self._runtime, "sqs") if endpoint else None
                queue_url = ""
            if sqs is None:
                time.sleep(0.1)
                continue
            try:
                if not queue_url:
                    queue_url = sqs.get_queue_url(QueueName=self.queue_name)["QueueUrl"]
                messages = sqs.receive_message(
                    QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1
                ).get("Messages", [])
                with self._lock:
                    for message in messages:
                        envelope = json.loads(message["Body"])
                        envelope = envelope["detail"] if self._bus else envelope
                        self.deliveries.append(
                            Delivery(envelope["event_id"], envelope["aggregate_id"], int(envelope["seq"]))
                        )
                if messages:
                    sqs.delete_message_batch(
                        QueueUrl=queue_url,
                        Entries=[
                            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                            for i, m in enumerate(messages)
                        ],
                    )
            except Exception:
                time.sleep(0.1)


def subscribe_own_queues(runtime: Runtime) -> tuple[str, str]:
    """A queue subscribed to the stack's topic (raw delivery) and one behind a rule on its bus, made by the
    test as a user would: proof that user-made subscriptions survive the kills."""
    sqs, sns, events = client(runtime, "sqs"), client(runtime, "sns"), client(runtime, "events")
    cloudformation = client(runtime, "cloudformation")
    outputs = {
        output["OutputKey"]: output["OutputValue"]
        for output in cloudformation.describe_stacks(StackName="OutboxStack")["Stacks"][0]["Outputs"]
    }
    names = ("crash-proof-topic", "crash-proof-bus")
    arns = []
    for name in names:
        url = sqs.create_queue(QueueName=name)["QueueUrl"]
        arns.append(
            sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        )
    sns.subscribe(
        TopicArn=outputs["TopicArn"],
        Protocol="sqs",
        Endpoint=arns[0],
        Attributes={"RawMessageDelivery": "true"},
    )
    bus = outputs["EventBusName"]
    events.put_rule(
        Name="crash-proof", EventBusName=bus, EventPattern=json.dumps({"source": [outputs["EventSource"]]})
    )
    events.put_targets(Rule="crash-proof", EventBusName=bus, Targets=[{"Id": "queue", "Arn": arns[1]}])
    return names


def orders_table(runtime: Runtime) -> dict[str, int]:
    """Every order the final runtime holds, with its version (its last event's seq)."""
    dynamodb, cloudformation = client(runtime, "dynamodb"), client(runtime, "cloudformation")
    outputs = {
        output["OutputKey"]: output["OutputValue"]
        for output in cloudformation.describe_stacks(StackName="OutboxStack")["Stacks"][0]["Outputs"]
    }
    versions: dict[str, int] = {}
    for page in dynamodb.get_paginator("scan").paginate(TableName=outputs["OrdersTableName"]):
        for item in page["Items"]:
            if "version" in item and "order_id" in item:
                versions[item["order_id"]["S"]] = int(item["version"]["N"])
    return versions


def environment_ready() -> None:
    # The stream reads in the runtime's process need it (botocore >= 1.44.4): the Makefile exports it too.
    os.environ.setdefault("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")


@contextlib.contextmanager
def running(*parts: Load | Watcher) -> Any:
    for part in parts:
        part.start()
    try:
        yield
    finally:
        for part in parts:
            part.stop()
