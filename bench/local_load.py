"""Load the local runtime like a small production day, and measure it against issue 12's targets.

    .venv/bin/python -m bench.local_load [--orders 10000] [--rate 50] [--json results.json]

It synthesizes nothing: it runs the template `make synth` wrote, in `outbox local up` started as its own
process (so the client's threads do not share the runtime's interpreter, and the runtime's memory, workers
included, is read from /proc apart from the client's). It places orders through the local HTTP API at the
given rate (open loop: each order is due at its time, whatever the previous ones are doing, with enough client
threads to keep them in flight), and watches the two subscriber queues of the sample stack, the topic's and
the bus's, for their events.

What it measures:
- sustained orders/s: events delivered on both queues per second, over the middle 80% of the deliveries (the
  warm-up and the tail left out);
- commit -> delivery: the queue's `SentTimestamp` (when SNS or EventBridge put the message into SQS) minus
  the event's `occurred_at` (stamped by the Orders API just before its transaction): p50 and p99 per queue;
- API latency: request sent -> response read, the first tenth of the orders against the last;
- peak memory: the summed resident memory of `outbox local up` and every process under it, sampled each 0.5 s.

The machine's load average is recorded with the figures: on a shared machine they are only indicative.
The figures and the targets: bench.local_load_report.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

from bench import local_load_report as report_of
from bench.local_load_report import TARGET_ORDERS_PER_S, Placed, Seen
from bench.local_up import LocalUp
from outbox_local.endpoint import LOCAL_CREDENTIALS

DEFAULT_TEMPLATE = Path("cdk.out/OutboxStack.template.json")
TOPIC_QUEUE_OUTPUT = "SampleTopicConsumerQueueUrl"
BUS_QUEUE_OUTPUT = "SampleBusConsumerQueueUrl"
_MEMORY_SAMPLE_S = 0.5


def main(argv: list[str] | None = None) -> int:
    arguments = _parser().parse_args(argv)
    window_s = batching_window_s(arguments.template)
    load_before = os.getloadavg()
    extra = ["--in-process"] if arguments.in_process else []
    if arguments.max_environments is not None:
        extra += ["--max-environments", str(arguments.max_environments)]
    # A fresh state directory measures what keeping state costs; without one, nothing is kept (and no run
    # restores what an earlier one left).
    extra += ["--state-dir", arguments.state_dir, "--fresh"] if arguments.state_dir else ["--no-state"]
    runtime = LocalUp(arguments.template, extra)
    peak = _MemoryPeak(runtime)
    leftover: list[int] = []
    try:
        outputs = _outputs(runtime.endpoint_url)
        queues = {
            name: outputs[key] for name, key in (("topic", TOPIC_QUEUE_OUTPUT), ("bus", BUS_QUEUE_OUTPUT))
        }
        watchers = {
            name: _QueueWatcher(runtime.endpoint_url, url, bus=name == "bus") for name, url in queues.items()
        }
        cpu_before, started = _cpu_seconds(runtime), time.monotonic()
        placed = _place_orders(runtime.api_url, arguments.orders, arguments.rate, arguments.clients)
        acknowledged = {p.event_id for p in placed if p.event_id is not None}
        deadline = time.monotonic() + arguments.drain_timeout
        while time.monotonic() < deadline and not all(w.has(acknowledged) for w in watchers.values()):
            time.sleep(0.2)
        for watcher in watchers.values():
            watcher.stop()
        cpu = report_of.cpu_used(cpu_before, _cpu_seconds(runtime), time.monotonic() - started)
        mappings = _control(runtime.endpoint_url, "mappings")
    finally:
        peak.stop()
        leftover = runtime.stop()
    report = report_of.build(
        arguments,
        placed,
        queues={name: watcher.seen() for name, watcher in watchers.items()},
        window_s=window_s,
        peak_rss_bytes=peak.rss_bytes,
        peak_processes=peak.processes,
        mappings=mappings,
        leftover=leftover,
        load_before=load_before,
    )
    report["cpu"] = cpu
    print(report_of.table(report))
    if arguments.json:
        Path(arguments.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0 if all(report["targets"][name]["met"] for name in report["targets"]) else 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.local_load", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--template", type=Path, default=DEFAULT_TEMPLATE, help="synthesized template (make synth)"
    )
    parser.add_argument("--orders", type=int, default=10_000, help="orders to place (default 10000)")
    parser.add_argument(
        "--rate", type=float, default=TARGET_ORDERS_PER_S, help="orders per second (default 50)"
    )
    parser.add_argument("--clients", type=int, default=32, help="client threads, requests in flight at most")
    parser.add_argument("--drain-timeout", type=float, default=300.0, help="seconds to wait for deliveries")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument(
        "--in-process", action="store_true", help="run the functions in process (the old way)"
    )
    parser.add_argument("--max-environments", type=int, help="worker processes per function at most")
    parser.add_argument(
        "--state-dir", help="keep the runtime's state there (emptied first); default: nothing is kept"
    )
    return parser


def batching_window_s(template: Path) -> float:
    """The stream mapping's MaximumBatchingWindowInSeconds (the p99 target is this plus one second)."""
    resources = json.loads(template.read_text(encoding="utf-8"))["Resources"]
    windows = [
        float(resource["Properties"].get("MaximumBatchingWindowInSeconds", 0))
        for resource in resources.values()
        if resource["Type"] == "AWS::Lambda::EventSourceMapping"
        and "StartingPosition" in resource["Properties"]  # a stream mapping, not a queue's
    ]
    return max(windows, default=0.0)


