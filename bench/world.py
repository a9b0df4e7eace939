"""The publisher's world on moto, as the integration tests build it, with every client the code under test
uses metered.

The world is tests/integration/publisher/publisher_world: the tables as deployed (tests.support.aws, kept
equal to the synthesized template by a template test), an SNS topic and a bus rule each feeding an SQS
queue, a poison queue, and the publisher and sweeper wired by their own `build_publisher` / `build_sweeper`
to the real adapters, on a fake clock. moto runs in process, with the local runtime's atomic
TransactWriteItems (outbox_local.moto_transactions): moto's own deep-copies the tables on every call and
streams records of rolled-back writes.

The code under test gets clients of its own (metered: bench.meters); the harness writes rows, reads the
stream and peeks at items through the world's other clients, or moto's backend, which nothing counts. The
topic's subscription and the rule's target are removed (unless a figure counts the copies delivered,
bench.outage_figures): the figures count the publisher's calls, which deliveries to subscribers do not change,
and moto's fan-out costs more than all the publishing. The stream
is handed to the publisher as Lambda would: only the records the mapping's filter passes
(outbox.stream_mapping.PUBLISHER_FILTER_PATTERNS), shaped as Lambda sends them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import boto3
from moto import mock_aws
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.dynamodb.models import dynamodb_backends

from bench.environment import REGION, quiet
from bench.meters import Meters, Snapshot
from bench.naive import NaivePublisher
from outbox.model import OutboxEvent
from outbox.stream_mapping import PUBLISHER_FILTER_PATTERNS
from outbox_local.filtering import FilterCriteria
from outbox_local.moto_transactions import atomic_transactions
from outbox_local.stream_records import lambda_record
from outbox_publisher.handler import Publisher
from outbox_sweeper.sweep import Sweeper, SweepReport
from tests.integration.publisher.publisher_world import BUS, SOURCE, World, build_world
from tests.support.aws import create_tables
from tests.support.lambda_context import FakeLambdaContext
from tests.support.streams import read_stream

T = TypeVar("T")
SERVICES = ("sns", "events", "sqs", "dynamodb")
_MAPPING_FILTER = FilterCriteria.from_template(
    {"Filters": [{"Pattern": json.dumps(pattern)} for pattern in PUBLISHER_FILTER_PATTERNS]}
)


class MotoPeek:
    """Items and tables read straight from moto's DynamoDB backend: no API call, nothing counted."""

    def item(self, table: str, key: Mapping[str, Any]) -> dict[str, Any] | None:
        found = _backend().get_item(table, dict(key))
        return None if found is None else dict(found.to_json()["Attributes"])

    def describe(self, table: str) -> Mapping[str, Any]:
        description: Mapping[str, Any] = _backend().get_table(table).describe()["TableDescription"]
        return description


