"""The publisher's world on moto: outbox table and stream, SNS topic -> SQS, bus rule -> SQS, poison queue.

Plus fault injection: moto never throttles, so faults are injected by wrappers AROUND the real boto3
clients (named as such); everything they do not fake goes to moto unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.exceptions import ClientError

from outbox.dynamodb import DynamoDBTransactionExecutor
from outbox.model import OutboxEvent
from outbox.transaction import Transaction
from outbox.writer import OutboxWriter
from outbox_local.queues import receive_all
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
from outbox_sweeper.sweep import Sweeper, SweepReport
from tests.support.aws import REGION, Tables
from tests.support.clock import FakeClock, RecordingSleep
from tests.support.lambda_context import FakeLambdaContext
from tests.support.streams import lambda_event, read_stream

SOURCE = "shop.orders"
BUS = "outbox-bus"


@dataclass
class World:
    tables: Tables
    dynamodb: Any
    streams: Any
    sqs: Any
    sns: Any
    events: Any
    topic_arn: str
    topic_queue: str
    bus_queue: str
    poison_queue: str
    clock: FakeClock
    sleep: RecordingSleep

    def env(self, **overrides: str) -> dict[str, str]:
        return {
            "OUTBOX_TABLE_NAME": self.tables.outbox,
            "TOPIC_ARN": self.topic_arn,
            "EVENT_BUS_NAME": BUS,
            "EVENT_SOURCE": SOURCE,
            "POISON_QUEUE_URL": self.poison_queue,
        } | overrides

    def publisher(
        self,
        *,
        sns_client: Any = None,
        events_client: Any = None,
        sqs_client: Any = None,
        dynamodb_client: Any = None,
        region_store: Any = None,
        **env: str,
    ) -> Publisher:
        """The real adapters on moto clients (or on the given wrappers), fake clock and sleep."""
        config = PublisherConfig.from_env(self.env(**env))
        return build_publisher(
            config,
            **self._ports(config, sns_client, events_client, sqs_client, dynamodb_client),
            region_store=region_store
            or DynamoDBRegionStore(dynamodb_client or self.dynamodb, config.table_name),
        )

    def sweeper(
        self,
        *,
        sns_client: Any = None,
        events_client: Any = None,
        sqs_client: Any = None,
        dynamodb_client: Any = None,
        region_store: Any = None,
        region_stores: Any = None,
        **env: str,
    ) -> Sweeper:
        """The sweeper as deployed, on the same real adapters, fake clock and sleep."""
        config = SweeperConfig.from_env(self.env(**env))
        table = config.publisher.table_name
        return build_sweeper(
            config,
            **self.sweeper_tables(config, dynamodb_client),
            **self._ports(config.publisher, sns_client, events_client, sqs_client, dynamodb_client),
            region_store=region_store or DynamoDBRegionStore(dynamodb_client or self.dynamodb, table),
            region_stores=region_stores,
        )

    def sweeper_tables(self, config: SweeperConfig, dynamodb_client: Any = None) -> dict[str, Any]:
        """The sweeper's own ports on the outbox table: its scan, its saved position, the failed index."""
        dynamodb = dynamodb_client or self.dynamodb
        table = config.publisher.table_name
        return {
            "scan": DynamoDBTableScan(dynamodb, table),
            "cursors": DynamoDBCursorStore(
                dynamodb, table, region=config.publisher.regions.region if config.publisher.regions else None
            ),
            "indexer": DynamoDBFailedIndexer(dynamodb, table),
        }

    def sweep(self, sweeper: Sweeper, *, remaining_ms: int = 60_000, segment: int = 0) -> SweepReport:
        return sweeper.run(LambdaDeadline(FakeLambdaContext(remaining_ms)), segment)

    def _ports(
        self,
        config: PublisherConfig,
        sns_client: Any,
        events_client: Any,
        sqs_client: Any,
        dynamodb_client: Any,
    ) -> dict[str, Any]:
        destinations: dict[Destination, Any] = {}
        if config.topic_arn:
            destinations[Destination.SNS] = SnsDestination(
                sns_client or self.sns, config.topic_arn, max_message_bytes=config.topic_max_message_bytes
            )
        if config.event_bus_name:
            destinations[Destination.EVENTBRIDGE] = EventBridgeDestination(
                events_client or self.events,
                config.event_bus_name,
                SOURCE,
                max_entry_bytes=config.eventbridge_max_entry_bytes,
            )
        dynamodb = dynamodb_client or self.dynamodb
        return {
            "destinations": destinations,
            "poison_queue": SqsPoisonQueue(sqs_client or self.sqs, config.poison_queue_url),
            # One call after another: a test's faults fall on the calls it names (the threads are tested in
            # test_row_updates.py).
            "updater": DynamoDBRowUpdater(
                dynamodb, config.table_name, sleep=self.sleep, random=lambda: 0.5, workers=1
            ),
            "predecessors": DynamoDBPredecessorReader(dynamodb, config.table_name),
            "claimer": DynamoDBRowClaimer(dynamodb, config.table_name),
            "clock": self.clock,
            "sleep": self.sleep,
            "random": lambda: 0.5,
        }

    def write(self, *events: OutboxEvent, origin: str | None = None) -> None:
        """Rows written the way the library writes them: one transaction per aggregate's events."""
        writer = OutboxWriter(self.tables.outbox, origin=origin)
        for event in events:
            transaction = Transaction()
            writer.append(transaction, event)
            DynamoDBTransactionExecutor(self.dynamodb).execute(transaction)

    def put_raw(self, item: dict[str, Any]) -> None:
        """A row some other writer (any language) put there, possibly breaking the contract."""
        self.dynamodb.put_item(TableName=self.tables.outbox, Item=item)

    def stream_event(self, *, skip: int = 0) -> dict[str, Any]:
        raw = read_stream(self.streams, self.tables.outbox_stream_arn)[skip:]
        return lambda_event(raw, self.tables.outbox_stream_arn)

    def invoke(
        self, publisher: Publisher, event: dict[str, Any], *, remaining_ms: int = 60_000
    ) -> dict[str, Any]:
        return handle(event, FakeLambdaContext(remaining_ms), publisher)

    def drain(self, queue_url: str) -> list[dict[str, Any]]:
        return receive_all(self.sqs, queue_url, MessageAttributeNames=["All"])

    def topic_envelopes(self) -> list[dict[str, Any]]:
        return [json.loads(message["Body"]) for message in self.drain(self.topic_queue)]

    def bus_envelopes(self) -> list[dict[str, Any]]:
        return [json.loads(message["Body"])["detail"] for message in self.drain(self.bus_queue)]

    def poison(self) -> list[dict[str, Any]]:
        return [json.loads(message["Body"]) for message in self.drain(self.poison_queue)]

    def row(self, event: OutboxEvent) -> dict[str, Any]:
        item = self.stored(event)
        assert item is not None, f"{event.aggregate_key} seq {event.seq} is not in the table"
        return item

    def stored(self, event: OutboxEvent) -> dict[str, Any] | None:
        """The event's row as stored now; None once it left the table (settled, or skipped)."""
        item: dict[str, Any] | None = self.dynamodb.get_item(
            TableName=self.tables.outbox,
            Key={"aggregate_key": {"S": event.aggregate_key}, "seq": {"N": str(event.seq)}},
            ConsistentRead=True,
        ).get("Item")
        return item


