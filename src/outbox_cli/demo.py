"""`outbox demo`: the whole system on the local runtime, narrated, with every invariant checked.

Every number printed is computed from what the demo observed on the queues and in the tables; the demo exits
0 only if every check held.
"""

from __future__ import annotations

import contextlib
import io
import json
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from datetime import UTC, datetime
from typing import Any, TextIO

from outbox import outputs as stack_outputs
from outbox.model import RowKey
from outbox_cli import read_models
from outbox_cli.narration import Narrator, percentiles
from outbox_cli.stack_reader import DELIVERY_TIMEOUT_S, StackReader
from outbox_cli.watching import Delivery, QueueWatcher, from_bus, from_topic
from outbox_local.queues import receive_all
from outbox_local.runtime import LocalRuntime, RuntimeOptions
from outbox_local.stream_mapping import StepKind, StepReport

OUTAGE_TIMEOUT_S = 60.0
STEPS = 6
# The demo's sweeper: the shortest grace the publisher allows, and schedules 12x faster (a sweep every 5 s),
# so a stranded event is swept within a minute instead of the deployed defaults' 60 s + up to a minute.
DEMO_SWEEP_GRACE_S = 30
DEMO_SCHEDULE_SPEEDUP = 12.0
SWEEP_TIMEOUT_S = DEMO_SWEEP_GRACE_S + 60.0
# The runtime's alarm periods are the template's divided by the schedule speedup: 5 s "minutes" in the demo.
ALARM_TIMEOUT_S = 30.0


