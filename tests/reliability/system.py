"""The whole system in one process, driven step by step on a virtual clock: what the reliability suite runs.

Real product code on real boto3 clients against moto in process (`mock_aws`, with the local runtime's atomic
TransactWriteItems):

- the Orders service (sample `orders`: `OrderService` on `DynamoDBOrderRepository`), called as the API
  handler calls it, with idempotency keys;
- the publisher (`outbox_publisher.handler.handle`, wired by `build_publisher` with the adapters it deploys
  with), fed by the local runtime's stream mapping emulator (`StreamMappingRunner`, reading moto's stream in
  process) with the deployed mapping's settings: batch 100, 1 s window, 10 retries, 1 h record age, bisect,
  ReportBatchItemFailures, the INSERT/MODIFY filter (no REMOVE: a settle is a delete), an on-failure queue;
- the sweeper (`build_sweeper`, `Sweeper.run` over one segment: its Scan of the table, its saved cursor, the
  failed index), fired every minute by the local runtime's `ScheduleRunner`;
- the two sample consumers (`OrderSummaryProjection`, strict, fed by the topic; `CancellationLedger`,
  latest, fed by the bus rule for OrderCancelled) through `handle_sqs_batch`, as `SqsConsumerFunction`
  runs them, each from an in-memory SQS queue model (visibility timeout, receive count, redrive to a
  dead-letter list after maxReceiveCount) that the suite can make deliver twice or out of order.

Time is the fake clock's: Lambda deadlines, the engine's sleeps, the mapping's window and record age, the
sweeper's grace and backoff, the consumers' gap wait, the queues' visibility. Nothing sleeps.

A function instance holds its clients and its wiring (the handler module's state); `restart(name)` throws it
away, so the next invocation builds a fresh one (a new Lambda container). A `Crash` raised by a crash point
(tests.reliability.wire) does that.

A settled event's row leaves the table, so the events that were committed are recorded as the writers commit
them (`committed`): the outbox rows of every TransactWriteItems the Orders API got an answer to (read from the
call's parameters by a hook on its client), and every row another writer puts (`write_foreign_rows`,
`write_stored_rows`).

Large payloads: another writer's events can be larger than the writer's offload threshold (64 KiB), so its
writer (outbox.offloading) stores their envelopes in the payload bucket and the rows name them; the topic is
raised to 1 MiB (moto corrected by outbox_local.moto_sns_sizes), the bus keeps the reference's 256 KB, so an
envelope goes inline or as a claim check per destination. The publisher, the sweeper and the consumers read
stored envelopes through their own S3 clients (where the S3 faults land); the wire resolves claim checks
through an S3 client no fault reaches. A committed stored event's payload is read from its object when it
commits.
"""

from __future__ import annotations

import json
import logging
import random
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from moto import mock_aws

from order_consumers.projections import (
    CANCELLED_EVENT_TYPE,
    ORDER_EVENT_TYPES,
    CancellationLedger,
    OrderSummaryProjection,
)
from orders.commands import PlaceOrder, TransitionOrder
from orders.errors import OrderError
from orders.model import Command, OrderLine
from orders.repository import DynamoDBOrderRepository
from orders.service import OrderService
from outbox.clock import format_timestamp
from outbox.dynamodb import DynamoDBTransactionExecutor
from outbox.errors import OutboxError
from outbox.model import AUDIT_KEY_PREFIX, RELEASED_AT, OutboxEvent, RowKey, is_reserved
from outbox.offloading import Offloader
from outbox.payload_refs import MAX_STORED_ENVELOPE_BYTES, StoredEnvelope
from outbox.s3_payloads import S3PayloadStore
from outbox.stream_mapping import PUBLISHER_FILTER_PATTERNS
from outbox.transaction import TableKeys, Transaction
from outbox_inbox.adapters import DynamoDBInboxReader, SqsDeadLetters
from outbox_inbox.batch import handle_sqs_batch
from outbox_inbox.consumer import InboxConsumer
from outbox_inbox.envelope import Envelope
from outbox_inbox.inbox import Effect, Inbox, InboxSettings, Ordering
from outbox_local.filtering import FilterCriteria
from outbox_local.invocation import InvocationResult
from outbox_local.moto_sns_sizes import topic_message_sizes
from outbox_local.moto_streams import InProcessStreams
from outbox_local.moto_transactions import atomic_transactions
from outbox_local.schedules import ScheduleRunner
from outbox_local.stream_mapping import MappingSettings, StepKind
from outbox_local.stream_poller import StreamMappingRunner
from outbox_ops.release import AUDIT_ENTRIES, Action, redrive, skip
from outbox_publisher.adapters import EventBridgeDestination, SnsDestination, SqsPoisonQueue
from outbox_publisher.config import PublisherConfig
from outbox_publisher.deadline import LambdaDeadline
from outbox_publisher.dynamodb_rows import DynamoDBRowUpdater
from outbox_publisher.handler import Publisher, build_publisher, handle
from outbox_publisher.leases import DynamoDBRowClaimer
from outbox_publisher.predecessors import DynamoDBPredecessorReader
from outbox_publisher.routing import Destination
from outbox_sweeper.config import SweeperConfig
from outbox_sweeper.cursor import DynamoDBCursorStore
from outbox_sweeper.failed_index import DynamoDBFailedIndexer
from outbox_sweeper.handler import build_sweeper
from outbox_sweeper.scan import DynamoDBTableScan
from outbox_sweeper.sweep import Sweeper
from tests.reliability import stepping
from tests.reliability.invariants import Committed, History, OrderState, Row, Verdict, check
from tests.reliability.wire import EVENTBRIDGE, SNS, Crash, Publication, Wire
from tests.support.aws import REGION, Tables, create_tables, scan_all
from tests.support.clock import FakeClock, RecordingSleep
from tests.support.inbox import create_inbox_table, sqs_record

