"""What one failure costs in duplicates: events published again to a destination that already had them.

For a batch of 100 records over 10 aggregates (the seeded random interleave of the publish figures), ONE
failure is injected at each position in turn, lasting the whole first invocation:

- `entry`: SNS PublishBatch answers that event's entry `Failed` (`Throttled`, not the sender's fault), every
  retry too;
- `call`: the PublishBatch call that carries that event fails whole (`ThrottlingException`), every retry too;
- `stop`: the invocation runs out of time right after the PutEvents call that carries that event (the
  remaining time drops to the engine's safety margin: no publish call may start, the settles still go).

The publisher (our handler's inner function, `outbox_publisher.handler.handle`, wired as deployed but on
stub clients, bench.stubs, that record every entry they accept) runs the batch in a fresh container and
answers `batchItemFailures`. What it hands back is then redelivered as the stream mapping does, from the
lowest sequence number reported, the failure gone: to the same container (its memory of the rows it settled
skips them) and, in a second trial, to a container that remembers nothing (another one, or the same after a
cold start). An event is a duplicate when the redelivery publishes it to a destination that had it.

A destination failure hands nothing back any more (issue 29): the events SNS did not take stay PENDING with
the destinations that did take them recorded (a park), for the sweeper, which sends them to SNS alone
(`outage.*` measures that path on moto, sweeper included). So `entry` and `call` count what the stream adds:
nothing to redeliver. A stop still hands back its rest, and events that waves had published beyond it come
again.

Ours is the engine's default `LOOKAHEAD`; the baseline is the same harness with `lookahead=0`, which makes
the waves the old contiguous cut (a call ends at the first aggregate it repeats, in stream order). The other
windows measured (`WINDOWS`) and their publish calls per event on the same batch, with no failure, are in the
detail: the trade between calls and duplicates in one place.

Stub clients, not moto: 100 positions x several windows x three invocations each would take moto minutes, and
the question is the engine's scheduling, which the stubs leave whole. The stubs answer the order gate's
reads with every predecessor absent (out: what the redelivery's first events follow was settled by the first
run) and every settle with success.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from botocore.exceptions import ClientError

from bench import targets
from bench.cpu_figures import BUS, POISON_QUEUE_URL, SOURCE, TABLE, TOPIC_ARN, lambda_batch
from bench.environment import quiet
from bench.figures import Figure, Group, per
from bench.scenarios import random_interleave
from bench.stubs import StubDynamoDB, StubEvents, StubSns, StubSqs
from outbox_publisher.adapters import EventBridgeDestination, SnsDestination, SqsPoisonQueue
from outbox_publisher.config import PublisherConfig
from outbox_publisher.dynamodb_rows import DynamoDBRowUpdater
from outbox_publisher.handler import Publisher, build_publisher, handle
from outbox_publisher.leases import DynamoDBRowClaimer
from outbox_publisher.predecessors import DynamoDBPredecessorReader
from outbox_publisher.retry import RetryPolicy
from outbox_publisher.routing import Destination
from outbox_publisher.waves import LOOKAHEAD
from tests.support.clock import FakeClock
from tests.support.lambda_context import FakeLambdaContext

COMMAND = "python -m bench --only duplicates"
RECORDS = 100
AGGREGATES = 10
WINDOWS = (0, 10, 20, 30, 50, LOOKAHEAD)
"""The windows measured: 0 is the old contiguous cut, LOOKAHEAD the default."""
SOURCE_TEXT = (
    "one failure injected per position, the batch redelivered from the lowest reported sequence number; "
    "stub clients recording every accepted entry"
)

AFTER_STOP_MS = RetryPolicy().safety_margin_ms
"""The time left once a `stop` trips: no publish call may start (the engine wants more than its safety
margin), every settle still may (a row update wants outbox_publisher.dynamodb_rows.UPDATE_CALL_MS, less)."""
FULL_TIME_MS = 600_000

FailureKind = Literal["entry", "call", "stop"]
KINDS: tuple[FailureKind, ...] = ("entry", "call", "stop")
Redelivery = Literal["same", "elsewhere"]


@dataclass
class Fault:
    """The failure to inject: the event it hits, how, and whether it is still on (`tripped`: a stop fell)."""

    event_id: str | None = None
    kind: FailureKind = "entry"
    on: bool = False
    tripped: bool = False


@dataclass
class StoppingContext(FakeLambdaContext):
    """A Lambda context whose remaining time drops to AFTER_STOP_MS once a `stop` has tripped."""

    fault: Fault = field(default_factory=Fault)

    def get_remaining_time_in_millis(self) -> int:
        return AFTER_STOP_MS if self.fault.tripped else FULL_TIME_MS


def _envelope_id(body: str) -> str:
    return str(json.loads(body)["event_id"])


@dataclass
class Recorded:
    """Event ids each destination accepted, per invocation."""

    sns: set[str] = field(default_factory=set)
    events: set[str] = field(default_factory=set)
    publish_calls: int = 0


class FaultySns(StubSns):
    def __init__(self, fault: Fault) -> None:
        self.fault = fault
        self.recorded = Recorded()

    def publish_batch(
        self,
        *,
        TopicArn: str,  # noqa: N803 - boto3's names
        PublishBatchRequestEntries: Sequence[Mapping[str, Any]],  # noqa: N803
    ) -> dict[str, Any]:
        self.recorded.publish_calls += 1
        ids = [_envelope_id(entry["Message"]) for entry in PublishBatchRequestEntries]
        hit = self.fault.on and self.fault.kind != "stop" and self.fault.event_id in ids
        if hit and self.fault.kind == "call":
            raise ClientError(
                {"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, "PublishBatch"
            )
        successful, failed = [], []
        for entry, event_id in zip(PublishBatchRequestEntries, ids, strict=True):
            if hit and event_id == self.fault.event_id:
                failed.append({"Id": entry["Id"], "Code": "Throttled", "SenderFault": False})
            else:
                self.recorded.sns.add(event_id)
                successful.append({"Id": entry["Id"], "MessageId": "stub"})
        return {"Successful": successful, "Failed": failed}


class RecordingEvents(StubEvents):
    """Records what EventBridge accepts; trips a `stop` once it has taken the call carrying its event."""

    def __init__(self, recorded: Recorded, fault: Fault) -> None:
        self.recorded = recorded
        self.fault = fault

    def put_events(self, *, Entries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:  # noqa: N803
        self.recorded.publish_calls += 1
        ids = [_envelope_id(entry["Detail"]) for entry in Entries]
        self.recorded.events.update(ids)
        if self.fault.on and self.fault.kind == "stop" and self.fault.event_id in ids:
            self.fault.tripped = True
        return super().put_events(Entries=Entries)


@dataclass(frozen=True)
class Trial:
    duplicates: int
    """Events the redelivery published again to a destination that already had them."""
    redelivered: int
    """Records the stream sent again."""


class Harness:
    """Our publisher on recording stub clients, one window; each trial in a fresh container."""

    def __init__(self, lookahead: int) -> None:
        self.lookahead = lookahead
        self.fault = Fault()
        self.sns = FaultySns(self.fault)
        self.events = RecordingEvents(self.sns.recorded, self.fault)
        self.context = StoppingContext(fault=self.fault)

    def container(self) -> Publisher:
        """A publisher process as a cold start builds it: nothing in its memory of settled rows."""
        dynamodb = StubDynamoDB()
        config = PublisherConfig.from_env(
            {
                "OUTBOX_TABLE_NAME": TABLE,
                "TOPIC_ARN": TOPIC_ARN,
                "EVENT_BUS_NAME": BUS,
                "EVENT_SOURCE": SOURCE,
                "POISON_QUEUE_URL": POISON_QUEUE_URL,
            }
        )
        return build_publisher(
            config,
            destinations={
                Destination.SNS: SnsDestination(self.sns, TOPIC_ARN),
                Destination.EVENTBRIDGE: EventBridgeDestination(self.events, BUS, SOURCE),
            },
            poison_queue=SqsPoisonQueue(StubSqs(), POISON_QUEUE_URL),
            updater=DynamoDBRowUpdater(dynamodb, TABLE, sleep=lambda _: None, random=lambda: 0.0),
            predecessors=DynamoDBPredecessorReader(dynamodb, TABLE),
            claimer=DynamoDBRowClaimer(dynamodb, TABLE),
            clock=FakeClock(),
            sleep=lambda _: None,  # retries back off on the fake clock's terms: no waiting
            random=lambda: 0.0,
            lookahead=self.lookahead,
        )

    def invoke(self, publisher: Publisher, event: dict[str, Any]) -> tuple[Recorded, list[str]]:
        """One invocation: what the destinations accepted, and the sequence numbers handed back."""
        self.sns.recorded = self.events.recorded = recorded = Recorded()
        with quiet():
            response = handle(event, self.context, publisher)
        return recorded, [failure["itemIdentifier"] for failure in response["batchItemFailures"]]

    def trial(
        self, event: dict[str, Any], event_id: str, kind: FailureKind, to: Redelivery = "same"
    ) -> Trial:
        """One failure at `event_id`, then what it handed back redelivered `to` the same container or one
        that remembers nothing."""
        first_container = self.container()
        self.fault.event_id, self.fault.kind, self.fault.on, self.fault.tripped = event_id, kind, True, False
        first, handed_back = self.invoke(first_container, event)
        self.fault.on = self.fault.tripped = False
        if kind == "stop" and not handed_back and event_id not in first.events:
            raise RuntimeError(f"the stop at {event_id} never tripped")
        if not handed_back:
            return Trial(0, 0)
        again_container = first_container if to == "same" else self.container()
        resent = redelivery(event, handed_back)
        again, still = self.invoke(again_container, resent)
        if still:
            raise RuntimeError(f"the redelivery after the {kind} failure on {event_id} handed back {still}")
        duplicates = (again.sns & first.sns) | (again.events & first.events)
        return Trial(len(duplicates), len(resent["Records"]))


def redelivery(event: Mapping[str, Any], handed_back: Sequence[str]) -> dict[str, Any]:
    """What the stream mapping sends next: every record from the lowest reported sequence number on."""
    lowest = min(int(number) for number in handed_back)
    return {
        "Records": [
            record for record in event["Records"] if int(record["dynamodb"]["SequenceNumber"]) >= lowest
        ]
    }


def calls_per_event(harness: Harness, event: dict[str, Any]) -> float:
    recorded, handed_back = harness.invoke(harness.container(), event)
    if handed_back:
        raise RuntimeError(f"{len(handed_back)} records handed back with no failure injected")
    return per(recorded.publish_calls, 2 * len(event["Records"]))


CASES: tuple[tuple[str, FailureKind, Redelivery], ...] = (
    ("entry", "entry", "same"),
    ("call", "call", "same"),
    ("stop.same", "stop", "same"),
    ("stop.elsewhere", "stop", "elsewhere"),
)
"""(figure name, failure, where the rest is redelivered): a destination failure hands nothing back, so only a
stop has a redelivery worth measuring twice."""


def window_figures(lookahead: int, event: dict[str, Any], event_ids: Sequence[str]) -> dict[str, Any]:
    harness = Harness(lookahead)
    figures: dict[str, Any] = {"calls_per_event_per_destination": calls_per_event(harness, event)}
    for name, kind, to in CASES:
        trials = [harness.trial(event, event_id, kind, to) for event_id in event_ids]
        counts = [trial.duplicates for trial in trials]
        figures[name] = {
            "mean": statistics.fmean(counts),
            "max": max(counts),
            "by_position": counts,
            "redelivered_mean": statistics.fmean(trial.redelivered for trial in trials),
        }
    return figures


def measure(records: int = RECORDS, aggregates: int = AGGREGATES) -> list[Group]:
    events = random_interleave(records, aggregates, prefix="dup")
    event = lambda_batch(events)
    event_ids = [item.event_id for item in events]
    windows = {lookahead: window_figures(lookahead, event, event_ids) for lookahead in WINDOWS}
    ours, contiguous = windows[LOOKAHEAD], windows[0]
    by_window = {
        ("whole batch" if lookahead >= records else str(lookahead)): {
            "calls_per_event_per_destination": figures["calls_per_event_per_destination"],
            **{name: {"mean": figures[name]["mean"], "max": figures[name]["max"]} for name, _, _ in CASES},
        }
        for lookahead, figures in windows.items()
    }
    labels = {
        "entry": "a throttled SNS entry (nothing handed back)",
        "call": "a whole failed PublishBatch call (nothing handed back)",
        "stop.same": "out of time, the rest redelivered to the same container",
        "stop.elsewhere": "out of time, the rest redelivered to a container that remembers nothing",
    }
    figures = []
    for kind, label in labels.items():
        for statistic in ("mean", "max"):
            figures.append(
                Figure(
                    f"duplicates.{kind}.{statistic}",
                    f"{statistic} events published again per failure: {label}",
                    "events/failure",
                    float(ours[kind][statistic]),
                    float(contiguous[kind][statistic]),
                    decimals=1,
                    source=SOURCE_TEXT,
                    detail={
                        "records": records,
                        "aggregates": aggregates,
                        "positions": len(event_ids),
                        "lookahead": LOOKAHEAD,
                        "ours_by_position": ours[kind]["by_position"],
                        "contiguous_by_position": contiguous[kind]["by_position"],
                        "ours_redelivered_mean": ours[kind]["redelivered_mean"],
                        "contiguous_redelivered_mean": contiguous[kind]["redelivered_mean"],
                        "by_window": by_window,
                    },
                )
            )
    figures.append(
        Figure(
            "duplicates.calls",
            f"publish calls, same batch, no failure (LOOKAHEAD {LOOKAHEAD:,} vs. 0)",
            "calls/event/destination",
            ours["calls_per_event_per_destination"],
            contiguous["calls_per_event_per_destination"],
            floor=targets.PUBLISH_CALLS_FLOOR,
            target=targets.PUBLISH_CALLS_TARGET,
            source="calls counted by the stub clients",
            detail={"by_window": by_window},
        )
    )
    return [
        Group(
            "duplicates",
            f"Duplicates per failure ({records} records, {aggregates} aggregates, random interleave)",
            "the old contiguous cut (the same engine with lookahead=0)",
            figures,
            notes=[
                "One failure at each position in turn, lasting the whole first invocation (its retries fail "
                "too), then what was handed back redelivered from the lowest reported sequence number. A "
                "duplicate: an event the redelivery publishes to a destination that already had it.",
                "A destination's failure hands nothing back: its events wait, parked, for the sweeper, which "
                "sends them to that destination alone (`outage.*`). Running out of time hands back the rest; "
                "the container that settled what waves had sent beyond the stop skips those records, another "
                "container publishes them again.",
                "Every window measured (0 = contiguous cut) with its calls and duplicates is in the "
                "detail (`by_window`).",
            ],
            command=COMMAND,
        )
    ]