def build_world(tables: Tables, dynamodb: Any, *, fifo: bool = False) -> World:
    sqs = boto3.client("sqs", region_name=REGION)
    sns = boto3.client("sns", region_name=REGION)
    events = boto3.client("events", region_name=REGION)
    streams = boto3.client("dynamodbstreams", region_name=REGION)

    def queue(name: str) -> tuple[str, str]:
        attributes = (
            {"FifoQueue": "true", "ContentBasedDeduplication": "false"} if name.endswith(".fifo") else {}
        )
        url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        return url, arn

    topic_attributes = {"FifoTopic": "true", "ContentBasedDeduplication": "false"} if fifo else {}
    topic_arn = sns.create_topic(
        Name="outbox-events.fifo" if fifo else "outbox-events", Attributes=topic_attributes
    )["TopicArn"]
    topic_queue, topic_queue_arn = queue("topic-consumer.fifo" if fifo else "topic-consumer")
    sns.subscribe(
        TopicArn=topic_arn,
        Protocol="sqs",
        Endpoint=topic_queue_arn,
        Attributes={"RawMessageDelivery": "true"},
    )
    events.create_event_bus(Name=BUS)
    bus_queue, bus_queue_arn = queue("bus-consumer")
    events.put_rule(Name="all-outbox", EventBusName=BUS, EventPattern=json.dumps({"source": [SOURCE]}))
    events.put_targets(Rule="all-outbox", EventBusName=BUS, Targets=[{"Id": "q", "Arn": bus_queue_arn}])
    poison_queue, _ = queue("outbox-poison")
    clock = FakeClock()
    return World(
        tables,
        dynamodb,
        streams,
        sqs,
        sns,
        events,
        topic_arn,
        topic_queue,
        bus_queue,
        poison_queue,
        clock,
        RecordingSleep(clock),
    )


