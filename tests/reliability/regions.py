"""One outbox across two regions (issue 34, docs/multi-region.md) in one process, on the virtual clock: what
the two-region proof (tests/integration/regions) and the region schedules (tests.reliability.region_schedules)
run.

Real product code on real boto3 clients against moto in process (`mock_aws`), per region:

- the outbox table (tests.support.aws.create_tables: its NEW_AND_OLD_IMAGES stream), one replica per region,
  kept in step by the local runtime's `Replicator` (outbox_local.replication: asynchronous, per item, last
  writer wins by write time, deletes included, every replica's stream carrying every write), stepped every
  `REPLICATION_INTERVAL_S` of virtual time (a write reaches the other replica within that: AWS's typical lag);
- the writer (`OutboxWriter(origin=region)`, one transaction per event) of an `Account` aggregate family whose
  events no consumer reads: each aggregate is written in one region (its home), seq 1, 2, ...;
- the publisher (`build_publisher`, its region settings from the environment the constructs set, its
  heartbeat read through `DynamoDBRegionStore`) fed by the local runtime's stream mapping emulator with the
  region's filter patterns (`publisher_filter_patterns(region, home=...)`: other regions' INSERTs cost no
  invocation), and the sweeper (`build_sweeper`, heartbeat first each run) fired every minute;
- the region's own destinations: a topic and a bus. A consumer of the outbox listens to both regions'
  topics (or buses): the promise is checked on their union (`Publication.destination` is the service, the
  region is the publishing function's, `region_of`).

`cut(region)` is a region cut off: its functions stop (no mapping poll, no schedule), its writer refuses,
and the replicator holds every write into and out of it; `restore(region)` brings it back. What each peer's
replica held of the events at a cut is kept (`Cut.peer_events`): a peer publishing again an event the cut
region had published, whose row (its settle not replicated) the peer still held, is the documented in-flight
duplicate (`CAUSE_CUT_IN_FLIGHT`), and only that is.

The single-region system's parts are shared, not copied: the wire (faults, crash points, the record of what
went out), the virtual Lambda context, the stream wrapper on the virtual clock, the invariant checker.
"""

from __future__ import annotations

import json
import logging
import random
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

import boto3
from botocore.config import Config
from moto import mock_aws

from outbox.dynamodb import DynamoDBTransactionExecutor
from outbox.model import AUDIT_KEY_PREFIX, RELEASED_AT, OutboxEvent, RowKey, is_reserved
from outbox.regions import Heartbeat, RegionSettings, heartbeat_key
from outbox.s3_payloads import S3PayloadStore
from outbox.stream_mapping import publisher_filter_patterns
from outbox.transaction import Transaction
from outbox.writer import OutboxWriter
from outbox_local.filtering import FilterCriteria
from outbox_local.invocation import InvocationResult
from outbox_local.moto_transactions import atomic_transactions
from outbox_local.replication import Delivery, Replicator
from outbox_local.schedules import ScheduleRunner
from outbox_local.stream_mapping import MappingSettings, StepKind
from outbox_local.stream_poller import StreamMappingRunner
from outbox_ops.release import AUDIT_ENTRIES, Action, skip
from outbox_publisher.adapters import EventBridgeDestination, SnsDestination, SqsPoisonQueue
from outbox_publisher.config import PublisherConfig
from outbox_publisher.deadline import LambdaDeadline
from outbox_publisher.dynamodb_rows import DynamoDBRowUpdater
from outbox_publisher.handler import Publisher, build_publisher, handle
from outbox_publisher.leases import DynamoDBRowClaimer
from outbox_publisher.predecessors import DynamoDBPredecessorReader
from outbox_publisher.region_store import DynamoDBRegionStore
from outbox_publisher.routing import Destination
from outbox_sweeper.config import SweeperConfig
from outbox_sweeper.cursor import DynamoDBCursorStore
from outbox_sweeper.failed_index import DynamoDBFailedIndexer
from outbox_sweeper.handler import build_sweeper
from outbox_sweeper.scan import DynamoDBTableScan
from outbox_sweeper.sweep import Sweeper
from tests.reliability.invariants import CAUSE_CUT_IN_FLIGHT, Committed, History, Row, Verdict, check
from tests.reliability.system import (
    _QUIET,
    ACCOUNT,
    PUBLISHER,
    PUBLISHER_TIMEOUT_S,
    SWEEP_RATE,
    SWEEPER,
    SWEEPER_TIMEOUT_S,
    VirtualContext,
    _ClientOnFirstUse,
    _TrimmableStreams,
)
from tests.reliability.wire import EVENTBRIDGE, SNS, Crash, Publication, Wire
from tests.support.aws import create_tables, scan_all
from tests.support.clock import FakeClock, RecordingSleep

