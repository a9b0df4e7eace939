"""The publisher as deployed, fed bad input: its Lambda handler (`outbox_publisher.handler.handler`,
Powertools logging and metrics) wired to the real adapters on moto (tests/integration/publisher/
publisher_world.py), with what it sends to SNS, EventBridge and the poison queue recorded on the way.

`Delivery.run` hands one stream event to the handler and tells what came of it: the typed error it raised, or
its batch response with the event ids each destination accepted and the poison messages it sent.
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
    DELIVERED_TO,
    FAILED_INDEX_PARTITION_KEY,
    FIRST_RELEASED_AT,
    LEASE_OWNER,
    LEASE_UNTIL,
    LEGACY_ATTRIBUTES,
    NEXT_ATTEMPT_AT,
    RELEASE_REASON,
    RELEASED_AT,
    TTL_ATTRIBUTE,
    OutboxStatus,
    RowKey,
)
from outbox_publisher import handler as entry_point
from outbox_publisher.routing import Destination, Router
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

    event: Any
    """The Lambda event it was given."""
    router: Router
    """Where the publisher routes each event (its configuration)."""
    error: OutboxError | None
    response: dict[str, Any] | None
    published_to: dict[str, list[str]]
    """By destination (`sns`, `eventbridge`): the event ids it accepted, in the order sent."""
    poison: list[dict[str, Any]]
    output: Output
    before: TableState
    after: TableState
    changed: set[str] = field(default_factory=set)

    @property
    def published(self) -> list[str]:
        """Event ids a destination accepted (SNS and EventBridge alike)."""
        return [event_id for published in self.published_to.values() for event_id in published]

    @property
    def handed_back(self) -> list[str]:
        return [item["itemIdentifier"] for item in (self.response or {}).get("batchItemFailures", [])]

    @property
    def summary(self) -> dict[str, Any]:
        """The extra fields of the handler's summary line ("batch published"), or {} when it logged none."""
        lines = [extras for message, extras in self.output.events if message.startswith("batch ")]
        return lines[-1] if lines else {}

    def skipped(self, reason: str) -> int:
        """Records the handler's summary says it skipped for this reason."""
        counts = self.summary.get("skipped") or {}
        return int(counts.get(reason, 0))

    def images(self) -> list[Mapping[str, Any]]:
        """The new images the event's records carry: what was committed, as far as the publisher can know."""
        records = self.event.get("Records") if isinstance(self.event, Mapping) else None
        images = []
        for record in records if isinstance(records, list) else []:
            stream = record.get("dynamodb") if isinstance(record, Mapping) else None
            image = stream.get("NewImage") if isinstance(stream, Mapping) else None
            if isinstance(image, Mapping):
                images.append(image)
        return images

    def needed(self, row: Mapping[str, Any]) -> set[str]:
        """The destinations a row's event still needs: its route's, less those its `delivered_to` names."""
        route = self.router.destinations_for(
            attribute(row, "aggregate_type") or "", attribute(row, "event_type") or ""
        )
        return {destination.value for destination in route} - string_set(row, DELIVERED_TO)

    def not_out(self, row: Mapping[str, Any]) -> set[str]:
        """The destinations the row's event still needed that did not take it in this run."""
        event_id = attribute(row, "event_id")
        return {name for name in self.needed(row) if event_id not in self.published_to.get(name, [])}

    def went_out(self, row: Mapping[str, Any]) -> bool:
        """Whether any destination took the row's event in this run."""
        return attribute(row, "event_id") in self.published

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
    router: Router
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
        result = Result(
            event, self.router, error, response, self._published_to(), self._poison(), output, before, after
        )
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

    def _published_to(self) -> dict[str, list[str]]:
        published: dict[str, list[str]] = {destination.value: [] for destination in Destination}
        for name, arguments, answer in self.sns.calls:
            if name == "publish_batch":
                accepted = {entry["Id"] for entry in answer.get("Successful", [])}
                for entry in arguments["PublishBatchRequestEntries"]:
                    if entry["Id"] in accepted:
                        published[Destination.SNS].append(json.loads(entry["Message"])["event_id"])
        for name, arguments, answer in self.events.calls:
            if name == "put_events":
                for entry, outcome in zip(arguments["Entries"], answer["Entries"], strict=True):
                    if "ErrorCode" not in outcome:
                        published[Destination.EVENTBRIDGE].append(json.loads(entry["Detail"])["event_id"])
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
        yield Delivery(world, publisher.config.router, sns, events, sqs)


# What the publishing paths may change on a row they were given and leave in the table
# (outbox_publisher.dynamodb_rows and .leases): a PENDING row keeps its status and may only record the
# destinations that took its event (a park) or carry a lease; a FAILED mark also sets its own attributes and
# removes what only a row on its way out carries. A row leaves the table (a settle) only once it is out.
PENDING_CHANGES = frozenset({DELIVERED_TO, "last_error", LEASE_OWNER, LEASE_UNTIL})
FAILED_MARK_CHANGES = PENDING_CHANGES | {
    "status",
    "attempts",
    "failed_at",
    FAILED_INDEX_PARTITION_KEY,
    RELEASED_AT,
    RELEASE_REASON,
    FIRST_RELEASED_AT,
    NEXT_ATTEMPT_AT,
    TTL_ATTRIBUTE,
    *LEGACY_ATTRIBUTES,
}
PENDING = OutboxStatus.PENDING.value
FAILED = OutboxStatus.FAILED.value