class Demo:
    def __init__(self, runtime: LocalRuntime, narrator: Narrator) -> None:
        self.runtime = runtime
        self.read = StackReader(runtime)
        self.n = narrator
        outputs = runtime.outputs
        sqs = runtime.client("sqs")
        self.topic_queue = QueueWatcher(
            sqs, outputs[stack_outputs.SAMPLE_TOPIC_CONSUMER_QUEUE_URL], "SNS topic -> SQS", from_topic
        )
        self.bus_queue = QueueWatcher(
            sqs, outputs[stack_outputs.SAMPLE_BUS_CONSUMER_QUEUE_URL], "event bus rule -> SQS", from_bus
        )
        self.acknowledged: list[str] = []
        self.poison_seen: list[str] = []
        self.failed_steps: list[StepReport] = []
        self.injected_faults = 0
        """Requests the demo's faults failed, all steps together."""
        self.on_failure_expected = 0
        """Messages the on-failure queue must hold at the end: the discards the demo provoked."""
        for mapping in runtime.mappings:
            mapping.listeners.append(self._observe)

    def _observe(self, report: StepReport) -> None:
        if report.kind in {StepKind.FAILED, StepKind.PARTIAL_FAILURE, StepKind.BISECTED}:
            self.failed_steps.append(report)

    # --- HTTP -----------------------------------------------------------------------------------------

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(  # noqa: S310 - the local API on loopback
            f"{self.runtime.api_url}{path}",
            data=data,
            method=method,
            headers={"content-type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"{}")

    def place(self, customer: str, sku: str, price: str) -> str:
        order = {
            "customer_id": customer,
            "currency": "EUR",
            "items": [{"sku": sku, "quantity": 1, "unit_price": price}],
        }
        status, body = self.call("POST", "/orders", order)
        order_id = str(body.get("order_id", "?"))
        self.n.say(f"{'POST /orders':<33} -> {status}  order {order_id[:8]}  {body.get('status')}")
        self._acknowledge(status, body, 201)
        return str(body.get("order_id", ""))

    def transition(self, order_id: str, action: str) -> None:
        status, body = self.call("POST", f"/orders/{order_id}/{action}", {})
        path = f"POST /orders/{order_id[:8]}…/{action}"
        self.n.say(f"{path:<33} -> {status}  order {order_id[:8]}  {body.get('status')}")
        self._acknowledge(status, body, 200)

    def _acknowledge(self, status: int, body: dict[str, Any], expected: int) -> None:
        if status == expected and body.get("event_id"):
            self.acknowledged.append(str(body["event_id"]))
        else:
            self.n.check(f"the API accepted the request (got {status}: {body})", False)

    # --- the scenario ---------------------------------------------------------------------------------

    def happy_path(self) -> None:
        self.n.step(1, STEPS, "Orders over HTTP: place three, confirm two, cancel one")
        orders = [self.place(f"customer-{i}", f"SKU-{i}", f"{10 * i}.50") for i in (1, 2, 3)]
        self.transition(orders[0], "confirm")
        self.transition(orders[1], "confirm")
        self.transition(orders[2], "cancel")
        self.n.say(
            f"{len(self.acknowledged)} events acknowledged by the API; "
            "waiting for them on both consumer queues…"
        )
        for watcher in (self.topic_queue, self.bus_queue):
            arrived = watcher.wait_for(self.acknowledged, DELIVERY_TIMEOUT_S)
            self.n.check(f"every event arrived on the {watcher.label} queue", arrived)
        self.n.say("arrivals on the topic queue (per order, in order):")
        for delivery in self.topic_queue.deliveries:
            self.n.say(f"  order {delivery.aggregate_id[:8]}  seq {delivery.seq}  {delivery.event_type}")

    def poison(self) -> None:
        self.n.step(2, STEPS, "A poison row: an outbox row whose payload is not JSON")
        table = self.runtime.outputs[stack_outputs.OUTBOX_TABLE_NAME]
        aggregate_id = f"poison-{uuid.uuid4()}"
        event_id = str(uuid.uuid4())
        self.runtime.client("dynamodb").put_item(
            TableName=table,
            Item={
                **RowKey(f"Order#{aggregate_id}", 1).item(),
                "event_id": {"S": event_id},
                "event_type": {"S": "OrderPlaced"},
                "schema_version": {"N": "1"},
                "aggregate_type": {"S": "Order"},
                "aggregate_id": {"S": aggregate_id},
                "payload": {"S": "{this is not json"},
                "occurred_at": {"S": _now_iso()},
                "status": {"S": "PENDING"},
                "attempts": {"N": "0"},
            },
        )
        self.n.say(
            f"wrote row Order#{aggregate_id[:15]}… with payload '{{this is not json' straight to the table"
        )
        poison_url = self.runtime.outputs[stack_outputs.POISON_QUEUE_URL]
        alarm = self.read.alarm_named("PoisonQueueDepth")
        fired = self.read.wait(lambda: self.read.alarm_state(alarm) == "ALARM", ALARM_TIMEOUT_S)
        self.n.check(f"the {alarm} alarm went to ALARM (evaluated locally, as CloudWatch would)", fired)
        found = self._wait_for_poison(poison_url, event_id)
        self.n.check("the poison queue received the whole row", found)
        self.n.say("the poison message was read and removed (an operator would fix the writer, then redrive)")
        cleared = self.read.wait(lambda: self.read.alarm_state(alarm) == "OK", ALARM_TIMEOUT_S)
        self.n.check(f"the {alarm} alarm went back to OK once a period passed without it", cleared)
        self.runtime.wait_until_idle(DELIVERY_TIMEOUT_S)
        self.topic_queue.collect()
        self.bus_queue.collect()
        leaked = event_id in self.topic_queue.event_ids() | self.bus_queue.event_ids()
        self.n.check("no consumer received the poison event", not leaked)
        status = self.read.row_status(f"Order#{aggregate_id}", 1)
        self.n.check(f"the poison row is marked FAILED (status {status})", status == "FAILED")

    def _wait_for_poison(self, url: str, event_id: str) -> bool:
        sqs = self.runtime.client("sqs")
        deadline = time.monotonic() + DELIVERY_TIMEOUT_S
        while time.monotonic() < deadline and event_id not in self.poison_seen:
            self.poison_seen.extend(message["Body"] for message in receive_all(sqs, url, wait_s=1))
            if any(event_id in body for body in self.poison_seen):
                return True
        return False

    def outage(self) -> None:
        self.n.step(3, STEPS, "One destination down: SNS PublishBatch answers HTTP 500 InternalError")
        rule = self.runtime.faults.arm("sns", "PublishBatch", error_code="InternalError", http_status=500)
        failed_before = len(self.failed_steps)
        self.n.say("fault armed at the wire: the real publisher gets a real AWS error response")
        order_id = self.place("customer-outage", "SKU-9", "99.00")
        event_id = self.acknowledged[-1]
        on_bus = self.bus_queue.wait_for([event_id], DELIVERY_TIMEOUT_S)
        hit = self.runtime.faults.wait_for_injections(rule, 1, OUTAGE_TIMEOUT_S)
        self.n.say(
            f"SNS refused {rule.injected} call(s), retries included; the event went out on the bus at once, "
            "and its row stays PENDING recording that the bus took it (delivered_to)"
        )
        self.n.check("the healthy destination did not wait for the one that is down", hit and on_bus)
        self.n.check(
            "nothing was handed back to the stream mapping (the sweeper takes it from the table)",
            len(self.failed_steps) == failed_before,
        )
        self.runtime.faults.disarm(rule)
        self.injected_faults += rule.injected
        self.n.say(
            f"fault disarmed: SNS is back; the sweeper takes the row once it is {DEMO_SWEEP_GRACE_S} s old"
        )
        recovered = self.topic_queue.wait_for([event_id], SWEEP_TIMEOUT_S)
        self.n.check(f"order {order_id[:8]}'s event was delivered on SNS after recovery", recovered)
        self.runtime.wait_until_idle(DELIVERY_TIMEOUT_S)
        self.bus_queue.collect()
        copies = sum(1 for delivery in self.bus_queue.deliveries if delivery.event_id == event_id)
        self.n.check(
            f"the bus received it exactly once ({copies}): each destination served once", copies == 1
        )

    def stranded(self) -> None:
        self.n.step(
            4,
            STEPS,
            "A stranded record: the stream mapping gives up on it; the sweeper delivers it, in order",
        )
        on_failure_url = self.runtime.outputs[stack_outputs.ON_FAILURE_QUEUE_URL]
        refused = self.runtime.faults.arm(
            "sns", "PublishBatch", error_code="AuthorizationError", http_status=403
        )
        unreadable = self.runtime.faults.arm(
            "dynamodb", "BatchGetItem", error_code="InternalServerError", http_status=500
        )
        self.n.say(
            "faults armed: SNS answers 403 AuthorizationError (a bad topic policy), and DynamoDB refuses the "
            "publisher's reads of an event's predecessor"
        )
        order_id = self.place("customer-stranded", "SKU-7", "7.00")
        placed = self.acknowledged[-1]
        self.bus_queue.wait_for([placed], DELIVERY_TIMEOUT_S)
        self.n.say("the first event went out on the bus; SNS refused it, so its row waits PENDING")
        self.transition(order_id, "confirm")
        confirmed = self.acknowledged[-1]
        discarded = self.read.wait(lambda: self.read.queue_depth(on_failure_url) >= 1, OUTAGE_TIMEOUT_S)
        self.n.say(
            f"the second event's predecessor could not be read ({unreadable.injected} time(s)): the "
            "publisher could not tell whether it may go, handed its record back, and the mapping ran out of "
            "retries and discarded it to its on-failure queue (metadata only): the row is still in the table"
        )
        self.n.check("the mapping discarded the second event's record", discarded)
        for rule in (refused, unreadable):
            self.runtime.faults.disarm(rule)
            self.injected_faults += rule.injected
        self.n.say("faults disarmed")
        self.runtime.wait_until_idle(DELIVERY_TIMEOUT_S)
        self.topic_queue.collect()
        self.bus_queue.collect()
        # Not "the second event is not out yet": on a slow machine the grace may be over by now and the
        # sweeper may rightly have delivered both. What must hold on each queue: never the second first.
        watchers = (self.topic_queue, self.bus_queue)
        ahead = any(_arrived_first(watcher.deliveries, confirmed, placed) for watcher in watchers)
        if all(confirmed in watcher.event_ids() for watcher in watchers):
            self.n.say("(the sweeper delivered both already: this machine took longer than the grace)")
        self.n.check("the second event is held, not published ahead of the first", not ahead)
        self.n.say(
            f"the sweeper reads the table for rows PENDING for {DEMO_SWEEP_GRACE_S} s (SWEEP_GRACE_SECONDS; "
            "60 deployed), waiting for it…"
        )
        started = time.monotonic()
        swept = self.topic_queue.wait_for([placed, confirmed], SWEEP_TIMEOUT_S)
        swept = self.bus_queue.wait_for([placed, confirmed], SWEEP_TIMEOUT_S) and swept
        self.n.say(f"swept after {time.monotonic() - started:.0f} s")
        order = [d.event_id for d in self.topic_queue.deliveries if d.event_id in (placed, confirmed)]
        self.n.check("the sweeper delivered both events to both queues", swept)
        self.n.check("first the held-back event, then the discarded one", order[:2] == [placed, confirmed])
        self.on_failure_expected = 1

    def consumers(self) -> None:
        self.n.step(5, STEPS, "Inbox consumers: the order summary and the cancellations ledger")
        self.runtime.wait_until_idle(DELIVERY_TIMEOUT_S)
        outputs = self.runtime.outputs
        orders = self.read.scan(outputs[stack_outputs.ORDERS_TABLE_NAME])
        summary_items = self.read.scan(outputs[stack_outputs.ORDER_SUMMARY_TABLE_NAME])
        expected = read_models.summaries_from_orders(orders)
        deadline = time.monotonic() + DELIVERY_TIMEOUT_S
        while read_models.summaries(summary_items) != expected and time.monotonic() < deadline:
            self.runtime.wait_until_idle(0.5)
            summary_items = self.read.scan(outputs[stack_outputs.ORDER_SUMMARY_TABLE_NAME])
        summary = read_models.summaries(summary_items)
        self.n.say("the order-summary read model (strict order, applied once per event):")
        for order_id, (customer, currency, total, status, seq) in sorted(summary.items()):
            self.n.say(
                f"  order {order_id[:8]}  {customer:<18} {total:>7} {currency}  {status:<10} seq {seq}"
            )
        self.n.check("the order summary equals what the Orders table says", summary == expected)
        ledger = read_models.cancellations(self.read.scan(outputs[stack_outputs.CANCELLATIONS_TABLE_NAME]))
        cancelled = read_models.cancelled_orders(orders)
        self.n.say(f"the cancellations ledger (OrderCancelled only, latest order): {len(ledger)} order(s)")
        self.n.check("the cancellations ledger holds exactly the cancelled orders", ledger == cancelled)
        for output in (
            stack_outputs.ORDER_SUMMARY_DEAD_LETTER_QUEUE_URL,
            stack_outputs.CANCELLATIONS_DEAD_LETTER_QUEUE_URL,
        ):
            depth = self.read.queue_depth(outputs[output])
            self.n.check(f"nothing in {output.removesuffix('QueueUrl')} ({depth})", depth == 0)

    def verify(self) -> None:
        self.n.step(6, STEPS, "Invariants and summary")
        self.runtime.wait_until_idle(DELIVERY_TIMEOUT_S)
        for watcher in (self.topic_queue, self.bus_queue):
            watcher.collect()
        rows = self.read.outbox_rows()
        committed = self.read.committed_rows()
        saved = {row["event_id"]["S"] for row in committed}
        statuses = Counter(row["status"]["S"] for row in rows)
        delivered = self.topic_queue.event_ids() | self.bus_queue.event_ids()
        acknowledged = set(self.acknowledged)
        self.n.check(
            "saved => announced: every acknowledged event reached both queues",
            acknowledged <= self.topic_queue.event_ids() and acknowledged <= self.bus_queue.event_ids(),
        )
        self.n.check(
            "announced => saved: every delivered event was committed (its INSERT)", delivered <= saved
        )
        self.n.check(
            "per-order order kept on both queues",
            not self.topic_queue.out_of_order() and not self.bus_queue.out_of_order(),
        )
        self.n.check(
            "the outbox table holds only the poison row, FAILED: every other row left once out everywhere",
            len(rows) == 1 and statuses.get("FAILED", 0) == 1,
        )
        on_failure = self.read.queue_depth(self.runtime.outputs[stack_outputs.ON_FAILURE_QUEUE_URL])
        self.n.check(
            f"the on-failure destination holds only the discard of step 4 ({on_failure} message(s))",
            on_failure == self.on_failure_expected,
        )
        latencies = [
            d.sent_ms - _epoch_ms(d.occurred_at)
            for d in self.topic_queue.deliveries + self.bus_queue.deliveries
        ]
        stats = [m.stats() for m in self.runtime.mappings]
        self.poison_seen.extend(self.read.drain_bodies(self.runtime.outputs[stack_outputs.POISON_QUEUE_URL]))
        summary = [
            ("events written (the outbox table's INSERTs)", str(len(committed))),
            ("published (rows settled: they left the table)", str(len(committed) - len(rows))),
            (
                "poison (rows FAILED, sent to the poison queue)",
                f"{statuses.get('FAILED', 0)} ({len(self.poison_seen)} on the poison queue)",
            ),
            ("delivered on the SNS topic queue", str(len(self.topic_queue.deliveries))),
            ("delivered on the event bus queue", str(len(self.bus_queue.deliveries))),
            (
                "duplicates seen on the queues",
                f"{self.topic_queue.duplicates() + self.bus_queue.duplicates()}",
            ),
            (
                "injected faults / failed publisher invocations",
                f"{self.injected_faults} / {sum(s.failed_invocations for s in stats)}",
            ),
            ("publisher invocations", str(sum(s.invocations for s in stats))),
            ("on-failure destination messages", str(on_failure)),
            ("end-to-end latency p50 / p99 (row written -> queue)", percentiles(latencies)),
        ]
        self.n.out.write("\n")
        width = max(len(label) for label, _ in summary)
        for label, value in summary:
            self.n.out.write(f"      {label:<{width}}  {value}\n")


def _arrived_first(deliveries: list[Delivery], second: str, first: str) -> bool:
    """Whether the event `second` arrived while `first` had not (yet) arrived."""
    arrivals = [delivery.event_id for delivery in deliveries]
    if second not in arrivals:
        return False
    return first not in arrivals or arrivals.index(second) < arrivals.index(first)


def _now_iso() -> str:
    now = datetime.now(UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def _epoch_ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)


def run_demo(options: RuntimeOptions, out: TextIO) -> int:
    narrator = Narrator(out)
    out.write("outbox demo: the Transactional Outbox on the local runtime (moto, no AWS account)\n")
    demo_environment = {
        "POWERTOOLS_LOG_LEVEL": "CRITICAL",
        "POWERTOOLS_METRICS_DISABLED": "true",
        "SWEEP_GRACE_SECONDS": str(DEMO_SWEEP_GRACE_S),
    }
    speedup = max(options.schedule_speedup, DEMO_SCHEDULE_SPEEDUP)
    runtime = LocalRuntime(
        RuntimeOptions(
            **{**options.__dict__, "function_environment": demo_environment, "schedule_speedup": speedup}
        )
    )
    started = time.monotonic()
    # Function output (Powertools JSON logs, EMF metrics) goes to a buffer: the narration stays readable,
    # and the buffer is shown if a check fails.
    function_output = io.StringIO()
    with contextlib.redirect_stdout(function_output), runtime:
        out.write(
            f"      stack from {options.template_path}: {len(runtime.resource_names())} resources, "
            f"{len(runtime.host.functions) if runtime.host else 0} functions, "
            f"{len(runtime.mappings)} stream mapping(s)\n"
            f"      AWS endpoint {runtime.endpoint_url}   Orders API {runtime.api_url}\n"
        )
        demo = Demo(runtime, narrator)
        demo.happy_path()
        demo.poison()
        demo.outage()
        demo.stranded()
        demo.consumers()
        demo.verify()
    failed = [check for check in narrator.checks if not check.passed]
    elapsed = time.monotonic() - started
    if failed:
        out.write(
            f"\nFAILED: {len(failed)} of {len(narrator.checks)} checks did not hold ({elapsed:.1f} s)\n"
        )
        for check in failed:
            out.write(f"  - {check.description}\n")
        out.write(
            "\nlast function output:\n" + "\n".join(function_output.getvalue().splitlines()[-40:]) + "\n"
        )
        return 1
    out.write(f"\nPASSED: all {len(narrator.checks)} checks held ({elapsed:.1f} s)\n")
    return 0
