"""In-memory fakes of the publishing engine's ports, a harness around the engine, and candidate builders."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from outbox.model import OutboxEvent, RowKey
from outbox_publisher.candidates import Candidate
from outbox_publisher.deadline import Deadline
from outbox_publisher.engine import PublishingEngine
from outbox_publisher.errors import DestinationCallError, FailureKind, PoisonQueueUnavailableError
from outbox_publisher.leases import Claim, ClaimResult, Fence, Lease
from outbox_publisher.messages import Message, eventbridge_size, sns_size
from outbox_publisher.poison import PoisonMessage
from outbox_publisher.ports import EntryResult
from outbox_publisher.predecessors import PredecessorState
from outbox_publisher.retry import RetryPolicy
from outbox_publisher.routing import Destination, Router
from outbox_publisher.row_updates import RowUpdate, RowUpdatesReport
from outbox_publisher.waves import LOOKAHEAD
from tests.support.clock import FakeClock, RecordingSleep

SOURCE = "shop.orders"


@dataclass
class FakeDeadline:
    remaining: int = 60_000

    def remaining_ms(self) -> int:
        return self.remaining


ALWAYS = 1_000


class FakeDestination:
    """A destination that accepts everything except the faults it was told to answer with.

    `fail_entry(event_id, result, times)` answers that entry with `result` the next `times` calls;
    `fail_call(error, times, when)` raises `error` for the next `times` calls (that match `when`).
    """

    def __init__(self, destination: Destination) -> None:
        self.destination = destination
        self.max_entry_bytes = 262_144
        self.max_batch_bytes = 262_144
        self.calls: list[list[str]] = []
        self.accepted: list[str] = []
        self._entry_faults: dict[str, list[EntryResult]] = {}
        self._call_faults: list[tuple[DestinationCallError, Callable[[Sequence[Message]], bool]]] = []

    def size_of(self, message: Message) -> int:
        if self.destination is Destination.SNS:
            return sns_size(message)
        return eventbridge_size(message, source=SOURCE)

    def fail_entry(self, event_id: str, result: EntryResult, times: int = 1) -> None:
        self._entry_faults.setdefault(event_id, []).extend([result] * times)

    def fail_call(
        self,
        error: DestinationCallError,
        times: int = 1,
        when: Callable[[Sequence[Message]], bool] = lambda _: True,
    ) -> None:
        self._call_faults.extend([(error, when)] * times)

    def publish(self, messages: Sequence[Message]) -> list[EntryResult]:
        self.calls.append([message.event.event_id for message in messages])
        for position, (error, when) in enumerate(self._call_faults):
            if when(messages):
                del self._call_faults[position]
                raise error
        results = []
        for message in messages:
            faults = self._entry_faults.get(message.event.event_id)
            if faults:
                results.append(faults.pop(0))
            else:
                self.accepted.append(message.event.event_id)
                results.append(EntryResult.success())
        return results


class FakePoisonQueue:
    def __init__(self) -> None:
        self.messages: list[PoisonMessage] = []
        self.unavailable = False

    def send(self, message: PoisonMessage) -> None:
        if self.unavailable:
            raise PoisonQueueUnavailableError(
                "queue unavailable", code="AWS.SimpleQueueService.NonExistentQueue"
            )
        self.messages.append(message)


class FakePredecessors:
    """Predecessors' states as a test sets them; anything not set is OUT (the usual case: settled)."""

    def __init__(self) -> None:
        self.known: dict[RowKey, PredecessorState] = {}
        self.reads: list[list[RowKey]] = []
        self.error: Exception | None = None

    def states(
        self, keys: Sequence[RowKey], *, may_call: Callable[[], bool] = lambda: True
    ) -> dict[RowKey, PredecessorState]:
        self.reads.append(list(keys))
        if self.error is not None:
            raise self.error
        return {key: self.known.get(key, PredecessorState.OUT) for key in keys}


