"""One region of an outbox across two (tests.reliability.regions): its replica of the outbox table, its own
destinations (a topic and a bus, a poison queue, the mapping's on-failure queue), its publisher fed by the
local runtime's stream mapping emulator with its region's filter patterns (`publisher_filter_patterns(region,
home=...)`: other regions' INSERTs cost no invocation), and its sweeper fired every minute. Both functions are
wired as deployed (`build_publisher`, `build_sweeper`, the adapters), their region settings from the
environment the constructs set (`RegionSettings.environment()`), their clients instrumented by the shared wire
under the names `publisher@<region>` and `sweeper@<region>` (`region_of`).

While `cut`, its mapping and schedule do nothing (its functions are down).
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config
from botocore.exceptions import EndpointConnectionError

from outbox.model import RowKey, is_reserved
from outbox.s3_payloads import S3PayloadStore
from outbox.stream_mapping import publisher_filter_patterns
from outbox_local.filtering import FilterCriteria
from outbox_local.invocation import InvocationResult
from outbox_local.schedules import ScheduleRunner
from outbox_local.stream_mapping import MappingSettings, StepKind
from outbox_local.stream_poller import StreamMappingRunner
from outbox_publisher.adapters import EventBridgeDestination, SnsDestination, SqsPoisonQueue
from outbox_publisher.config import PublisherConfig
from outbox_publisher.deadline import LambdaDeadline
from outbox_publisher.dynamodb_rows import DynamoDBRowUpdater
from outbox_publisher.handler import Publisher, build_publisher, handle
from outbox_publisher.leases import DynamoDBRowClaimer
from outbox_publisher.predecessors import DynamoDBPredecessorReader
from outbox_publisher.region_store import DynamoDBRegionStore
from outbox_publisher.regions import Heartbeat, RegionSettings, heartbeat_key
from outbox_publisher.routing import Destination
from outbox_sweeper.config import SweeperConfig
from outbox_sweeper.cursor import DynamoDBCursorStore
from outbox_sweeper.failed_index import DynamoDBFailedIndexer
from outbox_sweeper.handler import build_sweeper
from outbox_sweeper.scan import DynamoDBTableScan
from outbox_sweeper.sweep import Sweeper
from tests.reliability import stepping
from tests.reliability.system import (
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
from tests.reliability.wire import EVENTBRIDGE, SNS, Crash, Publication
from tests.support.aws import create_tables, scan_all

if TYPE_CHECKING:
    from tests.reliability.regions import TwoRegions

REGIONS = ("us-east-1", "us-west-2")
"""Ring order: the first is the home region."""
TAKEOVER_AFTER_S = 300
"""The least the settings accept with a 1 minute sweep and a 120 s sweeper timeout (3 x 60 + 120)."""
SWEEP_INTERVAL_S = 60
SOURCE = "outbox.accounts"
BUS = "outbox-bus"
AGGREGATE_TYPE = "Account"
EVENT_TYPE = "AccountCredited"
LATE_REPLICA = "LateReplica"

SERVICES = {"dynamodb": "dynamodb", "sns": SNS, "events": EVENTBRIDGE, "sqs": "sqs", "s3": "s3"}
_ONE_ATTEMPT = Config(
    retries={"mode": "standard", "total_max_attempts": 1}, connect_timeout=1, read_timeout=2
)
_CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


def function_name(function: str, region: str) -> str:
    return f"{function}@{region}"


def region_of(function: str) -> str:
    return function.partition("@")[2]


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
        tables = create_tables(self.admin["dynamodb"])  # the orders table too, unused: no Orders API here
        self.table = tables.outbox
        self.stream_arn = tables.outbox_stream_arn
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
            takeover_after=timedelta(seconds=TAKEOVER_AFTER_S),
            sweep_interval=timedelta(seconds=SWEEP_INTERVAL_S),
            sweeper_timeout=timedelta(seconds=SWEEPER_TIMEOUT_S),
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
            region_stores=lambda peer: DynamoDBRegionStore(self.peer_client(function, peer), self.table),
            **self._ports(function, sweeper_config.publisher, dynamodb),
        )

    def peer_client(self, function: str, peer: str) -> Any:
        """A DynamoDB client of this function's for `peer`'s endpoint (its replica of the table, as
        `invocation_client("dynamodb", peer)` in Lambda), instrumented under this function's name: while
        `peer` is cut off its endpoint does not answer (EndpointConnectionError)."""
        side = self.system.sides[peer]
        client = side.session.client("dynamodb", config=_ONE_ATTEMPT)

        def down(**_: Any) -> None:
            if side.cut:
                raise EndpointConnectionError(endpoint_url=client.meta.endpoint_url)

        client.meta.events.register("before-call.dynamodb", down)
        return self.system.wire.instrument(client, self.name(function), SERVICES["dynamodb"])

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

    def _invocation(self, function: str) -> AbstractContextManager[None]:
        return stepping.invocation(
            self.system.wire,
            self.name(function),
            restart=lambda: self.restart(function),
            stamp=self.streams.stamp,
            recorded=self._recorded,
        )

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
