"""What one failure costs in duplicates: events published again when the stream redelivers a batch.

For a batch of 100 records over 10 aggregates (the seeded random interleave of the publish figures), ONE
failure is injected at each position in turn, on SNS (the first destination every event goes to), lasting
the whole first invocation (every retry of it fails too) so that the run stops there:

- `entry`: SNS PublishBatch answers that event's entry `Failed` (`Throttled`, not the sender's fault);
- `call`: the PublishBatch call that carries that event fails whole (`ThrottlingException`).

The publisher (our handler's inner function, `outbox_publisher.handler.handle`, wired as deployed but on
stub clients, bench.stubs, that record every entry they accept) runs the batch and answers
`batchItemFailures`. The batch is then redelivered as the stream mapping does: from the lowest sequence
number reported, every record after it, the failure gone. An event is a duplicate when the redelivery
publishes it (to any destination) and the first invocation had already published it there. The figure is the
mean, over the positions, of the duplicates per failure; the maximum is beside it in the detail.

Ours is the engine's default `LOOKAHEAD`; the baseline is the same harness with `lookahead=0`, which makes
the waves the old contiguous cut (a call ends at the first aggregate it repeats, in stream order). The other
windows measured (`WINDOWS`) and their publish calls per event on the same batch, with no failure, are in the
detail: the trade between calls and duplicates in one place.

Stub clients, not moto: 200 positions x several windows x two invocations each would take moto minutes, and
the question is the engine's scheduling, which the stubs leave whole. The stubs answer the order gate's
reads with PUBLISHED (true here: what the redelivery's first events follow was settled by the first run) and
every mark with success.
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
from outbox.leases import DynamoDBRowClaimer
from outbox.marking import DynamoDBRowMarker
from outbox.predecessors import DynamoDBPredecessorReader
from outbox_publisher.adapters import EventBridgeDestination, SnsDestination, SqsPoisonQueue
from outbox_publisher.config import PublisherConfig
from outbox_publisher.handler import build_publisher, handle
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

FailureKind = Literal["entry", "call"]


@dataclass
class Fault:
    """The failure to inject: the event it hits, how, and whether it is still on."""

    event_id: str | None = None
    kind: FailureKind = "entry"
    on: bool = False


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
        hit = self.fault.on and self.fault.event_id in ids
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
    def __init__(self, recorded: Recorded) -> None:
        self.recorded = recorded

    def put_events(self, *, Entries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:  # noqa: N803
        self.recorded.publish_calls += 1
        self.recorded.events.update(_envelope_id(entry["Detail"]) for entry in Entries)
        return super().put_events(Entries=Entries)


@dataclass(frozen=True)
class Trial:
    duplicates: int
    """Events the redelivery published again to a destination that already had them."""
    redelivered: int
    """Records the stream sent again."""


class Harness:
    """Our publisher on recording stub clients, one window, fresh records per invocation."""

    def __init__(self, lookahead: int) -> None:
        self.fault = Fault()
        self.sns = FaultySns(self.fault)
        self.events = RecordingEvents(self.sns.recorded)
        dynamodb = StubDynamoDB()
        clock = FakeClock()
        config = PublisherConfig.from_env(
            {
                "OUTBOX_TABLE_NAME": TABLE,
                "TOPIC_ARN": TOPIC_ARN,
                "EVENT_BUS_NAME": BUS,
                "EVENT_SOURCE": SOURCE,
                "POISON_QUEUE_URL": POISON_QUEUE_URL,
            }
        )
        self.publisher = build_publisher(
            config,
            destinations={
                Destination.SNS: SnsDestination(self.sns, TOPIC_ARN),
                Destination.EVENTBRIDGE: EventBridgeDestination(self.events, BUS, SOURCE),
            },
            poison_queue=SqsPoisonQueue(StubSqs(), POISON_QUEUE_URL),
            marker=DynamoDBRowMarker(dynamodb, TABLE),
            predecessors=DynamoDBPredecessorReader(dynamodb, TABLE, clock=clock),
            claimer=DynamoDBRowClaimer(dynamodb, TABLE),
            clock=clock,
            sleep=lambda _: None,  # retries back off on the fake clock's terms: no waiting
            random=lambda: 0.0,
            lookahead=lookahead,
        )

    def invoke(self, event: dict[str, Any]) -> tuple[Recorded, list[str]]:
        """One invocation: what the destinations accepted, and the sequence numbers handed back."""
        self.sns.recorded = self.events.recorded = recorded = Recorded()
        with quiet():
            response = handle(event, FakeLambdaContext(remaining_ms=600_000), self.publisher)
        return recorded, [failure["itemIdentifier"] for failure in response["batchItemFailures"]]

    def trial(self, event: dict[str, Any], event_id: str, kind: FailureKind) -> Trial:
        self.fault.event_id, self.fault.kind, self.fault.on = event_id, kind, True
        first, handed_back = self.invoke(event)
        self.fault.on = False
        if not handed_back:
            raise RuntimeError(f"the {kind} failure on {event_id} stopped nothing")
        again, still = self.invoke(redelivery(event, handed_back))
        if still:
            raise RuntimeError(f"the redelivery after the {kind} failure on {event_id} handed back {still}")
        duplicates = (again.sns & first.sns) | (again.events & first.events)
        return Trial(len(duplicates), len(redelivery(event, handed_back)["Records"]))


def redelivery(event: Mapping[str, Any], handed_back: Sequence[str]) -> dict[str, Any]:
    """What the stream mapping sends next: every record from the lowest reported sequence number on."""
    lowest = min(int(number) for number in handed_back)
    return {
        "Records": [
            record for record in event["Records"] if int(record["dynamodb"]["SequenceNumber"]) >= lowest
        ]
    }


def calls_per_event(harness: Harness, event: dict[str, Any]) -> float:
    recorded, handed_back = harness.invoke(event)
    if handed_back:
        raise RuntimeError(f"{len(handed_back)} records handed back with no failure injected")
    return per(recorded.publish_calls, 2 * len(event["Records"]))


def window_figures(lookahead: int, event: dict[str, Any], event_ids: Sequence[str]) -> dict[str, Any]:
    harness = Harness(lookahead)
    figures: dict[str, Any] = {"calls_per_event_per_destination": calls_per_event(harness, event)}
    for kind in ("entry", "call"):
        trials = [harness.trial(event, event_id, kind) for event_id in event_ids]
        counts = [trial.duplicates for trial in trials]
        figures[kind] = {
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
            **{
                kind: {"mean": figures[kind]["mean"], "max": figures[kind]["max"]}
                for kind in ("entry", "call")
            },
        }
        for lookahead, figures in windows.items()
    }
    labels = {"entry": "a throttled entry", "call": "a whole failed PublishBatch call"}
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
                "One failure on SNS at each position in turn, lasting the whole first invocation (its "
                "retries fail too), then the batch redelivered from the lowest reported sequence number. "
                "A duplicate: an event the redelivery publishes to a destination that already had it.",
                "Every window measured (0 = contiguous cut) with its calls and duplicates is in the "
                "detail (`by_window`).",
            ],
            command=COMMAND,
        )
    ]