class FakeUpdater:
    """Records the row updates it is given; every one is done, unless `error` (raised), `refuse` (keys whose
    condition does not hold: already moved) or `fail` (keys DynamoDB did not update) say otherwise."""

    def __init__(self) -> None:
        self.updates: list[RowUpdate] = []
        self.error: Exception | None = None
        self.refuse: set[RowKey] = set()
        self.fail: set[RowKey] = set()
        self.deadlines: list[Deadline | None] = []

    def apply(self, updates: Sequence[RowUpdate], deadline: Deadline | None = None) -> RowUpdatesReport:
        self.deadlines.append(deadline)
        if self.error is not None:
            raise self.error
        self.updates.extend(updates)
        report = RowUpdatesReport()
        for update in updates:
            if update.key in self.fail:
                report.failed[update.key] = "ThrottledError"
            else:
                (report.already_moved if update.key in self.refuse else report.done).append(update.key)
        report.calls += len(updates)
        return report


SNS_ONLY = (Destination.SNS,)


def ids(*events: OutboxEvent) -> list[str]:
    return [e.event_id for e in events]


def candidates(*events: OutboxEvent) -> list[Candidate]:
    return [Candidate.from_row(f"seq-{position:03d}", item.to_item()) for position, item in enumerate(events)]


def transient(code: str = "ThrottlingException") -> EntryResult:
    return EntryResult.failure(code, FailureKind.TRANSIENT)


@dataclass
class Harness:
    sns: FakeDestination
    eventbridge: FakeDestination
    poison: FakePoisonQueue
    updater: FakeUpdater
    clock: FakeClock
    sleep: RecordingSleep
    engine: PublishingEngine
    predecessors: FakePredecessors


def harness(
    *,
    router: Router | None = None,
    destinations: Sequence[Destination] = (Destination.SNS, Destination.EVENTBRIDGE),
    retry: RetryPolicy | None = None,
    lookahead: int = LOOKAHEAD,
) -> Harness:
    sns = FakeDestination(Destination.SNS)
    eventbridge = FakeDestination(Destination.EVENTBRIDGE)
    ports = {Destination.SNS: sns, Destination.EVENTBRIDGE: eventbridge}
    poison = FakePoisonQueue()
    updater = FakeUpdater()
    clock = FakeClock()
    sleep = RecordingSleep(clock)
    predecessors = FakePredecessors()
    engine = PublishingEngine(
        destinations={name: ports[name] for name in destinations},
        router=router or Router.everything_to(destinations),
        poison_queue=poison,
        updater=updater,
        predecessors=predecessors,
        clock=clock,
        retry=retry or RetryPolicy(),
        sleep=sleep,
        random=lambda: 0.5,
        lookahead=lookahead,
    )
    return Harness(sns, eventbridge, poison, updater, clock, sleep, engine, predecessors)


class FakeClaimer:
    """Claims as a test scripts them: by default every row is claimed, as stored in `rows`."""

    def __init__(self) -> None:
        self.rows: dict[RowKey, dict[str, Any]] = {}
        self.answers: dict[RowKey, Claim] = {}
        self.claimed: list[RowKey] = []
        self.backed_off: list[tuple[RowKey, int, datetime, str]] = []
        self.delivered: dict[RowKey, frozenset[str]] = {}
        """What each backoff recorded as the destinations that took the event."""
        self.released: list[RowKey] = []
        self.error: Exception | None = None

    def claim(self, key: RowKey, lease: Lease, now: datetime, fence: Fence | None = None) -> ClaimResult:
        if self.error is not None:
            raise self.error
        answer = self.answers.get(key, Claim.CLAIMED)
        if answer is Claim.CLAIMED:
            self.claimed.append(key)
        return ClaimResult(answer, self.rows.get(key))

    def back_off(
        self,
        key: RowKey,
        lease: Lease,
        *,
        attempts: int,
        next_attempt_at: datetime,
        error: str,
        delivered_to: frozenset[str] = frozenset(),
        counted: bool = True,
    ) -> bool:
        self.backed_off.append((key, attempts, next_attempt_at, error))
        self.delivered[key] = delivered_to
        return True

    def release(self, key: RowKey, lease: Lease) -> bool:
        self.released.append(key)
        return True