def _client(service: str, endpoint_url: str) -> Any:
    config = Config(retries={"mode": "standard", "total_max_attempts": 3}, max_pool_connections=4)
    return boto3.client(
        service, endpoint_url=endpoint_url, region_name="us-east-1", config=config, **LOCAL_CREDENTIALS
    )


def _outputs(endpoint_url: str) -> dict[str, str]:
    stack = _client("cloudformation", endpoint_url).describe_stacks(StackName="OutboxStack")["Stacks"][0]
    return {output["OutputKey"]: output["OutputValue"] for output in stack.get("Outputs", [])}


def _control(endpoint_url: str, path: str) -> Any:
    with urllib.request.urlopen(f"{endpoint_url}/_outbox/{path}", timeout=30) as response:  # noqa: S310
        return json.loads(response.read())


def _place_orders(api_url: str, orders: int, rate: float, clients: int) -> list[Placed]:
    placed = [Placed(scheduled=0.0) for _ in range(orders)]
    start = time.time() + 0.5
    with ThreadPoolExecutor(max_workers=clients, thread_name_prefix="client") as pool:
        for index in range(orders):
            placed[index].scheduled = start + index / rate
            delay = placed[index].scheduled - time.time()
            if delay > 0:
                time.sleep(delay)
            pool.submit(_place, api_url, index, placed[index])
    return placed


def _place(api_url: str, index: int, placed: Placed) -> None:
    body = {
        "customer_id": f"bench-{index % 100}",
        "currency": "EUR",
        "items": [{"sku": f"SKU-{index % 7}", "quantity": 1 + index % 3, "unit_price": "9.99"}],
    }
    request = urllib.request.Request(  # noqa: S310 - the local API
        f"{api_url}/orders",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"content-type": "application/json"},
    )
    placed.sent = time.time()
    try:
        with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310
            answer = json.loads(response.read())
            placed.status = response.status
            placed.event_id = answer.get("event_id")
    except urllib.error.HTTPError as error:
        placed.status = error.code
    except OSError:
        placed.status = -1
    placed.done = time.time()


def _cpu_seconds(runtime: LocalUp) -> dict[str, float]:
    """The runtime's and its functions' CPU seconds so far, and this load client's own (its threads placing
    orders and watching the queues): all of them share the machine's cores."""
    own = os.times()
    return runtime.cpu_seconds() | {"load client": own.user + own.system}


class _QueueWatcher:
    """Receives (and deletes) everything that reaches one subscriber queue, on a thread of its own."""

    def __init__(self, endpoint_url: str, queue_url: str, *, bus: bool) -> None:
        self._seen = Seen()
        self._sqs = _client("sqs", endpoint_url)
        self._queue_url = queue_url
        self._bus = bus
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"watch-{queue_url.rsplit('/', 1)[-1]}")
        self._thread.start()

    def has(self, event_ids: set[str]) -> bool:
        with self._lock:
            return event_ids <= self._seen.sent_ms.keys()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join()

    def seen(self) -> Seen:
        """A copy of what the queue received so far."""
        with self._lock:
            return Seen(dict(self._seen.sent_ms), dict(self._seen.occurred_at_ms), self._seen.copies)

    def _run(self) -> None:
        while not self._stopping.is_set():
            messages = self._sqs.receive_message(
                QueueUrl=self._queue_url,
                MaxNumberOfMessages=10,
                WaitTimeSeconds=1,
                AttributeNames=["SentTimestamp"],
            ).get("Messages", [])
            with self._lock:
                for message in messages:
                    envelope = json.loads(message["Body"])
                    envelope = envelope["detail"] if self._bus else envelope
                    event_id = envelope["event_id"]
                    self._seen.copies += 1
                    self._seen.sent_ms.setdefault(event_id, float(message["Attributes"]["SentTimestamp"]))
                    self._seen.occurred_at_ms[event_id] = _epoch_ms(envelope["occurred_at"])
            if messages:
                self._sqs.delete_message_batch(
                    QueueUrl=self._queue_url,
                    Entries=[
                        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)
                    ],
                )


class _MemoryPeak:
    def __init__(self, runtime: LocalUp) -> None:
        self.rss_bytes = 0
        self.processes = 0
        self._runtime = runtime
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memory")
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stopping.wait(_MEMORY_SAMPLE_S):
            self.rss_bytes = max(self.rss_bytes, self._runtime.rss_bytes())
            self.processes = max(self.processes, len(self._runtime.processes()))


def _epoch_ms(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000


if __name__ == "__main__":
    sys.exit(main())