def row_problems(result: Result) -> list[str]:
    """What the publisher did to the table that does not add up. It writes no row of its own; it deletes a
    row it was given only once the row's event is out on every destination it still needed (its route's,
    less those its `delivered_to` names), and then it must (else the sweeper sends it again); it may park a
    PENDING row (adding to its `delivered_to` only destinations that took the event in this run) or mark it
    FAILED (with a `last_error` and its message on the poison queue); nothing else. A row whose event is
    poisoned is kept, FAILED, never dropped."""
    problems = []
    for key in sorted(result.changed):
        before, after = result.before.items.get(key), result.after.items.get(key)
        if before is None:
            problems.append(f"{key}: written by the publisher")
        elif after is None:
            problems += _deleted(result, key, before)
        else:
            problems += _updated(result, key, before, after)
    for key, before in result.before.items.items():
        after = result.after.items.get(key)
        if after is not None and row_status(before) == row_status(after) == PENDING:
            problems += _left_pending(result, key, before, after)
    return problems


def _deleted(result: Result, key: str, before: Mapping[str, Any]) -> list[str]:
    status = row_status(before)
    if status != PENDING:
        return [f"{key}: a {status} row deleted by the publisher"]
    missing = result.not_out(before)
    return [f"{key}: deleted, its event not out on {sorted(missing)}"] if missing else []


def _updated(result: Result, key: str, before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    problems = []
    touched = {name for name in before.keys() | after.keys() if before.get(name) != after.get(name)}
    status, new_status = row_status(before), row_status(after)
    allowed = FAILED_MARK_CHANGES if (status, new_status) == (PENDING, FAILED) else PENDING_CHANGES
    if touched - allowed:
        problems.append(f"{key}: {status} -> {new_status}, the publisher changed {sorted(touched - allowed)}")
    if new_status == FAILED and status != FAILED:
        if not any(_names(message, after) for message in result.poison):
            problems.append(f"{key}: marked FAILED, no poison message for it")
        if not attribute(after, "last_error"):
            problems.append(f"{key}: marked FAILED without a last_error")
    recorded, kept = string_set(before, DELIVERED_TO), string_set(after, DELIVERED_TO)
    took = {
        name for name, published in result.published_to.items() if attribute(before, "event_id") in published
    }
    if kept - recorded - took:
        problems.append(
            f"{key}: delivered_to records {sorted(kept - recorded - took)}, which did not take it"
        )
    if recorded - kept:
        problems.append(f"{key}: delivered_to lost {sorted(recorded - kept)}")
    return problems


def _left_pending(result: Result, key: str, before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """A row the run left PENDING although its event is out (the sweeper would send it again) or poison (it
    must be kept FAILED)."""
    problems = []
    event_id = attribute(before, "event_id")
    same_event = attribute(after, "event_id") == event_id
    if same_event and result.went_out(before) and not result.not_out(before):
        problems.append(f"{key}: out on every destination it needed, left PENDING (sent again later)")
    poisoned = [message for message in result.poison if _names(message, before)]
    if same_event and any(_carried_event_id(message) in (event_id, None) for message in poisoned):
        problems.append(f"{key}: poisoned, but its row left PENDING (not kept FAILED)")
    return problems


def stream_problems(result: Result) -> list[str]:
    """What the publisher sent that the records do not back: an event no record's new image holds
    (nothing is announced unless saved), an event sent twice to one destination in one run, or sent to a
    destination every image of it names in `delivered_to` (each destination is served once)."""
    images = result.images()
    problems = []
    for destination, published in result.published_to.items():
        for event_id in sorted(set(published)):
            holding = [image for image in images if attribute(image, "event_id") == event_id]
            if not holding:
                problems.append(f"{destination}: published {event_id}, which no record holds")
            elif all(destination in string_set(image, DELIVERED_TO) for image in holding):
                problems.append(f"{destination}: published {event_id} again, its row says it took it")
            if published.count(event_id) > 1:
                problems.append(f"{destination}: published {event_id} {published.count(event_id)} times")
    return problems


def _names(message: Mapping[str, Any], row: Mapping[str, Any]) -> bool:
    """Whether the poison message is for this row: by the key it names, or by the keys of the row it carries
    whole (which say which row it is even for a seq of 1.5)."""
    key = RowKey.of(row)
    if key is not None and (message.get("aggregate_key"), message.get("seq")) == (key.aggregate_key, key.seq):
        return True
    carried = message.get("row") or {}
    return all(carried.get(name) == row.get(name) for name in OUTBOX_KEY)


def _carried_event_id(message: dict[str, Any]) -> str | None:
    """The event_id of the row a poison message carries whole, if it holds one."""
    carried = message.get("row")
    return attribute(carried, "event_id") if isinstance(carried, Mapping) else None


def judge_delivery(category: str, result: Result, *, source: Source) -> None:
    """A typed refusal (the invocation fails) publishes and poisons nothing. Otherwise no record is handed
    back (a bad record would block the shard: only a run that stops hands back) and every poison message
    says why. Then: nothing partial or unbacked (`row_problems`, `stream_problems`), and no marker in the
    logs, the metrics, a `last_error` or a poison message's reason."""
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
        partial_writes=[*row_problems(result), *stream_problems(result)],
        leaks=leaks_in({**result.output.places, **result.reasons()}),
    )


def row_status(item: Mapping[str, Any]) -> str | None:
    """A row's status as the library reads it: a row saved without one is PENDING (outbox.model)."""
    return attribute(item, "status") if "status" in item else PENDING


def attribute(item: Mapping[str, Any], name: str) -> str | None:
    value = item.get(name)
    return str(value["S"]) if isinstance(value, Mapping) and isinstance(value.get("S"), str) else None


def string_set(item: Mapping[str, Any], name: str) -> set[str]:
    """A String Set attribute's members; empty when absent or of another type (it then names nothing)."""
    value = item.get(name)
    members = value.get("SS") if isinstance(value, Mapping) else None
    return {member for member in members if isinstance(member, str)} if isinstance(members, list) else set()