REGIONS = ("us-east-1", "us-west-2")
"""Ring order: the first is the home region."""
TAKEOVER_AFTER_S = 300
"""The least the settings accept with a 1 minute sweep and a 120 s sweeper timeout (3 x 60 + 120)."""
SWEEP_INTERVAL_S = 60
REPLICATION_INTERVAL_S = 1.0
SOURCE = "outbox.accounts"
BUS = "outbox-bus"
AGGREGATE_TYPE = "Account"
EVENT_TYPE = "AccountCredited"
WRITER = "writer"
LATE_REPLICA = "LateReplica"

SERVICES = {"dynamodb": "dynamodb", "sns": SNS, "events": EVENTBRIDGE, "sqs": "sqs", "s3": "s3"}
_TICK_S = 0.001
_FAR = 1e18
"""A held delivery's due time: never, until released."""
_ONE_ATTEMPT = Config(
    retries={"mode": "standard", "total_max_attempts": 1}, connect_timeout=1, read_timeout=2
)
_CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


def function_name(function: str, region: str) -> str:
    return f"{function}@{region}"


def region_of(function: str) -> str:
    return function.partition("@")[2]


@dataclass
class Cut:
    """A region cut off, and what each peer's replica held of the events then."""

    region: str
    at: float
    peer_events: dict[str, frozenset[str]]
    until: float | None = None


@dataclass
class _Lag:
    """Writes held back until `until` (virtual time): those `match` picks among the ones it has not seen."""

    until: float
    match: Callable[[Delivery], bool]
    considered: set[int] = field(default_factory=set)


@dataclass
class Beat:
    """A heartbeat a sweeper run wrote (its report's), as seen after the run."""

    at: float
    region: str
    state: str
    taking: tuple[str, ...]