ACCOUNT = "123456789012"
SOURCE = "outbox.orders"
BUS = "outbox-bus"
PUBLISHER = "publisher"
SWEEPER = "sweeper"
API = "orders-api"
SUMMARY = "order-summary"
LEDGER = "order-cancellations"
CONSUMERS = (SUMMARY, LEDGER)
FUNCTIONS = (API, PUBLISHER, SWEEPER, *CONSUMERS)
SERVICES = {"dynamodb": "dynamodb", "sns": SNS, "events": EVENTBRIDGE, "sqs": "sqs", "s3": "s3"}
PAYLOAD_BUCKET = "outbox-payloads"
PAYLOAD_PREFIX = "envelopes/"
TOPIC_MAX_MESSAGE_BYTES = 1_048_576
"""The topic's MaximumMessageSize, raised (the construct's option): a 300 KB envelope goes inline on SNS and
as a claim check on the bus (256 KB)."""

# The deployed template's values (cdk.out/OutboxStack.template.json; outbox.stream_mapping, outbox_cdk).
PUBLISHER_TIMEOUT_S = 60
SWEEPER_TIMEOUT_S = 120
CONSUMER_TIMEOUT_S = 30
CONSUMER_VISIBILITY_S = 180
CONSUMER_MAX_RECEIVES = 8
CONSUMER_BATCH = 10
SWEEP_RATE = "rate(1 minute)"
EFFECT_PREFIX = "effect#"
REORDER_HOLD_S = 20.0
"""How long a reordered delivery is held back for the ones after it to overtake."""
_ONE_ATTEMPT = Config(
    retries={"mode": "standard", "total_max_attempts": 1}, connect_timeout=1, read_timeout=2
)
_CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


class VirtualContext:
    """A Lambda context whose remaining time follows the fake clock."""

    def __init__(self, clock: FakeClock, timeout_s: float, function: str, request: int) -> None:
        self._clock = clock
        self._deadline = clock.seconds() + timeout_s
        self.function_name = function
        self.memory_limit_in_mb = 512
        self.invoked_function_arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{function}"
        self.aws_request_id = f"request-{request}"
        self.log_group_name = f"/aws/lambda/{function}"
        self.log_stream_name = "stream"
        self.function_version = "$LATEST"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - self._clock.seconds()) * 1000))


@dataclass
class QueuedMessage:
    message_id: str
    body: str
    event_id: str
    visible_at: float
    first_received: float | None = None
    receives: int = 0
    index: int = 0
    """Its place in the order the queue was sent to."""
    held: bool = False
    """Sent with a delay, for the messages sent after it to overtake (a reordered delivery)."""


@dataclass
class ConsumerQueue:
    """An SQS queue as Lambda's SQS mapping sees it (standard queue, at-least-once, best-effort order)."""

    name: str
    clock: Callable[[], float]
    messages: list[QueuedMessage] = field(default_factory=list)
    dead_letters: list[QueuedMessage] = field(default_factory=list)
    sent: int = 0
    duplicates_sent: int = 0
    """Extra copies sent (a duplicate delivery)."""
    reordered: int = 0
    """Held messages that a message sent after them overtook (received first): reorderings made."""
    redeliveries: int = 0
    """Receives of a message received before (its visibility timeout expired: not deleted)."""
    last_received: int = 0

    def send(self, body: str, event_id: str, *, copies: int = 1, hold_s: float = 0.0) -> None:
        """`copies` of the message; with `hold_s`, the first is invisible that long, so later ones overtake
        it."""
        for copy in range(copies):
            self.sent += 1
            self.duplicates_sent += 1 if copy else 0
            held = hold_s > 0 and copy == 0
            visible_at = self.clock() + (hold_s if held else 0.0)
            message = QueuedMessage(
                f"{self.name}-{self.sent}", body, event_id, visible_at, index=self.sent, held=held
            )
            self.messages.append(message)

    def receive(self) -> list[QueuedMessage]:
        now = self.clock()
        batch: list[QueuedMessage] = []
        for message in list(self.messages):
            if message.visible_at > now:
                continue
            if message.receives >= CONSUMER_MAX_RECEIVES:
                # The queue's redrive policy: past maxReceiveCount, to the dead-letter queue.
                self.messages.remove(message)
                self.dead_letters.append(message)
                continue
            message.receives += 1
            if message.receives > 1:
                self.redeliveries += 1
            elif message.held and self.last_received > message.index:
                self.reordered += 1
            self.last_received = max(self.last_received, message.index)
            message.first_received = message.first_received if message.first_received is not None else now
            message.visible_at = now + CONSUMER_VISIBILITY_S
            batch.append(message)
            if len(batch) == CONSUMER_BATCH:
                break
        return batch

    def delete(self, message: QueuedMessage) -> None:
        self.messages.remove(message)

    def next_visible(self) -> float | None:
        return min((m.visible_at for m in self.messages), default=None)


class CountedEffect:
    """The consumer's effect plus one counter per event, in the same transaction: the count of effects that
    committed, which exactly-once makes 1 for every applied event."""

    def __init__(self, inner: Effect, table: str) -> None:
        self._inner = inner
        self._table = TableKeys(table, "pk")

    def __call__(self, envelope: Envelope, transaction: Transaction) -> None:
        self._inner(envelope, transaction)
        transaction.update(
            self._table,
            {"pk": {"S": f"{EFFECT_PREFIX}{envelope.event_id}"}},
            "ADD applied :one",
            label="effect count",
            values={":one": {"N": "1"}},
        )


