"""The publisher as deployed, fed bad input: its Lambda handler (`outbox_publisher.handler.handler`,
Powertools logging and metrics) wired to the real adapters on moto (tests/integration/publisher/
publisher_world.py), with what it sends to SNS, EventBridge and the poison queue recorded on the way.

`Delivery.run` hands one stream event to the handler and tells what came of it: the typed error it raised, or
its batch response with the event ids it published and the poison messages it sent.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from outbox.errors import OutboxError
from outbox.model import (
    FAILED_INDEX_PARTITION_KEY,
    FIRST_RELEASED_AT,
    LEASE_OWNER,
    LEASE_UNTIL,
    NEXT_ATTEMPT_AT,
    PENDING_INDEX_PARTITION_KEY,
    RELEASE_REASON,
    RELEASED_AT,
    TTL_ATTRIBUTE,
    RowKey,
)
from outbox_publisher import handler as entry_point
from tests.hardening.checks import OUTBOX_KEY, Output, TableState, captured, judge, leaks_in, restore
from tests.hardening.tally import Outcome, Source
from tests.integration.publisher.publisher_world import World, build_world
from tests.support.aws import Tables
from tests.support.lambda_context import FakeLambdaContext

# The poison message's own words (everything but the row it carries whole, on purpose): they are logged too.
POISON_REASON_FIELDS = ("reason", "error_code", "detail")


class RecordingClient:
    """A real boto3 client (moto's) whose calls are kept, with their answers, and otherwise left alone."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self.calls: list[tuple[str, dict[str, Any], Any]] = []

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._real, name)

        def call(**arguments: Any) -> Any:
            answer = method(**arguments)
            self.calls.append((name, arguments, answer))
            return answer

        return call


@dataclass
class Result:
    """What one invocation did."""

    error: OutboxError | None
    response: dict[str, Any] | None
    published: list[str]
    """Event ids a destination accepted (SNS and EventBridge alike)."""
    poison: list[dict[str, Any]]
    output: Output
    before: TableState
    after: TableState
    changed: set[str] = field(default_factory=set)

    @property
    def handed_back(self) -> list[str]:
        return [item["itemIdentifier"] for item in (self.response or {}).get("batchItemFailures", [])]

    def reasons(self) -> dict[str, str]:
        """Every stored or sent reason, by where it is, for the leak search."""
        places = {
            f"last_error of {key}": str(item.get("last_error", {}).get("S", ""))
            for key, item in self.after.items.items()
        }
        for number, message in enumerate(self.poison):
            for name in POISON_REASON_FIELDS:
                places[f"poison message {number} {name}"] = str(message.get(name, ""))
        return places


@dataclass
class Delivery:
    world: World
    sns: RecordingClient
    events: RecordingClient
    sqs: RecordingClient

    def run(self, event: Any) -> Result:
        for client in (self.sns, self.events, self.sqs):
            client.calls.clear()
        before = TableState.read(self.world.dynamodb, self.world.tables.outbox, OUTBOX_KEY)
        error: OutboxError | None = None
        response: dict[str, Any] | None = None
        with captured() as output:
            try:
                response = entry_point.handler(event, FakeLambdaContext())
            except OutboxError as raised:  # a typed refusal; anything else fails the test
                error = raised
        after = TableState.read(self.world.dynamodb, self.world.tables.outbox, OUTBOX_KEY)
        result = Result(error, response, self._published(), self._poison(), output, before, after)
        result.changed = before.changed_keys(after)
        return result

    def put_back(self, result: Result) -> None:
        """The table as the input found it, and the queues emptied: moto's SendMessage slows with every
        message a queue holds, and thousands of inputs would fill them."""
        restore(self.world.dynamodb, result.before, result.after)
        queues = [self.world.poison_queue] if result.poison else []
        queues += [self.world.topic_queue, self.world.bus_queue] if result.published else []
        for queue_url in queues:
            self.world.drain(queue_url)

    def _published(self) -> list[str]:
        published = []
        for name, arguments, answer in self.sns.calls:
            if name == "publish_batch":
                accepted = {entry["Id"] for entry in answer.get("Successful", [])}
                for entry in arguments["PublishBatchRequestEntries"]:
                    if entry["Id"] in accepted:
                        published.append(json.loads(entry["Message"])["event_id"])
        for name, arguments, answer in self.events.calls:
            if name == "put_events":
                for entry, outcome in zip(arguments["Entries"], answer["Entries"], strict=True):
                    if "ErrorCode" not in outcome:
                        published.append(json.loads(entry["Detail"])["event_id"])
        return published

    def _poison(self) -> list[dict[str, Any]]:
        return [
            json.loads(arguments["MessageBody"])
            for name, arguments, _ in self.sqs.calls
            if name in {"send_message", "send_message_batch"}
            and arguments.get("QueueUrl") == self.world.poison_queue
        ]