class RegionSide:
    """One region: its replica of the outbox table, its destinations, its functions and their pollers."""

    def __init__(self, system: TwoRegions, region: str) -> None:
        self.system = system
        self.region = region
        self.session = boto3.session.Session(region_name=region, **_CREDENTIALS)
        self.admin = {name: self.session.client(name) for name in ("dynamodb", "sqs", "sns", "events")}
        self.table = create_tables(self.admin["dynamodb"]).outbox
        self.stream_arn = self.admin["dynamodb"].describe_table(TableName=self.table)["Table"][
            "LatestStreamArn"
        ]
        sqs = self.admin["sqs"]
        self.topic_arn = self.admin["sns"].create_topic(Name="outbox-events")["TopicArn"]
        self.admin["events"].create_event_bus(Name=BUS)
        self.poison_queue = sqs.create_queue(QueueName="outbox-poison")["QueueUrl"]
        self.on_failure_queue = sqs.create_queue(QueueName="outbox-on-failure")["QueueUrl"]
        on_failure_arn = sqs.get_queue_attributes(
            QueueUrl=self.on_failure_queue, AttributeNames=["QueueArn"]
        )["Attributes"]["QueueArn"]
        self.settings = RegionSettings(
            region,
            REGIONS,
            takeover_after=_seconds(TAKEOVER_AFTER_S),
            sweep_interval=_seconds(SWEEP_INTERVAL_S),
            sweeper_timeout=_seconds(SWEEPER_TIMEOUT_S),
        )
        self.env = {
            "AWS_REGION": region,
            "OUTBOX_TABLE_NAME": self.table,
            "TOPIC_ARN": self.topic_arn,
            "EVENT_BUS_NAME": BUS,
            "EVENT_SOURCE": SOURCE,
            "POISON_QUEUE_URL": self.poison_queue,
            "SWEEP_GRACE_SECONDS": "60",
            **self.settings.environment(),
        }
        self.cut = False
        self._instances: dict[str, Any] = {}
        clock = system.clock
        self.streams = _TrimmableStreams(region, clock.seconds, self.stream_arn)
        patterns = publisher_filter_patterns(region, home=region == REGIONS[0])
        self.mapping = StreamMappingRunner(
            f"PublisherStreamMapping-{region}",
            MappingSettings(
                function_arn=f"arn:aws:lambda:{region}:{ACCOUNT}:function:{PUBLISHER}",
                stream_arn=self.stream_arn,
                batch_size=100,
                maximum_batching_window_s=1.0,
                maximum_retry_attempts=10,
                maximum_record_age_s=3600,
                bisect_batch_on_function_error=True,
                report_batch_item_failures=True,
                filters=FilterCriteria.from_template(
                    {"Filters": [{"Pattern": json.dumps(p)} for p in patterns]}
                ),
                on_failure_destination_arn=on_failure_arn,
                retry_delay_s=0.2,
            ),
            streams_client=self.streams,
            invoke=self.invoke_publisher,
            send_to_destination=lambda document: sqs.send_message(
                QueueUrl=self.on_failure_queue, MessageBody=json.dumps(document)
            ),
            clock=clock.seconds,
            region=region,
        )
        self.schedules = ScheduleRunner(
            lambda _arn, _event: self.invoke_sweeper(), clock.seconds, region=region
        )
        self.schedules.add("sweep", f"arn:aws:events:{region}:{ACCOUNT}:rule/sweep", SWEEP_RATE, SWEEPER)

    # --- function instances -----------------------------------------------------------------------------

    def name(self, function: str) -> str:
        return function_name(function, self.region)

    def client(self, function: str, service: str) -> Any:
        client = self.session.client(service, config=_ONE_ATTEMPT)
        return self.system.wire.instrument(client, self.name(function), SERVICES[service])

    def restart(self, function: str) -> None:
        self._instances.pop(function, None)

    def instance(self, function: str) -> Any:
        if function not in self._instances:
            self._instances[function] = self._build(function)
        return self._instances[function]

    def _build(self, function: str) -> Any:
        dynamodb = self.client(function, "dynamodb")
        if function == PUBLISHER:
            config = PublisherConfig.from_env(self.env)
            return build_publisher(config, **self._ports(function, config, dynamodb))
        sweeper_config = SweeperConfig.from_env(self.env)
        return build_sweeper(
            sweeper_config,
            scan=DynamoDBTableScan(dynamodb, self.table),
            cursors=DynamoDBCursorStore(dynamodb, self.table),
            indexer=DynamoDBFailedIndexer(dynamodb, self.table),
            **self._ports(function, sweeper_config.publisher, dynamodb),
        )

    def _ports(self, function: str, config: PublisherConfig, dynamodb: Any) -> dict[str, Any]:
        system = self.system
        return {
            "destinations": {
                Destination.SNS: SnsDestination(self.client(function, "sns"), self.topic_arn),
                Destination.EVENTBRIDGE: EventBridgeDestination(self.client(function, "events"), BUS, SOURCE),
            },
            "poison_queue": SqsPoisonQueue(self.client(function, "sqs"), config.poison_queue_url),
            "updater": DynamoDBRowUpdater(
                dynamodb, self.table, sleep=system.sleep, random=lambda: 0.5, workers=1
            ),
            "predecessors": DynamoDBPredecessorReader(dynamodb, self.table),
            "claimer": DynamoDBRowClaimer(dynamodb, self.table),
            "region_store": DynamoDBRegionStore(dynamodb, self.table),
            "payloads": S3PayloadStore(_ClientOnFirstUse(lambda: self.client(function, "s3"))),
            "clock": system.clock,
            "sleep": system.sleep,
            "random": lambda: 0.5,
        }

    # --- invocations ------------------------------------------------------------------------------------

    @contextmanager
    def _invocation(self, function: str) -> Iterator[None]:
        wire = self.system.wire
        invocation = wire.begin(self.name(function))
        before = len(wire.published)
        try:
            yield
        except Crash as crash:
            invocation.crashed = True
            if crash.timeout:
                invocation.faults["timeout"] += 1
            self.restart(function)
            raise
        finally:
            wire.end()
            self.streams.stamp()
            invocation.recorded = self._recorded(wire.published[before:])

    def _recorded(self, publications: list[Publication]) -> frozenset[tuple[str, str]]:
        """The deliveries among `publications` that this region's replica records now (as the single-region
        system's `_recorded`, on this replica)."""
        recorded: set[tuple[str, str]] = set()
        for publication in publications:
            item = self.row(publication.aggregate_key, publication.seq)
            same = item is not None and item.get("event_id", {}).get("S") == publication.event_id
            delivered = item.get("delivered_to", {}).get("SS", []) if item is not None else []
            if item is None or (same and publication.destination in delivered):
                recorded.add((publication.event_id, publication.destination))
        return frozenset(recorded)

    def row(self, aggregate_key: str, seq: int) -> dict[str, Any] | None:
        answer = self.admin["dynamodb"].get_item(
            TableName=self.table, Key=RowKey(aggregate_key, seq).item(), ConsistentRead=True
        )
        item: dict[str, Any] | None = answer.get("Item")
        return item

    def invoke_publisher(self, event: dict[str, Any]) -> InvocationResult:
        system = self.system
        try:
            with self._invocation(PUBLISHER):
                invocation = system.wire.invocations[-1]
                publisher: Publisher = self.instance(PUBLISHER)
                context = VirtualContext(
                    system.clock, PUBLISHER_TIMEOUT_S, self.name(PUBLISHER), invocation.number
                )
                invocation.retried = True  # until it answers without batch item failures
                payload = handle(event, context, publisher)
                invocation.retried = bool(payload.get("batchItemFailures"))
                return InvocationResult(payload=payload)
        except Crash as crash:
            return InvocationResult(error_type="Runtime.ExitError", error_message=crash.where)
        except Exception as error:  # a function error: the mapping retries or bisects
            return InvocationResult(error_type=type(error).__name__, error_message=str(error))

    def invoke_sweeper(self) -> InvocationResult:
        system = self.system
        try:
            with self._invocation(SWEEPER):
                sweeper: Sweeper = self.instance(SWEEPER)
                number = system.wire.invocations[-1].number
                context = VirtualContext(system.clock, SWEEPER_TIMEOUT_S, self.name(SWEEPER), number)
                report = sweeper.run(LambdaDeadline(context))
                if report.region is not None and report.region.heartbeat is not None:
                    beat = report.region.heartbeat
                    system.beats.append(
                        Beat(
                            system.clock.seconds(), self.region, beat.state.value, tuple(sorted(beat.taking))
                        )
                    )
                    system.late_replicas[self.region] += report.region.late_replicas
                    system.duplicates_avoided[self.region] += report.region.duplicates_avoided
                return InvocationResult(payload={"swept": report.swept})
        except Crash as crash:
            return InvocationResult(error_type="Runtime.ExitError", error_message=crash.where)
        except Exception as error:  # the schedule never retries: the next run will
            return InvocationResult(error_type=type(error).__name__, error_message=str(error))

    def round(self) -> tuple[bool, bool]:
        """One round of this region's pollers (none while it is cut off): (did work, waits for time)."""
        self.streams.stamp()
        if self.cut:
            return False, False
        worked = waiting = False
        for report in self.mapping.poll_once():
            if report.kind is StepKind.WAITING:
                waiting = True
            elif report.kind is not StepKind.IDLE:
                worked = True
        if self.schedules.tick():
            worked = True
        return worked, waiting

    # --- reading ----------------------------------------------------------------------------------------

    def items(self) -> list[dict[str, Any]]:
        return scan_all(self.admin["dynamodb"], self.table)

    def event_rows(self) -> list[dict[str, Any]]:
        return [item for item in self.items() if not is_reserved(item["aggregate_key"]["S"])]

    def heartbeat(self) -> Heartbeat | None:
        answer = self.admin["dynamodb"].get_item(
            TableName=self.table, Key=heartbeat_key(self.region), ConsistentRead=True
        )
        return Heartbeat.from_item(answer["Item"]) if "Item" in answer else None