# --- Fault injection around real clients ----------------------------------------------------------


def client_error(code: str, operation: str, status: int = 400) -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, operation
    )


class EventsClientFailingEntries:
    """Wraps the real EventBridge client: entries chosen by `pick` are answered with `code` instead of
    being sent (the rest of the call goes to moto), for the next `times` calls that pick any."""

    def __init__(
        self, real: Any, pick: Callable[[int, dict[str, Any]], bool], code: str, times: int = 1
    ) -> None:
        self._real = real
        self._pick = pick
        self._code = code
        self.remaining = times
        self.calls: list[list[str]] = []

    def put_events(self, Entries: Sequence[dict[str, Any]]) -> dict[str, Any]:  # noqa: N803 - boto3's name
        self.calls.append([json.loads(entry["Detail"])["event_id"] for entry in Entries])
        picked = [position for position, entry in enumerate(Entries) if self._pick(position, entry)]
        if not picked or self.remaining <= 0:
            return dict(self._real.put_events(Entries=list(Entries)))
        self.remaining -= 1
        sent = [entry for position, entry in enumerate(Entries) if position not in picked]
        answers = list(self._real.put_events(Entries=sent)["Entries"]) if sent else []
        for position in picked:
            answers.insert(position, {"ErrorCode": self._code, "ErrorMessage": "injected"})
        return {"FailedEntryCount": sum(1 for answer in answers if "ErrorCode" in answer), "Entries": answers}


class EventsClientFailingCalls:
    """Wraps the real EventBridge client: the next `times` PutEvents calls fail as a whole."""

    def __init__(self, real: Any, code: str, status: int, times: int) -> None:
        self._real = real
        self._code = code
        self._status = status
        self.remaining = times
        self.calls = 0

    def put_events(self, Entries: Sequence[dict[str, Any]]) -> dict[str, Any]:  # noqa: N803 - boto3's name
        self.calls += 1
        if self.remaining > 0:
            self.remaining -= 1
            raise client_error(self._code, "PutEvents", self._status)
        return dict(self._real.put_events(Entries=list(Entries)))


class SnsClientFailingEvents:
    """Wraps the real SNS client: entries of the given event ids always fail with a service fault."""

    def __init__(
        self, real: Any, event_ids: set[str], code: str = "InternalError", sender_fault: bool = False
    ) -> None:
        self._real = real
        self._event_ids = event_ids
        self._code = code
        self._sender_fault = sender_fault
        self.published: list[str] = []

    def publish_batch(self, **arguments: Any) -> dict[str, Any]:
        TopicArn: str = arguments["TopicArn"]  # noqa: N806 - boto3's names
        PublishBatchRequestEntries: Sequence[dict[str, Any]] = arguments["PublishBatchRequestEntries"]  # noqa: N806
        failing = [
            e for e in PublishBatchRequestEntries if json.loads(e["Message"])["event_id"] in self._event_ids
        ]
        sent = [e for e in PublishBatchRequestEntries if e not in failing]
        response: dict[str, Any] = {"Successful": [], "Failed": []}
        if sent:
            response = dict(self._real.publish_batch(TopicArn=TopicArn, PublishBatchRequestEntries=sent))
            self.published.extend(json.loads(e["Message"])["event_id"] for e in sent)
        failed = [{"Id": e["Id"], "Code": self._code, "SenderFault": self._sender_fault} for e in failing]
        return {
            "Successful": response.get("Successful", []),
            "Failed": list(response.get("Failed", [])) + failed,
        }


class DynamoDBClientFailingWrites:
    """Wraps the real DynamoDB client: every TransactWriteItems, UpdateItem and DeleteItem is throttled."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self.attempts = 0

    def transact_write_items(self, **_: Any) -> None:
        self.attempts += 1
        raise client_error("ProvisionedThroughputExceededException", "TransactWriteItems")

    def update_item(self, **_: Any) -> None:
        self.attempts += 1
        raise client_error("ProvisionedThroughputExceededException", "UpdateItem")

    def delete_item(self, **_: Any) -> None:
        self.attempts += 1
        raise client_error("ProvisionedThroughputExceededException", "DeleteItem")


class SqsClientUnavailable:
    """Wraps nothing: the poison queue does not exist."""

    def send_message(self, **_: Any) -> None:
        raise client_error("AWS.SimpleQueueService.NonExistentQueue", "SendMessage")