@contextlib.contextmanager
def deployed_publisher(tables: Tables, dynamodb: Any) -> Iterator[Delivery]:
    """The deployed handler on this moto world: fake clock and sleep, recording clients."""
    world = build_world(tables, dynamodb)
    sns, events, sqs = RecordingClient(world.sns), RecordingClient(world.events), RecordingClient(world.sqs)
    publisher = world.publisher(sns_client=sns, events_client=events, sqs_client=sqs)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(entry_point, "_publisher", publisher)
        yield Delivery(world, sns, events, sqs)


# What the publishing paths may change on a row they were given (outbox.marking, outbox.leases).
MARKING_ATTRIBUTES = frozenset(
    {
        "status",
        "attempts",
        "published_at",
        TTL_ATTRIBUTE,
        PENDING_INDEX_PARTITION_KEY,
        LEASE_OWNER,
        LEASE_UNTIL,
        NEXT_ATTEMPT_AT,
        "last_error",
        "failed_at",
        FAILED_INDEX_PARTITION_KEY,
        RELEASED_AT,
        RELEASE_REASON,
        FIRST_RELEASED_AT,
    }
)


def partial_writes(result: Result) -> list[str]:
    """What the publisher wrote that does not add up. It may mark a row it was given (status, and the marking
    and lease attributes); it may write back, FAILED and on the poison queue, a row another writer deleted
    (outbox_publisher.writer_contract); it never deletes one."""
    problems = []
    for key in sorted(result.changed):
        before, after = result.before.items.get(key), result.after.items.get(key)
        if after is None:
            problems.append(f"{key}: deleted by the publisher")
            continue
        if before is None:
            if attribute(after, "status") != "FAILED":
                problems.append(f"{key}: written by the publisher, and not FAILED")
        else:
            touched = {name for name in before.keys() | after.keys() if before.get(name) != after.get(name)}
            if touched - MARKING_ATTRIBUTES:
                problems.append(f"{key}: the publisher changed {sorted(touched - MARKING_ATTRIBUTES)}")
        status = attribute(after, "status")
        if status == "PUBLISHED" and attribute(after, "event_id") not in result.published:
            problems.append(f"{key}: marked PUBLISHED, its event accepted by no destination")
        if status == "FAILED" and not any(_names(message, after) for message in result.poison):
            problems.append(f"{key}: marked FAILED, no poison message for it")
        if status == "FAILED" and not attribute(after, "last_error"):
            problems.append(f"{key}: marked FAILED without a last_error")
    return problems


def _names(message: dict[str, Any], row: dict[str, Any]) -> bool:
    """Whether the poison message is for this row: by the key it names, or by the keys of the row it carries
    whole (which say which row it is even for a seq of 1.5)."""
    key = RowKey.of(row)
    if key is not None and (message.get("aggregate_key"), message.get("seq")) == (key.aggregate_key, key.seq):
        return True
    carried = message.get("row") or {}
    return all(carried.get(name) == row.get(name) for name in OUTBOX_KEY)


def judge_delivery(category: str, result: Result, *, source: Source) -> None:
    """A typed refusal (the invocation fails) publishes and poisons nothing. Otherwise no record is handed
    back (a bad record would block the shard) and every poison message says why. Then: nothing partial, and no
    marker in the logs, the metrics, a `last_error` or a poison message's reason."""
    if result.error is not None:
        outcome = Outcome.REJECTED
        assert result.published == [], "a refused invocation published"
        assert result.poison == [], "a refused invocation poisoned"
    else:
        assert result.handed_back == [], f"a bad record blocks the shard: {result.handed_back}"
        outcome = Outcome.POISONED if result.poison else Outcome.ACCEPTED
        for message in result.poison:
            assert message["reason"], message
            assert message["detail"], message
    judge(
        category,
        outcome,
        source=source,
        partial_writes=partial_writes(result),
        leaks=leaks_in({**result.output.places, **result.reasons()}),
    )


def attribute(item: Mapping[str, Any], name: str) -> str | None:
    value = item.get(name)
    return str(value["S"]) if isinstance(value, Mapping) and isinstance(value.get("S"), str) else None