class TwoRegions:
    def __init__(self, *, seed: int = 0) -> None:
        self.clock = FakeClock()
        self.sleep = RecordingSleep(self.clock)
        self.wire = Wire(self.clock.seconds)
        self.random = random.Random(seed)  # noqa: S311 - a schedule's choices, not secrets
        self._ids = random.Random(seed ^ 0x5EED)  # noqa: S311 - deterministic ids for a replayable run
        self.beats: list[Beat] = []
        self.late_replicas: Counter[str] = Counter()
        self.duplicates_avoided: Counter[str] = Counter()
        self.sides = {region: RegionSide(self, region) for region in REGIONS}
        # Lag 0 on the wall clock: a write is due at once, and the rounds step every REPLICATION_INTERVAL_S of
        # virtual time; the deliveries due at a step are shuffled (no order across items).
        described = {region: _DescribedOnce(side.admin["dynamodb"]) for region, side in self.sides.items()}
        self.replicator = Replicator(
            described.__getitem__,
            lag_s=0.0,
            clock=time.time,
            order=random.Random(seed ^ 0x5EB),  # noqa: S311 - replayable
        )
        self.replicator.add_table(self.sides[REGIONS[0]].table, REGIONS)
        self.next_replication = 0.0
        self.replication_held_until = 0.0
        """A `replication_lag` fault: no write reaches the other replica before this (virtual time)."""
        self.held: dict[int, float] = {}
        self.lags: list[_Lag] = []
        """Lasting `hold_writes`: each holds the writes it picks until it ends."""
        """Deliveries held back (`hold_writes`), by id: until when (virtual time)."""
        self.writes_held = 0
        self.committed: dict[str, Committed] = {}
        self.origins: dict[str, str] = {}
        """event_id -> the region whose writer saved it."""
        self.seqs: Counter[str] = Counter()
        """aggregate_id -> its last seq written."""
        self.home_of: dict[str, str] = {}
        """aggregate_id -> the region its events are written in."""
        self.writes_refused = 0
        self.cuts: list[Cut] = []
        self.failed_reasons: dict[str, str] = {}
        self.operator_actions: Counter[str] = Counter()

    # --- the writers ----------------------------------------------------------------------------------------

    def write(self, region: str, aggregate_id: str, *, age_s: float = 0.0) -> str | None:
        """The next event of `aggregate_id`, saved in `region` (its origin) by the real writer; None when the
        region is cut off (its service is down: the client gets an error). `age_s`: its `occurred_at` that
        much in the past (a write whose stream record comes late: the publisher claims it first)."""
        side = self.sides[region]
        if side.cut:
            self.writes_refused += 1
            return None
        self.home_of.setdefault(aggregate_id, region)
        seq = self.seqs[aggregate_id] + 1
        event = OutboxEvent.new(
            aggregate_type=AGGREGATE_TYPE,
            aggregate_id=aggregate_id,
            seq=seq,
            event_type=EVENT_TYPE,
            payload={"account": aggregate_id, "n": seq, "in": region},
            clock=lambda: self.clock() - timedelta(seconds=age_s),
            new_id=lambda: uuid.UUID(int=self._ids.getrandbits(128), version=4),
        )
        transaction = Transaction()
        OutboxWriter(side.table, origin=region).append(transaction, event)
        DynamoDBTransactionExecutor(side.admin["dynamodb"]).execute(transaction)
        self.seqs[aggregate_id] = seq
        self.origins[event.event_id] = region
        self.committed[event.event_id] = Committed(
            aggregate_key=event.aggregate_key,
            seq=seq,
            event_id=event.event_id,
            event_type=EVENT_TYPE,
            payload=event.payload_json,
        )
        return event.event_id

    # --- regions cut off ------------------------------------------------------------------------------------

    def cut(self, region: str, *, replication_after_s: float = 0.0, partial: bool = False) -> None:
        """`region` is cut off: its functions stop, its writer refuses, replication into and out of it
        queues (`replication_after_s` later: an outage that stops the functions first, while the region's
        last writes, which its publisher never got to, still replicate; with `partial`, a random half of
        them does not make it: per item, no order across items, as global tables replicate)."""
        side = self.sides[region]
        if side.cut:
            return
        side.cut = True
        if replication_after_s > 0:
            if partial:
                self.hold_writes(
                    lambda d: d.source == region and self.random.random() < 0.5,
                    replication_after_s,
                    lasting=True,
                )
            self.run_for(replication_after_s)
        self.replicator.cut(region)
        peers = {
            peer: frozenset(row["event_id"]["S"] for row in other.event_rows())
            for peer, other in self.sides.items()
            if peer != region
        }
        self.cuts.append(Cut(region, self.clock.seconds(), peers))

    def restore(self, region: str) -> None:
        side = self.sides[region]
        if not side.cut:
            return
        side.cut = False
        self.replicator.restore(region)
        for cut in self.cuts:
            if cut.region == region and cut.until is None:
                cut.until = self.clock.seconds()

    def owning(self) -> bool:
        """Every region's heartbeat says `own` and holds no other origin (as its own replica has it)."""
        beats = [side.heartbeat() for side in self.sides.values()]
        return all(beat is not None and beat.state.value == "own" and not beat.taking for beat in beats)

    def cut_regions(self) -> list[str]:
        return [region for region, side in self.sides.items() if side.cut]

    def hold_replication(self, seconds: float) -> None:
        self.replication_held_until = max(self.replication_held_until, self.clock.seconds() + seconds)

    def hold_writes(self, match: Callable[[Delivery], bool], seconds: float, *, lasting: bool = False) -> int:
        """The queued writes that `match` picks reach their replica `seconds` later than the others (per item,
        no order across items: a later write of an aggregate may arrive first); with `lasting`, also the
        writes queued until then that it picks. Through the replicator's state (`state()`/`resume()`): a held
        delivery is due at the end of time until released. Answers how many were held now."""
        until = self.clock.seconds() + seconds
        lag = _Lag(until, match)
        held = self._hold(lag)
        if lasting:
            self.lags.append(lag)
        return held

    def _hold(self, lag: _Lag) -> int:
        self.replicator.poll()
        state = self.replicator.state()
        fresh = [delivery for delivery in state.queue if delivery.id not in lag.considered]
        held = set()
        for delivery in fresh:
            lag.considered.add(delivery.id)
            if delivery.id not in self.held and lag.match(delivery):
                held.add(delivery.id)
                self.held[delivery.id] = lag.until
        self.writes_held += len(held)
        self._set_due(held, _FAR)
        return len(held)

    def _release_held(self, *, everything: bool = False) -> None:
        now = self.clock.seconds()
        due = {number for number, until in self.held.items() if everything or until <= now}
        if due:
            for number in due:
                del self.held[number]
            self._set_due(due, 0.0)

    def _set_due(self, ids: set[int], due: float) -> None:
        if not ids:
            return
        state = self.replicator.state()
        queue = tuple(replace(d, due=due) if d.id in ids else d for d in state.queue)
        self.replicator.resume(replace(state, queue=queue))

    def release_replication(self) -> None:
        """Every held write and paused replication flows again (at the next steps)."""
        self.replication_held_until = 0.0
        self.lags.clear()
        self._release_held(everything=True)

    def replicate(self) -> int:
        """Every write made so far reaches the other replica (cut regions' held): what a test asks for."""
        return self.replicator.drain()

    # --- driving --------------------------------------------------------------------------------------------

    def round(self) -> tuple[bool, bool]:
        worked = waiting = False
        now = self.clock.seconds()
        if self.replication_held_until and now >= self.replication_held_until:
            self.replicator.poll()
            self.writes_held += self.replicator.pending()  # what the pause held back (and some due now)
            self.replication_held_until = 0.0
        if now >= self.next_replication and now >= self.replication_held_until:
            self.lags = [lag for lag in self.lags if lag.until > now]
            for lag in self.lags:
                self._hold(lag)
            self._release_held()
            self.next_replication = now + REPLICATION_INTERVAL_S
            if self.replicator.step():
                worked = True
        for side in self.sides.values():
            did, waits = side.round()
            worked, waiting = worked or did, waiting or waits
        return worked, waiting

    def run_for(self, seconds: float, *, max_rounds: int = 100_000) -> None:
        self.run_until(lambda: False, deadline=self.clock.seconds() + seconds, max_rounds=max_rounds)

    def run_until(self, done: Callable[[], bool], *, deadline: float, max_rounds: int = 100_000) -> bool:
        for _ in range(max_rounds):
            now = self.clock.seconds()
            if now >= deadline - _TICK_S:
                return done()
            worked, waiting = self.round()
            if worked:
                continue
            if waiting:
                self.clock.advance(max(_TICK_S, min(0.25, deadline - now)))
                continue
            if done():
                return True
            self.clock.advance(max(0.05, min(self._next_due(), deadline) - self.clock.seconds()))
        return done()

    def _next_due(self) -> float:
        now = self.clock.seconds()
        dues = [now + 60.0]
        for side in self.sides.values():
            if not side.cut and (after := side.schedules.seconds_until_next()) is not None:
                dues.append(now + after)
        if self.replicator.pending():
            dues.append(max(self.next_replication, self.replication_held_until))
        dues.extend(self.held.values())
        return min(dues)

    def settled(self) -> bool:
        """Nothing left to do: no write on its way, no record in a mapping, no PENDING row in any replica, and
        every region publishing its own origin again (none held by a peer)."""
        if self.cut_regions() or self.replicator.pending():
            return False
        if any(side.mapping.stats().backlog for side in self.sides.values()):
            return False
        if not self.owning():
            return False
        for side in self.sides.values():
            if any(row.get("status", {}).get("S") == "PENDING" for row in side.event_rows()):
                return False
        return True

    # --- the operator ---------------------------------------------------------------------------------------

    def operate(self) -> None:
        """The runbook for a late replica (docs/multi-region.md): its aggregate holds behind it; the taker
        published a later event of it already, so the operator skips it (a redrive would publish it after
        that later event)."""
        for region, side in self.sides.items():
            if side.cut:
                continue
            for row in side.event_rows():
                if row["status"]["S"] != "FAILED" or self.origins.get(row["event_id"]["S"]) != region:
                    continue
                reason = row.get("last_error", {}).get("S", "")
                self.failed_reasons.setdefault(row["event_id"]["S"], reason)
                if LATE_REPLICA in reason:
                    key = RowKey(row["aggregate_key"]["S"], int(row["seq"]["N"]))
                    skip(
                        side.admin["dynamodb"],
                        side.table,
                        key,
                        reason="late replica",
                        actor="ops",
                        now=self.clock(),
                    )
                    self.operator_actions["operator_skip"] += 1

    # --- the promise ----------------------------------------------------------------------------------------

    def history(self) -> History:
        home = self.sides[REGIONS[0]]
        items = home.items()
        rows = [
            Row(
                aggregate_key=item["aggregate_key"]["S"],
                seq=int(item["seq"]["N"]),
                event_id=item.get("event_id", {}).get("S", ""),
                status=item.get("status", {}).get("S", ""),
                last_error=item.get("last_error", {}).get("S"),
                released=RELEASED_AT in item,
            )
            for item in items
            if not is_reserved(item["aggregate_key"]["S"])
        ]
        reasons = dict(self.failed_reasons)
        for row in rows:
            if row.status == "FAILED" and row.last_error:
                reasons.setdefault(row.event_id, row.last_error)
        late = self.late_replica_events(reasons)
        return History(
            committed=list(self.committed.values()),
            rows=rows,
            orders=[],
            publications=list(self.wire.published),
            skipped=_skipped(items),
            injected_poison=frozenset(late),
            poison_sent=frozenset(self.wire.poison_sent),
            invocations={invocation.number: invocation for invocation in self.wire.invocations},
            expected_reasons=dict.fromkeys(late, LATE_REPLICA),
            failed_reasons=reasons,
            explained=self.explained_copies(),
        )

    def late_replica_events(self, reasons: dict[str, str]) -> set[str]:
        """The events FAILED as late replicas (`reasons`: event_id -> `last_error`) that were: never
        published, and a region other than their origin published a later event of their aggregate."""
        first_later: dict[str, int] = {}
        published = {p.event_id for p in self.wire.published}
        for publication in self.wire.published:
            event = self.committed.get(publication.event_id)
            if event is None or region_of(publication.function) == self.origins.get(publication.event_id):
                continue
            key = event.aggregate_key
            first_later[key] = max(first_later.get(key, 0), event.seq)
        late = set()
        for event_id, reason in reasons.items():
            event = self.committed.get(event_id)
            if event is None or LATE_REPLICA not in reason or event_id in published:
                continue
            if first_later.get(event.aggregate_key, 0) > event.seq:
                late.add(event_id)
        return late

    def explained_copies(self) -> dict[tuple[str, str, int], str]:
        """(event_id, destination, invocation of its previous publication) -> why a peer published it again:
        the region that published it was cut off after, while the peer's replica still held its row."""
        explained: dict[tuple[str, str, int], str] = {}
        last: dict[tuple[str, str], Publication] = {}
        for publication in self.wire.published:
            key = (publication.event_id, publication.destination)
            previous = last.get(key)
            last[key] = publication
            if previous is None:
                continue
            first, again = region_of(previous.function), region_of(publication.function)
            if first == again:
                continue
            if any(
                cut.region == first
                and cut.at >= previous.at
                and publication.event_id in cut.peer_events[again]
                for cut in self.cuts
            ):
                explained[(publication.event_id, publication.destination, previous.invocation)] = (
                    CAUSE_CUT_IN_FLIGHT
                )
        return explained

    def diverged(self) -> list[str]:
        """Event rows the replicas disagree on after everything replicated (a resurrected settle, a lost
        claim)."""
        images = [
            {(row["aggregate_key"]["S"], row["seq"]["N"]): row for row in side.event_rows()}
            for side in self.sides.values()
        ]
        first, second = images
        return [
            f"{key[0]} seq {key[1]}: {REGIONS[0]} holds {first.get(key, {}).get('status')}, "
            f"{REGIONS[1]} holds {second.get(key, {}).get('status')}"
            for key in sorted(set(first) | set(second))
            if first.get(key) != second.get(key)
        ]

    def verdict(self) -> Verdict:
        return check(self.history())

    def figures(self, verdict: Verdict) -> dict[str, dict[str, int]]:
        """Per region: events it published first (on the topic), events of another region's origin it
        published (taken over), late replicas it marked FAILED, duplicates it sent (copies after an event's
        first, on either destination), the takeovers it began, the rows it settled unpublished on its return
        (a taker had published them)."""
        figures: dict[str, dict[str, int]] = {
            region: dict.fromkeys(
                ("published", "taken_over", "late_replicas", "duplicates", "takeovers", "duplicates_avoided"),
                0,
            )
            for region in REGIONS
        }
        seen: set[tuple[str, str]] = set()
        taken: set[tuple[str, str]] = set()
        for publication in self.wire.published:
            region = region_of(publication.function)
            key = (publication.event_id, publication.destination)
            if (
                publication.destination == SNS
                and self.origins.get(publication.event_id)
                not in (
                    None,
                    region,
                )
                and (region, publication.event_id) not in taken
            ):
                taken.add((region, publication.event_id))
                figures[region]["taken_over"] += 1
            if key in seen:
                figures[region]["duplicates"] += 1
                continue
            seen.add(key)
            if publication.destination == SNS:
                figures[region]["published"] += 1
        holding: dict[str, set[str]] = {region: set() for region in REGIONS}
        for beat in self.beats:
            began = set(beat.taking) - holding[beat.region]
            figures[beat.region]["takeovers"] += len(began)
            holding[beat.region] = set(beat.taking)
        for region in REGIONS:
            figures[region]["late_replicas"] = self.late_replicas[region]
            figures[region]["duplicates_avoided"] = self.duplicates_avoided[region]
        return figures