@dataclass(frozen=True)
class Outage:
    """A destination refusing every call of every function from `start` to `until` (virtual seconds)."""

    kind: str
    destination: str
    start: float
    until: float


@dataclass
class CommandOutcome:
    command: str
    order_id: str | None
    ok: bool
    error: str | None = None


@dataclass
class Resources:
    tables: Tables
    topic_arn: str
    poison_queue: str
    on_failure_queue: str
    on_failure_arn: str
    inbox_tables: dict[str, str]
    dead_letter_queues: dict[str, str]


class System:
    def __init__(self, *, seed: int = 0, sweep_grace_s: int = 60) -> None:
        self.clock = FakeClock()
        self.sleep = RecordingSleep(self.clock)
        self.wire = Wire(self.clock.seconds)
        self.random = random.Random(seed)  # noqa: S311 - a schedule's choices, not secrets
        self.session = boto3.session.Session(region_name=REGION, **_CREDENTIALS)
        self.admin = {name: self.session.client(name) for name in ("dynamodb", "sqs", "sns", "events", "s3")}
        self.resources = self._provision()
        self.payloads = S3PayloadStore(self.admin["s3"], PAYLOAD_BUCKET, prefix=PAYLOAD_PREFIX)
        """Another writer's store, and what the wire resolves claim checks with (no fault reaches it)."""
        self.wire.payloads = self.payloads
        self.env = {
            "OUTBOX_TABLE_NAME": self.resources.tables.outbox,
            "TOPIC_ARN": self.resources.topic_arn,
            "EVENT_BUS_NAME": BUS,
            "EVENT_SOURCE": SOURCE,
            "POISON_QUEUE_URL": self.resources.poison_queue,
            "SWEEP_GRACE_SECONDS": str(sweep_grace_s),
            "TOPIC_MAX_MESSAGE_BYTES": str(TOPIC_MAX_MESSAGE_BYTES),
        }
        self._instances: dict[str, Any] = {}
        self.restarts: dict[str, int] = dict.fromkeys(FUNCTIONS, 0)
        self.failed_invocations: dict[str, int] = dict.fromkeys(FUNCTIONS, 0)
        self.queues = {name: ConsumerQueue(name, self.clock.seconds) for name in CONSUMERS}
        self.duplicate_deliveries = 0
        """While > 0, each delivery to a consumer queue is sent twice (and the count goes down)."""
        self.reorder_deliveries = 0
        """While > 0, each delivery to a consumer queue is held back `REORDER_HOLD_S`, for the deliveries
        after it to overtake (and the count goes down)."""
        self.stream_stalled = False
        self.injected_poison: set[str] = set()
        self.committed: dict[str, Committed] = {}
        """Every event a writer committed, by event_id, in commit order (see the module's docstring)."""
        self.unstreamed: set[str] = set()
        self.stored: dict[str, str] = {}
        """Envelopes another writer stored in the payload bucket, by event_id (what an operator restores)."""
        self.large_payloads: set[str] = set()
        """The events of `large_payloads` steps (tests.reliability.schedules)."""
        self.missing_objects: dict[str, str] = {}
        """Stored envelopes deleted after their row committed, by event_id: the code the row's FAILED reason
        must name (`write_stored_rows(missing=...)`)."""
        self.failed_reasons: dict[str, str] = {}
        """The `last_error` of each injected poison row the operator found FAILED."""
        """Foreign rows whose stream records the mapping never got (`write_foreign_rows(discard=...)`)."""
        self.commands: list[CommandOutcome] = []
        self.retry_later: list[tuple[Any, str, str | None, CommandOutcome]] = []
        """Commands a client may retry with the same idempotency key (tests.reliability.schedules)."""
        self.operator_plan: dict[str, str] = {}
        """Injected poison event_id -> what the operator does with it once FAILED: "redrive" or "skip"."""
        self.fault_log: Counter[str] = Counter()
        """Faults armed, by kind."""
        self.operator_actions: Counter[str] = Counter()
        """What the operator did with injected poison: operator_redrive, operator_skip."""
        self.pending_trim_at: float | None = None
        self.outages: list[Outage] = []
        """Single-destination outages armed (tests.reliability.schedules waits for each to end)."""
        self.wire.on_publication.append(self._deliver)
        self.wire.on_call.append(self._committed_by_the_api)
        self.streams = _TrimmableStreams(REGION, self.clock.seconds, self.resources.tables.outbox_stream_arn)
        self.mapping = StreamMappingRunner(
            "PublisherStreamMapping",
            MappingSettings(
                function_arn=f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{PUBLISHER}",
                stream_arn=self.resources.tables.outbox_stream_arn,
                batch_size=100,
                maximum_batching_window_s=1.0,
                maximum_retry_attempts=10,
                maximum_record_age_s=3600,
                bisect_batch_on_function_error=True,
                report_batch_item_failures=True,
                filters=FilterCriteria.from_template(
                    {"Filters": [{"Pattern": json.dumps(p)} for p in PUBLISHER_FILTER_PATTERNS]}
                ),
                on_failure_destination_arn=self.resources.on_failure_arn,
                retry_delay_s=0.2,
            ),
            streams_client=self.streams,
            invoke=self.invoke_publisher,
            send_to_destination=lambda document: self.admin["sqs"].send_message(
                QueueUrl=self.resources.on_failure_queue, MessageBody=json.dumps(document)
            ),
            clock=self.clock.seconds,
            region=REGION,
        )
        self.schedules = ScheduleRunner(
            lambda _arn, _event: self.invoke_sweeper(), self.clock.seconds, region=REGION
        )
        self.schedules.add("sweep", f"arn:aws:events:{REGION}:{ACCOUNT}:rule/sweep", SWEEP_RATE, SWEEPER)
        self._ids = random.Random(seed ^ 0x5EED)  # noqa: S311 - deterministic ids for a replayable run

    # --- provisioning -----------------------------------------------------------------------------------

    def _provision(self) -> Resources:
        dynamodb, sqs, sns, events = (self.admin[n] for n in ("dynamodb", "sqs", "sns", "events"))
        tables = create_tables(dynamodb)

        def queue(name: str) -> tuple[str, str]:
            url = sqs.create_queue(QueueName=name)["QueueUrl"]
            arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
                "QueueArn"
            ]
            return str(url), str(arn)

        topic_arn = sns.create_topic(
            Name="outbox-events", Attributes={"MaximumMessageSize": str(TOPIC_MAX_MESSAGE_BYTES)}
        )["TopicArn"]
        self.admin["s3"].create_bucket(Bucket=PAYLOAD_BUCKET)
        events.create_event_bus(Name=BUS)
        poison_queue, _ = queue("outbox-poison")
        on_failure_queue, on_failure_arn = queue("outbox-on-failure")
        inbox_tables = {name: create_inbox_table(dynamodb, f"{name}-table") for name in CONSUMERS}
        dead_letters = {name: queue(f"{name}-dead-letters")[0] for name in CONSUMERS}
        return Resources(
            tables, topic_arn, poison_queue, on_failure_queue, on_failure_arn, inbox_tables, dead_letters
        )

    # --- function instances (module state) ---------------------------------------------------------------

    def client(self, function: str, service: str) -> Any:
        """A client of this function's instance, its hooks on (faults, crash points, the wire record)."""
        client = self.session.client(service, config=_ONE_ATTEMPT)
        return self.wire.instrument(client, function, SERVICES[service])

    def restart(self, function: str) -> None:
        """The function's container is gone: the next invocation builds a fresh instance."""
        instance = self._instances.pop(function, None)
        if instance is not None:
            self.restarts[function] += 1

    def instance(self, function: str) -> Any:
        if function not in self._instances:
            self._instances[function] = self._build(function)
        return self._instances[function]

    def _build(self, function: str) -> Any:
        if function == API:
            repository = DynamoDBOrderRepository(
                self.client(API, "dynamodb"),
                orders_table=self.resources.tables.orders,
                outbox_table=self.resources.tables.outbox,
            )
            return OrderService(repository, clock=self.clock, new_id=self._new_id)
        if function == PUBLISHER:
            config = PublisherConfig.from_env(self.env)
            return build_publisher(config, **self._ports(function, config))
        if function == SWEEPER:
            sweeper_config = SweeperConfig.from_env(self.env)
            dynamodb = self.client(function, "dynamodb")
            table = sweeper_config.publisher.table_name
            return build_sweeper(
                sweeper_config,
                scan=DynamoDBTableScan(dynamodb, table),
                cursors=DynamoDBCursorStore(dynamodb, table),
                indexer=DynamoDBFailedIndexer(dynamodb, table),
                **self._ports(function, sweeper_config.publisher, dynamodb),
            )
        return self._consumer(function)

    def _ports(self, function: str, config: PublisherConfig, dynamodb: Any = None) -> dict[str, Any]:
        dynamodb = dynamodb or self.client(function, "dynamodb")
        table = config.table_name
        return {
            "destinations": {
                Destination.SNS: SnsDestination(self.client(function, "sns"), self.resources.topic_arn),
                Destination.EVENTBRIDGE: EventBridgeDestination(self.client(function, "events"), BUS, SOURCE),
            },
            "poison_queue": SqsPoisonQueue(self.client(function, "sqs"), config.poison_queue_url),
            # One call after another: a crash point falls between two named calls (threads: test_row_updates).
            "updater": DynamoDBRowUpdater(dynamodb, table, sleep=self.sleep, random=lambda: 0.5, workers=1),
            "predecessors": DynamoDBPredecessorReader(dynamodb, table),
            "claimer": DynamoDBRowClaimer(dynamodb, table),
            "payloads": S3PayloadStore(_ClientOnFirstUse(lambda: self.client(function, "s3"))),
            "clock": self.clock,
            "sleep": self.sleep,
            "random": lambda: 0.5,
        }

    def _consumer(self, function: str) -> InboxConsumer:
        dynamodb = self.client(function, "dynamodb")
        table = self.resources.inbox_tables[function]
        strict = function == SUMMARY
        projection: Effect = OrderSummaryProjection(table) if strict else CancellationLedger(table)
        inbox = Inbox(
            InboxSettings(table, function, Ordering.STRICT if strict else Ordering.LATEST),
            DynamoDBTransactionExecutor(dynamodb),
            DynamoDBInboxReader(dynamodb),
            clock=self.clock,
        )
        return InboxConsumer(
            inbox,
            dead_letters=SqsDeadLetters(
                self.client(function, "sqs"), self.resources.dead_letter_queues[function], function
            ),
            effect=CountedEffect(projection, table),
            clock=self.clock,
            payloads=S3PayloadStore(_ClientOnFirstUse(lambda: self.client(function, "s3"))),
        )

    def _new_id(self) -> uuid.UUID:
        return uuid.UUID(int=self._ids.getrandbits(128), version=4)

    # --- invocations -------------------------------------------------------------------------------------

    def _invocation(self, function: str) -> AbstractContextManager[None]:
        return stepping.invocation(
            self.wire,
            function,
            restart=lambda: self.restart(function),
            stamp=self.streams.stamp,
            recorded=self._recorded,
        )

    def _recorded(self, publications: list[Publication]) -> frozenset[tuple[str, str]]:
        """The deliveries among `publications` that the table records now (read with the admin client): the
        event's row is gone (settled or skipped), or names the destination in its `delivered_to`."""
        if not publications:
            return frozenset()
        keys = {(p.aggregate_key, p.seq) for p in publications}
        stored: dict[tuple[str, int], dict[str, Any]] = {}
        table = self.resources.tables.outbox
        pending = [RowKey(key, seq).item() for key, seq in keys]
        while pending:
            chunk, pending = pending[:100], pending[100:]
            answer = self.admin["dynamodb"].batch_get_item(
                RequestItems={table: {"Keys": chunk, "ConsistentRead": True}}
            )
            for item in answer["Responses"].get(table, []):
                stored[(item["aggregate_key"]["S"], int(item["seq"]["N"]))] = item
            pending += answer.get("UnprocessedKeys", {}).get(table, {}).get("Keys", [])
        recorded: set[tuple[str, str]] = set()
        for publication in publications:
            item = stored.get((publication.aggregate_key, publication.seq))
            same = item is not None and item.get("event_id", {}).get("S") == publication.event_id
            delivered = item.get("delivered_to", {}).get("SS", []) if item is not None else []
            if item is None or (same and publication.destination in delivered):
                recorded.add((publication.event_id, publication.destination))
        return frozenset(recorded)

    def invoke_publisher(self, event: dict[str, Any]) -> InvocationResult:
        try:
            with self._invocation(PUBLISHER):
                invocation = self.wire.invocations[-1]
                publisher: Publisher = self.instance(PUBLISHER)
                context = VirtualContext(
                    self.clock, PUBLISHER_TIMEOUT_S, PUBLISHER, len(self.wire.invocations)
                )
                invocation.retried = True  # until it answers without batch item failures
                payload = handle(event, context, publisher)
                invocation.retried = bool(payload.get("batchItemFailures"))
                return InvocationResult(payload=payload)
        except Crash as crash:
            self.failed_invocations[PUBLISHER] += 1
            return InvocationResult(error_type="Runtime.ExitError", error_message=crash.where)
        except Exception as error:  # a function error: the mapping retries or bisects
            self.failed_invocations[PUBLISHER] += 1
            return InvocationResult(error_type=type(error).__name__, error_message=str(error))

    def invoke_sweeper(self) -> InvocationResult:
        try:
            with self._invocation(SWEEPER):
                sweeper: Sweeper = self.instance(SWEEPER)
                context = VirtualContext(self.clock, SWEEPER_TIMEOUT_S, SWEEPER, len(self.wire.invocations))
                report = sweeper.run(LambdaDeadline(context))
                return InvocationResult(payload={"swept": report.swept})
        except Crash as crash:
            self.failed_invocations[SWEEPER] += 1
            return InvocationResult(error_type="Runtime.ExitError", error_message=crash.where)
        except Exception as error:  # the schedule never retries (MaximumRetryAttempts 0): the next run will
            self.failed_invocations[SWEEPER] += 1
            return InvocationResult(error_type=type(error).__name__, error_message=str(error))

    def poll_consumer(self, function: str) -> bool:
        """One receive and invocation of the consumer's SQS mapping; False when nothing was visible."""
        queue = self.queues[function]
        batch = queue.receive()
        if not batch:
            return False
        records = [
            sqs_record(
                m.body,
                first_received=datetime.fromtimestamp(m.first_received or self.clock.seconds(), UTC),
                queue_arn=f"arn:aws:sqs:{REGION}:{ACCOUNT}:{function}-queue",
                message_id=m.message_id,
            )
            for m in batch
        ]
        try:
            with self._invocation(function):
                consumer: InboxConsumer = self.instance(function)
                context = VirtualContext(self.clock, CONSUMER_TIMEOUT_S, function, len(self.wire.invocations))
                response = handle_sqs_batch({"Records": records}, consumer, context)
        except Crash:
            self.failed_invocations[function] += 1
            return True  # nothing deleted: every message comes back after its visibility timeout
        except Exception:
            self.failed_invocations[function] += 1
            return True
        failed = {item["itemIdentifier"] for item in response.get("batchItemFailures", [])}
        for message in batch:
            if message.message_id not in failed:
                queue.delete(message)
        return True

    def _deliver(self, publication: Publication) -> None:
        """SNS -> the summary's queue (raw delivery, its filter policy on Order event types); the bus ->
        the ledger's queue (its rule: OrderCancelled), as the body EventBridge gives an SQS target."""
        if publication.destination == SNS and publication.event_type in ORDER_EVENT_TYPES:
            self._enqueue(SUMMARY, publication.wire_body, publication.event_id)
        elif publication.destination == EVENTBRIDGE and publication.event_type == CANCELLED_EVENT_TYPE:
            envelope = json.loads(publication.wire_body)
            body = json.dumps(
                {
                    "version": "0",
                    "id": str(self._new_id()),
                    "detail-type": envelope["event_type"],
                    "source": SOURCE,
                    "account": ACCOUNT,
                    "time": self.clock().strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "region": REGION,
                    "resources": [],
                    "detail": envelope,
                }
            )
            self._enqueue(LEDGER, body, publication.event_id)

    def _enqueue(self, function: str, body: str, event_id: str) -> None:
        queue = self.queues[function]
        copies = 1
        if self.duplicate_deliveries > 0:
            self.duplicate_deliveries -= 1
            copies = 2
        hold_s = 0.0
        if self.reorder_deliveries > 0:
            self.reorder_deliveries -= 1
            hold_s = REORDER_HOLD_S
        queue.send(body, event_id, copies=copies, hold_s=hold_s)

    # --- the orders API ------------------------------------------------------------------------------------

    def place(self, customer: str, *, key: str | None = None) -> CommandOutcome:
        request = PlaceOrder(customer, "EUR", (OrderLine("SKU-1", 2, Decimal("9.99")),))
        return self._command("place", None, lambda s: s.place(request, idempotency_key=key))

    def transition(
        self, command: Command, order_id: str, *, key: str | None = None, expected_version: int | None = None
    ) -> CommandOutcome:
        request = TransitionOrder(command, order_id, expected_version)
        name = command.value.lower()
        return self._command(name, order_id, lambda s: s.transition(request, idempotency_key=key))

    def _command(self, name: str, order_id: str | None, run: Callable[[OrderService], Any]) -> CommandOutcome:
        try:
            with self._invocation(API):
                result = run(self.instance(API))
            outcome = CommandOutcome(name, result.order.order_id, True)
        except Crash as crash:
            outcome = CommandOutcome(name, order_id, False, f"crash: {crash.where}")
        except (OrderError, OutboxError, ClientError, BotoCoreError) as error:
            outcome = CommandOutcome(name, order_id, False, type(error).__name__)
        self.commands.append(outcome)
        return outcome

    # --- another writer, an operator ----------------------------------------------------------------------

    def _committed_by_the_api(
        self, function: str, service: str, operation: str, params: dict[str, Any]
    ) -> None:
        """The outbox rows of a write the Orders API got an answer to: committed (a transaction is atomic)."""
        if function != API or service != "dynamodb":
            return
        if operation == "TransactWriteItems":
            puts = [action["Put"] for action in params.get("TransactItems", []) if "Put" in action]
        elif operation == "PutItem":
            puts = [params]
        else:
            return
        for put in puts:
            if put.get("TableName") == self.resources.tables.outbox:
                self._commit(put["Item"])

    def _commit(self, item: dict[str, Any]) -> None:
        stored = StoredEnvelope.of_item(item)
        if stored is None:
            payload = item.get("payload", {}).get("S", "")
        else:
            # A stored envelope is committed as its object holds it when the row commits.
            text = self.payloads.read(stored.ref, max_bytes=MAX_STORED_ENVELOPE_BYTES)
            payload = json.dumps(json.loads(text)["payload"])
        event = Committed(
            aggregate_key=item["aggregate_key"]["S"],
            seq=int(item["seq"]["N"]),
            event_id=item["event_id"]["S"],
            event_type=item.get("event_type", {}).get("S", ""),
            payload=payload,
        )
        self.committed[event.event_id] = event

    def write_foreign_rows(
        self,
        aggregate_id: str,
        *,
        poison_first: bool,
        count: int = 2,
        discard: Callable[[int], bool] = lambda _seq: False,
    ) -> list[str]:
        """Rows another writer puts straight into the table (an `Invoice` aggregate no consumer reads), with
        the contract's attributes only (no index attribute of any kind): with `poison_first`, its first row's
        payload is not JSON. The stream records of the rows whose seq `discard` names never reach the mapping
        (dropped before it reads them): only the sweeper can find those rows, in the table."""
        ids = []
        for seq in range(1, count + 1):
            event_id = str(self._new_id())
            ids.append(event_id)
            item = {
                "aggregate_key": {"S": f"Invoice#{aggregate_id}"},
                "seq": {"N": str(seq)},
                "event_id": {"S": event_id},
                "event_type": {"S": "InvoiceIssued"},
                "schema_version": {"N": "1"},
                "aggregate_type": {"S": "Invoice"},
                "aggregate_id": {"S": aggregate_id},
                "payload": {"S": "{not json" if poison_first and seq == 1 else json.dumps({"n": seq})},
                "occurred_at": {"S": format_timestamp(self.clock())},
                "status": {"S": "PENDING"},
            }
            self._put_foreign_row(item, discard=discard(seq))
            if poison_first and seq == 1:
                self.injected_poison.add(event_id)
        return ids

    def write_stored_rows(
        self,
        aggregate_id: str,
        sizes: tuple[int, ...],
        *,
        missing: Callable[[int], bool] = lambda _seq: False,
    ) -> list[str]:
        """Another writer's `Invoice` aggregate, one row per size (its payload's bytes), written as the
        library's writer writes them with a payload store (outbox.offloading): an envelope over 64 KiB is
        stored in the payload bucket first, and the row names it. The objects of the rows whose seq `missing`
        names are deleted once their rows committed (gone, as after the bucket's lifecycle): that event is
        poison, FAILED with `PayloadMissing` in its reason, and never published."""
        offloader = Offloader(self.payloads)
        ids = []
        for seq, size in enumerate(sizes, start=1):
            event = OutboxEvent.new(
                aggregate_type="Invoice",
                aggregate_id=aggregate_id,
                seq=seq,
                event_type="InvoiceIssued",
                payload={"n": seq, "document": "x" * size},
                clock=self.clock,
                new_id=self._new_id,
            )
            ids.append(event.event_id)
            item = offloader.row_of(event)
            stored = StoredEnvelope.of_item(item)
            if stored is not None:
                self.stored[event.event_id] = event.envelope_json()
            self._put_foreign_row(item)
            if stored is not None and missing(seq):
                self.admin["s3"].delete_object(Bucket=stored.ref.bucket, Key=stored.ref.key)
                self.missing_objects[event.event_id] = "PayloadMissing"
                self.injected_poison.add(event.event_id)
        return ids

    def _put_foreign_row(self, item: dict[str, Any], *, discard: bool = False) -> None:
        written = self.streams.written()
        self.admin["dynamodb"].put_item(
            TableName=self.resources.tables.outbox,
            Item=item,
            ConditionExpression="attribute_not_exists(aggregate_key)",
        )
        self._commit(item)
        if discard:
            self.streams.discard(range(written, self.streams.written()))
            self.unstreamed.add(item["event_id"]["S"])

    def failed_rows(self) -> list[dict[str, Any]]:
        return [row for row in self.outbox_rows() if row["status"]["S"] == "FAILED"]

    def operator_fix_and_redrive(self, row: dict[str, Any]) -> None:
        """The operator fixes the payload (the writer's bug), then redrives: same event_id."""
        key = RowKey(row["aggregate_key"]["S"], int(row["seq"]["N"]))
        fixed = json.dumps({"fixed": True})
        self.admin["dynamodb"].update_item(
            TableName=self.resources.tables.outbox,
            Key=key.item(),
            UpdateExpression="SET payload = :payload",
            ExpressionAttributeValues={":payload": {"S": fixed}},
        )
        # What the event holds from now on: what it may be published with.
        self._commit({**row, "payload": {"S": fixed}})
        redrive(
            self.admin["dynamodb"],
            self.resources.tables.outbox,
            key,
            reason="fixed",
            actor="ops",
            now=self.clock(),
        )

    def operator_restore_and_redrive(self, row: dict[str, Any]) -> None:
        """The operator puts the stored envelope back (from a backup), then redrives: same event_id."""
        stored = StoredEnvelope.of_item(row)
        if stored is None:
            raise ValueError("the row names no stored envelope")
        self.admin["s3"].put_object(
            Bucket=stored.ref.bucket, Key=stored.ref.key, Body=self.stored[row["event_id"]["S"]].encode()
        )
        key = RowKey(row["aggregate_key"]["S"], int(row["seq"]["N"]))
        redrive(
            self.admin["dynamodb"],
            self.resources.tables.outbox,
            key,
            reason="restored",
            actor="ops",
            now=self.clock(),
        )

    def operator_skip(self, row: dict[str, Any]) -> None:
        key = RowKey(row["aggregate_key"]["S"], int(row["seq"]["N"]))
        skip(
            self.admin["dynamodb"],
            self.resources.tables.outbox,
            key,
            reason="skip",
            actor="ops",
            now=self.clock(),
        )

    # --- driving --------------------------------------------------------------------------------------------

    def round(self) -> tuple[bool, bool]:
        """One round of every poller: (did work, only waits for time to pass)."""
        worked = False
        waiting = False
        self.streams.stamp()
        if not self.stream_stalled:
            for report in self.mapping.poll_once():
                if report.kind is StepKind.WAITING:
                    waiting = True
                elif report.kind is not StepKind.IDLE:
                    worked = True
        if self.schedules.tick():
            worked = True
        for function in CONSUMERS:
            while self.poll_consumer(function):
                worked = True
        return worked, waiting

    def run_for(self, seconds: float, *, max_rounds: int = 100_000) -> None:
        """Let the system run for `seconds` of virtual time."""
        self.run_until(lambda: False, deadline=self.clock.seconds() + seconds, max_rounds=max_rounds)

    def run_until(self, done: Callable[[], bool], *, deadline: float, max_rounds: int = 100_000) -> bool:
        return stepping.run_until(
            self.clock, self.round, self._next_due, done, deadline=deadline, max_rounds=max_rounds
        )

    def _next_due(self) -> float:
        dues = [self.clock.seconds() + (self.schedules.seconds_until_next() or 60.0)]
        dues += [due for queue in self.queues.values() if (due := queue.next_visible()) is not None]
        return min(dues)

    def settled(self) -> bool:
        """Nothing left to do: no PENDING row, no record in the mapping, no message in a consumer queue."""
        if self.mapping.stats().backlog or any(queue.messages for queue in self.queues.values()):
            return False
        return not any(row.get("status", {}).get("S") == "PENDING" for row in self.outbox_rows())

    def trim_stream(self) -> None:
        """The records not read yet are gone (older than the stream's 24 hours): the mapping skips them."""
        self.streams.trim_next_read = True

    # --- reading the tables --------------------------------------------------------------------------------

    def outbox_rows(self) -> list[dict[str, Any]]:
        """The events' rows left in the outbox table (not its own: audit records, the sweeper's cursor)."""
        return [row for row in self._outbox_items() if not is_reserved(row["aggregate_key"]["S"])]

    def _outbox_items(self) -> list[dict[str, Any]]:
        return scan_all(self.admin["dynamodb"], self.resources.tables.outbox)

    def skipped(self) -> frozenset[str]:
        """The events an operator skipped, as their audit records say."""
        skipped: set[str] = set()
        for item in self._outbox_items():
            if not item["aggregate_key"]["S"].startswith(AUDIT_KEY_PREFIX):
                continue
            entries = item.get(AUDIT_ENTRIES, {}).get("L", [])
            if any(entry["M"]["action"]["S"] == Action.SKIP.value for entry in entries):
                skipped.add(item["event_id"]["S"])
        return frozenset(skipped)

    def orders(self) -> list[dict[str, Any]]:
        return [
            item
            for item in scan_all(self.admin["dynamodb"], self.resources.tables.orders)
            if item["pk"]["S"].startswith("ORDER#")
        ]

    def inbox_items(self, function: str) -> list[dict[str, Any]]:
        return scan_all(self.admin["dynamodb"], self.resources.inbox_tables[function])

    def history(self) -> History:
        """What the checker reads: the tables, the wire, the consumers' state."""
        rows = [
            Row(
                aggregate_key=item["aggregate_key"]["S"],
                seq=int(item["seq"]["N"]),
                event_id=item.get("event_id", {}).get("S", ""),
                status=item.get("status", {}).get("S", ""),
                last_error=item.get("last_error", {}).get("S"),
                released=RELEASED_AT in item,
            )
            for item in self.outbox_rows()
        ]
        orders = [
            OrderState(order_id_of(item), item["status"]["S"], int(item["last_seq"]["N"]))
            for item in self.orders()
        ]
        effects: dict[str, dict[str, int]] = {}
        summary: dict[str, tuple[str, int]] = {}
        ledger: set[str] = set()
        for function in CONSUMERS:
            counts = effects.setdefault(function, {})
            for item in self.inbox_items(function):
                key = item["pk"]["S"]
                if key.startswith(EFFECT_PREFIX):
                    counts[key.removeprefix(EFFECT_PREFIX)] = int(item["applied"]["N"])
                elif key.startswith("order#"):
                    summary[item["order_id"]["S"]] = (item["status"]["S"], int(item["last_seq"]["N"]))
                elif key.startswith("cancellation#"):
                    ledger.add(item["order_id"]["S"])
        return History(
            committed=list(self.committed.values()),
            rows=rows,
            orders=orders,
            publications=list(self.wire.published),
            skipped=self.skipped(),
            injected_poison=frozenset(self.injected_poison),
            poison_sent=frozenset(self.wire.poison_sent),
            effects=effects,
            summary=summary,
            ledger=frozenset(ledger),
            dead_letters={function: self.dead_lettered(function) for function in CONSUMERS},
            invocations={invocation.number: invocation for invocation in self.wire.invocations},
            expected_reasons=dict(self.missing_objects),
            unreadable_claims=list(self.wire.unreadable),
            failed_reasons=self._failed_reasons(),
        )

    def _failed_reasons(self) -> dict[str, str]:
        """The reason of every injected poison row: as the operator found it FAILED, or as it is now."""
        reasons = dict(self.failed_reasons)
        for row in self.failed_rows():
            if "last_error" in row:
                reasons.setdefault(row["event_id"]["S"], row["last_error"]["S"])
        return reasons

    def verdict(self) -> Verdict:
        return check(self.history())

    def dead_lettered(self, function: str) -> int:
        attributes = self.admin["sqs"].get_queue_attributes(
            QueueUrl=self.resources.dead_letter_queues[function],
            AttributeNames=["ApproximateNumberOfMessages"],
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"]) + len(self.queues[function].dead_letters)


class _ClientOnFirstUse:
    """A function's real S3 client (its hooks on), built when the function first reads a stored envelope, as
    the product's own store builds its client (outbox.s3_payloads): most invocations read none, and building
    an S3 client for every function instance of thousands of schedules costs seconds."""

    def __init__(self, build: Callable[[], Any]) -> None:
        self._build = build
        self._client: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._client is None:
            self._client = self._build()
        return getattr(self._client, name)


class _TrimmableStreams(InProcessStreams):
    """moto's stream in process, on the virtual clock, and a trim: the next read jumps past every record not
    read yet.

    moto stamps a record's ApproximateCreationDateTime with the wall clock, which would keep the mapping's
    record age (now - created) off the virtual clock. Each record is stamped here with the virtual time it
    was first seen at instead (`stamp`, called after every invocation, every round and every read: within a
    round of its write), and handed over with that stamp."""

    def __init__(self, region: str, clock: Callable[[], float], stream_arn: str) -> None:
        super().__init__(region)
        self.trim_next_read = False
        self.trimmed = 0
        self.discarded: set[int] = set()
        """Positions of records dropped before the mapping reads them (`discard`)."""
        self._clock = clock
        self._stream_arn = stream_arn
        self._stamps: list[float] = []
        """Virtual creation time of the shard's records, by position (moto only appends)."""

    def written(self) -> int:
        """How many records the shard holds (the position of the next one written)."""
        shard = self._shard(self._stream_arn)
        return len(shard.items) if shard is not None else 0

    def discard(self, positions: range) -> None:
        """The records at `positions` never reach the mapping (as if trimmed before it read them)."""
        self.discarded.update(positions)

    def stamp(self) -> None:
        written = self.written()
        if written > len(self._stamps):
            self._stamps.extend([self._clock()] * (written - len(self._stamps)))

    def get_records(self, ShardIterator: str, Limit: int = 1000) -> dict[str, Any]:  # noqa: N803
        if self.trim_next_read:
            self.trim_next_read = False
            _, _, stream_arn = ShardIterator.partition("|")
            end = self.get_shard_iterator(StreamArn=stream_arn, ShardId="", ShardIteratorType="LATEST")
            position = int(ShardIterator.partition("|")[0])
            self.trimmed += int(end["ShardIterator"].partition("|")[0]) - position
            ShardIterator = end["ShardIterator"]  # noqa: N806
        self.stamp()
        answer = super().get_records(ShardIterator=ShardIterator, Limit=Limit)
        position = int(ShardIterator.partition("|")[0])
        kept = []
        for offset, record in enumerate(answer["Records"]):
            if position + offset in self.discarded:
                continue
            created = datetime.fromtimestamp(self._stamps[position + offset], UTC)
            record["dynamodb"] = {**record["dynamodb"], "ApproximateCreationDateTime": created}
            kept.append(record)
        answer["Records"] = kept
        return answer


_QUIET = (
    "outbox",
    "outbox_publisher",
    "outbox_sweeper",
    "outbox_inbox",
    "outbox-publisher",
    "outbox-sweeper",
)


@contextmanager
def running_system(*, seed: int = 0, sweep_grace_s: int = 60) -> Iterator[System]:
    """A fresh moto account and the system on it; the functions' logs above ERROR only (thousands of
    schedules log every retry)."""
    loggers = [logging.getLogger(name) for name in _QUIET]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        with mock_aws(), atomic_transactions(), topic_message_sizes():
            yield System(seed=seed, sweep_grace_s=sweep_grace_s)
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def order_id_of(item: dict[str, Any]) -> str:
    return str(item["pk"]["S"]).removeprefix("ORDER#")
