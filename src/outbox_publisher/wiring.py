"""Wiring the publishing engine to AWS, from the configuration: shared by the publisher and the sweeper.

Every port can be replaced (tests pass in-memory fakes, a clock and a sleep that does not wait). The AWS
adapters it builds use clients whose every call fits the engine's deadline rules: publishing clients (one
attempt, outbox_publisher.adapters) for SNS and EventBridge, invocation clients (one attempt, outbox.aws)
for the order gate's reads, the poison queue and the rows' updates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import outbox_tracing as tracing
from outbox.aws import invocation_client
from outbox.clock import Clock, utc_now
from outbox.payload_store import PayloadStore
from outbox.s3_payloads import S3PayloadStore
from outbox_publisher.adapters import (
    EventBridgeDestination,
    SnsDestination,
    SqsPoisonQueue,
    publishing_client,
)
from outbox_publisher.config import PublisherConfig
from outbox_publisher.dynamodb_rows import DynamoDBRowUpdater
from outbox_publisher.engine import PublishingEngine
from outbox_publisher.messages import Message
from outbox_publisher.ports import DestinationPort, EntryResult, PoisonQueue
from outbox_publisher.predecessors import DynamoDBPredecessorReader, PredecessorReader
from outbox_publisher.retry import Random, RetryPolicy, Sleep, system_random, system_sleep
from outbox_publisher.routing import Destination
from outbox_publisher.row_updates import RowUpdater
from outbox_publisher.waves import LOOKAHEAD

tracer = tracing.tracer()


class TracedDestination:
    """A destination whose every publish call is an X-Ray subsegment."""

    def __init__(self, inner: DestinationPort) -> None:
        self._inner = inner
        self.destination = inner.destination
        self.max_entry_bytes = inner.max_entry_bytes
        self.max_batch_bytes = inner.max_batch_bytes

    def size_of(self, message: Message) -> int:
        return self._inner.size_of(message)

    @tracer.capture_method(capture_response=False)
    def publish(self, messages: Sequence[Message]) -> list[EntryResult]:
        tracer.put_annotation("destination", self.destination.value)
        tracer.put_metadata("event_ids", [message.event.event_id for message in messages])
        return self._inner.publish(messages)


class ClientOnFirstCall:
    """The invocation client of `service_name` (outbox.aws), built when first used rather than at wiring.

    For the poison queue: most invocations send nothing to it, and building a client (its service model
    loaded) is ~5-15 ms of a cold start. The same client, with the same config, once built.
    """

    def __init__(self, service_name: str) -> None:
        self._service_name = service_name

    def __getattr__(self, name: str) -> Any:
        return getattr(invocation_client(self._service_name), name)


def aws_destinations(config: PublisherConfig) -> dict[Destination, DestinationPort]:
    ports: dict[Destination, DestinationPort] = {}
    if config.topic_arn is not None:
        ports[Destination.SNS] = SnsDestination(
            publishing_client("sns"), config.topic_arn, max_message_bytes=config.topic_max_message_bytes
        )
    if config.event_bus_name is not None and config.event_source is not None:
        ports[Destination.EVENTBRIDGE] = EventBridgeDestination(
            publishing_client("events"),
            config.event_bus_name,
            config.event_source,
            max_entry_bytes=config.eventbridge_max_entry_bytes,
        )
    return ports


def build_engine(
    config: PublisherConfig,
    *,
    destinations: Mapping[Destination, DestinationPort] | None = None,
    poison_queue: PoisonQueue | None = None,
    updater: RowUpdater | None = None,
    predecessors: PredecessorReader | None = None,
    clock: Clock = utc_now,
    sleep: Sleep = system_sleep,
    random: Random = system_random,
    retry: RetryPolicy | None = None,
    lookahead: int = LOOKAHEAD,
    payloads: PayloadStore | None = None,
) -> PublishingEngine:
    """The engine for `config`, on AWS for every port not given."""
    ports = destinations if destinations is not None else aws_destinations(config)
    return PublishingEngine(
        # With tracing off (no X-Ray), a subsegment per call would be a dummy that costs CPU on every call.
        destinations=dict(ports)
        if tracer.disabled
        else {name: TracedDestination(port) for name, port in ports.items()},
        router=config.router,
        poison_queue=poison_queue or SqsPoisonQueue(ClientOnFirstCall("sqs"), config.poison_queue_url),
        updater=updater or DynamoDBRowUpdater(invocation_client("dynamodb"), config.table_name, sleep=sleep),
        predecessors=predecessors
        or DynamoDBPredecessorReader(invocation_client("dynamodb"), config.table_name),
        clock=clock,
        retry=retry,
        sleep=sleep,
        random=random,
        lookahead=lookahead,
        # Reads only, each ref naming its bucket; the client is built when a row first names one.
        payloads=payloads or S3PayloadStore(),
    )