class _DescribedOnce:
    """A region's DynamoDB client for the replicator, its DescribeTable answered once per table: the
    replicator describes each replica at every step (for its stream's ARN, which never changes here), and
    moto's answer costs milliseconds, most of a schedule's time when asked every virtual second."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._described: dict[str, Any] = {}

    def describe_table(self, *, TableName: str) -> Any:  # noqa: N803 - boto3's keyword
        if TableName not in self._described:
            self._described[TableName] = self._client.describe_table(TableName=TableName)
        return self._described[TableName]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def _skipped(items: list[dict[str, Any]]) -> frozenset[str]:
    skipped: set[str] = set()
    for item in items:
        if not item["aggregate_key"]["S"].startswith(AUDIT_KEY_PREFIX):
            continue
        entries = item.get(AUDIT_ENTRIES, {}).get("L", [])
        if any(entry["M"]["action"]["S"] == Action.SKIP.value for entry in entries):
            skipped.add(item["event_id"]["S"])
    return frozenset(skipped)


def _seconds(count: int) -> timedelta:
    return timedelta(seconds=count)


@contextmanager
def two_regions(*, seed: int = 0, quiet: bool = True) -> Iterator[TwoRegions]:
    """A fresh moto account and the two regions on it; the functions' logs above ERROR only (`quiet`)."""
    loggers = [logging.getLogger(name) for name in _QUIET] if quiet else []
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        with mock_aws(), atomic_transactions():
            yield TwoRegions(seed=seed)
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)