class BenchWorld:
    def __init__(self, world: World, *, deliveries: bool = False) -> None:
        self.world = world
        if not deliveries:
            _without_deliveries(world)
        self.meters = Meters(MotoPeek())
        self.clients = {
            service: self.meters.attach(boto3.client(service, region_name=REGION)) for service in SERVICES
        }
        self._last_read: str | None = None

    @property
    def outbox_table(self) -> str:
        return self.world.tables.outbox

    @property
    def orders_table(self) -> str:
        return self.world.tables.orders

    def publisher(self, *, sns_client: Any = None, events_client: Any = None, **env: str) -> Publisher:
        """Our stream publisher, as deployed, on the metered clients (or on the destinations' clients given:
        wrappers that inject a fault)."""
        return self.world.publisher(
            sns_client=sns_client or self.clients["sns"],
            events_client=events_client or self.clients["events"],
            sqs_client=self.clients["sqs"],
            dynamodb_client=self.clients["dynamodb"],
            **env,
        )

    def sweeper(self, *, sns_client: Any = None, events_client: Any = None, **env: str) -> Sweeper:
        """The sweeper, as deployed, on the same clients."""
        return self.world.sweeper(
            sns_client=sns_client or self.clients["sns"],
            events_client=events_client or self.clients["events"],
            sqs_client=self.clients["sqs"],
            dynamodb_client=self.clients["dynamodb"],
            **env,
        )

    def naive(self) -> NaivePublisher:
        return NaivePublisher(
            sns=self.clients["sns"],
            events=self.clients["events"],
            dynamodb=self.clients["dynamodb"],
            table_name=self.outbox_table,
            topic_arn=self.world.topic_arn,
            event_bus_name=BUS,
            event_source=SOURCE,
        )

    # -- the harness's own doings: not counted ------------------------------------------------------

    def write(self, events: Sequence[OutboxEvent]) -> None:
        """Rows written the way the library writes them (one transaction each), through unmetered clients."""
        self.world.write(*events)

    def new_batch(self) -> dict[str, Any]:
        """The stream records written since the last batch that the publisher's mapping lets through, as the
        Lambda event that would deliver them all at once."""
        fresh = read_stream(self.world.streams, self.world.tables.outbox_stream_arn, after=self._last_read)
        if fresh:
            self._last_read = fresh[-1]["dynamodb"]["SequenceNumber"]
        shaped = [
            lambda_record(record, self.world.tables.outbox_stream_arn, REGION).payload for record in fresh
        ]
        return {"Records": [dict(record) for record in shaped if _MAPPING_FILTER.accepts(record)]}

    def item(self, key: dict[str, Any]) -> Mapping[str, Any] | None:
        return self.meters.capacity.item(self.outbox_table, key)

    # -- measured steps -------------------------------------------------------------------------------

    def measure(self, step: Callable[[], T]) -> tuple[T, Snapshot]:
        """Run `step` with the meters zeroed first (and standard output silenced); what it did."""
        self.meters.reset()
        with quiet():
            result = step()
        return result, self.meters.snapshot()

    def publish(self, publisher: Publisher, batch: dict[str, Any]) -> dict[str, Any]:
        response = self.world.invoke(publisher, batch)
        _all_done(response, batch)
        return response

    def publish_naively(self, naive: NaivePublisher, batch: dict[str, Any]) -> dict[str, Any]:
        response = naive.handle(batch, FakeLambdaContext())
        _all_done(response, batch)
        return response

    def sweep(self, sweeper: Sweeper) -> SweepReport:
        return self.world.sweep(sweeper)


@contextmanager
def bench_world(*, deliveries: bool = False) -> Iterator[BenchWorld]:
    """A fresh world: its own moto backend, tables, topic, bus and queues; with `deliveries`, the topic's
    subscription and the rule's target feed their queues (a figure that counts copies delivered)."""
    with mock_aws(), atomic_transactions():
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        yield BenchWorld(build_world(create_tables(dynamodb), dynamodb), deliveries=deliveries)


def _without_deliveries(world: World) -> None:
    for subscription in world.sns.list_subscriptions_by_topic(TopicArn=world.topic_arn)["Subscriptions"]:
        world.sns.unsubscribe(SubscriptionArn=subscription["SubscriptionArn"])
    for rule in world.events.list_rules(EventBusName=BUS)["Rules"]:
        targets = world.events.list_targets_by_rule(Rule=rule["Name"], EventBusName=BUS)["Targets"]
        world.events.remove_targets(
            Rule=rule["Name"], EventBusName=BUS, Ids=[target["Id"] for target in targets]
        )


def _backend() -> Any:
    return dynamodb_backends[DEFAULT_ACCOUNT_ID][REGION]


def _all_done(response: dict[str, Any], batch: dict[str, Any]) -> None:
    """A figure of a batch the publisher handed back would count something else: fail loudly instead."""
    failures = response.get("batchItemFailures", [])
    if failures:
        raise RuntimeError(f"{len(failures)} of {len(batch['Records'])} records were handed back")
