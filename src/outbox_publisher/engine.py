"""The publishing engine: outbox rows in, in order; per-row outcomes out. Knows nothing of streams or boto3.

The stream publisher feeds it a shard's batch; the sweeper feeds it rows it claimed. Both get:

- The order gate (`outbox_publisher.gate`): each aggregate's events in `seq` order, none before its
  predecessor is out; an event that must wait is HELD (left PENDING) without holding up other aggregates.
- Routing: each event goes to the destinations its route names; no route is poison.
- Batching: a call carries up to 10 entries within the service's byte limit, and never two events of
  one aggregate. Calls fail per entry: if one call carried A#1 and A#2 and only A#1 failed, A#2 would
  be out before A#1, overtaking it. So a hot aggregate costs one call per event; that is the price of
  order (a FIFO topic does not lift it: EventBridge, which every route may name, keeps no order within a
  call, and SNS does not document that an entry failing fails its group's later entries). Calls are filled
  in waves across the whole batch (`outbox_publisher.waves`); the price, when a call fails, is that events
  of other aggregates already published from later in the batch are published again (docs/BENCHMARKS.md).
- Retries: transient entry and call failures are retried with capped exponential backoff and full
  jitter, within the attempts allowed and the time left (`RetryPolicy`, `Deadline`).
- Stop at the first transient failure: that event and everything after it come back as not done
  (`PublishReport.stopped_at`) and nothing later is sent; the events before it that waves had not reached
  yet still go (`Waves.stop_at`), so a failure late in the batch holds nothing back. Events that shared the
  failing call and came after it are already out (a call cannot be taken back); they are reported too and
  will be published again on redelivery. That duplicate is the at-least-once promise (README, "Delivery
  guarantees"): consumers deduplicate by `event_id`. Order per aggregate holds, because a call never
  holds two of one aggregate.
- Poison (can never succeed: unreadable row, no route, too large, refused for a permanent reason, another
  writer's break of the row contract): once the gate lets it (its predecessor is out, as for any event; a
  contract break at once, outbox_publisher.writer_contract), the row goes WHOLE to the poison queue
  with the reason, the error code and the attempt count (`outbox_publisher.poisoning`), its row is marked
  FAILED, and the batch goes on. Which of its events a call group published, poisoned or stopped at is judged
  from their deliveries by `outbox_publisher.settling`.
  If the poison queue does not take it, it is a transient failure like any other: retried, never
  dropped. A candidate on its last chance (the sweeper's cutoff) that fails transiently is poison too
  (`gave_up`).
- Marking: published rows become PUBLISHED, poison rows FAILED, in as few DynamoDB calls as possible,
  after publishing, under the caller's lease when it holds one. A marking failure never fails an event:
  the event is out, the row stays PENDING and the sweeper reconciles it; the report counts it.
- Time: no call starts without the policy's safety margin left in the invocation, and, when the caller
  gives a `publish_until` (the stream publisher's horizon for rows it did not claim), no publish call
  starts that could end after it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from outbox.clock import Clock, utc_now
from outbox.deadline import Deadline, NoDeadline
from outbox.errors import ConfigurationError, OutboxError
from outbox.model import OutboxEvent
from outbox.predecessors import PredecessorReader, PredecessorState
from outbox.row_marks import MarkingReport, RowMarker
from outbox_publisher import planning
from outbox_publisher.candidates import Candidate
from outbox_publisher.delivery import Deliverer, Delivery
from outbox_publisher.errors import FailureKind
from outbox_publisher.gate import HoldReason, OrderGate, Unknown, predecessors_to_read, processing_order
from outbox_publisher.marks import continues_past_poison, mark_rows, marks_for
from outbox_publisher.planning import CallGroup, Planned
from outbox_publisher.poison import PoisonReason, Rejection
from outbox_publisher.poisoning import contract_break_mark, poisoned, send_to_poison_queue
from outbox_publisher.ports import DestinationPort, PoisonQueue
from outbox_publisher.report import EventOutcome, PublishReport, Status
from outbox_publisher.retry import Random, RetryPolicy, Sleep, system_random, system_sleep
from outbox_publisher.routing import DESTINATION_ORDER, Destination, Router
from outbox_publisher.settling import gives_up, judge
from outbox_publisher.waves import LOOKAHEAD, Waves
from outbox_publisher.writer_contract import reject_reused_event_ids

_log = logging.getLogger(__name__)


class PublishingEngine:
    def __init__(
        self,
        *,
        destinations: Mapping[Destination, DestinationPort],
        router: Router,
        poison_queue: PoisonQueue,
        marker: RowMarker,
        predecessors: PredecessorReader,
        clock: Clock = utc_now,
        retry: RetryPolicy | None = None,
        sleep: Sleep = system_sleep,
        random: Random = system_random,
        lookahead: int = LOOKAHEAD,
    ) -> None:
        if lookahead < 0:
            raise ValueError("lookahead must not be negative")
        routed = {destination for route in router.routes for destination in route.destinations}
        missing = (routed | set(router.default)) - set(destinations)
        if missing:
            names = ", ".join(sorted(destination.value for destination in missing))
            raise ConfigurationError(f"routes name destinations that have no adapter: {names}")
        self._destinations = dict(destinations)
        self._router = router
        self._poison_queue = poison_queue
        self._marker = marker
        self._predecessors = predecessors
        self._clock = clock
        self._retry = retry or RetryPolicy()
        self._sleep = sleep
        self._random = random
        self._lookahead = lookahead

    def publish(
        self,
        candidates: Sequence[Candidate],
        deadline: Deadline | None = None,
        *,
        publish_until: datetime | None = None,
    ) -> PublishReport:
        """Publish `candidates`; `publish_until`: no publish call may end after it (None: no such bound)."""
        return _Run(self, candidates, deadline or NoDeadline(), publish_until).execute()


class _Run:
    """One call of `PublishingEngine.publish`: its state, and the steps in order."""

    def __init__(
        self,
        engine: PublishingEngine,
        candidates: Sequence[Candidate],
        deadline: Deadline,
        publish_until: datetime | None,
    ) -> None:
        self.engine = engine
        self.candidates = reject_reused_event_ids(candidates)
        self.deadline = deadline
        self.outcomes: dict[int, EventOutcome] = {}
        self.stopped_at: int | None = None
        self.deliverer = Deliverer(
            engine._retry,
            deadline,
            sleep=engine._sleep,
            random=engine._random,
            clock=engine._clock,
            publish_until=publish_until,
        )
        self.gate_reads = 0
        self.early_marks = MarkingReport()
        """Marks made before the run's end (writer-contract breaks), added to the run's marking report."""

    # -- the steps ---------------------------------------------------------------------------

    def execute(self) -> PublishReport:
        self.gate = OrderGate(self._read_predecessors())
        # Each event's aggregate; an unreadable row (no key) is an aggregate of its own.
        aggregates = [
            candidate.key.aggregate_key if candidate.key is not None else f"#{index}"
            for index, candidate in enumerate(self.candidates)
        ]
        waves = Waves(processing_order(self.candidates), aggregates, self.engine._lookahead)
        group = CallGroup()
        while waves.remaining:
            if self.stopped_at is not None:
                waves.stop_at(
                    self.stopped_at, [i for i, outcome in self.outcomes.items() if not outcome.done]
                )
                self.stopped_at, group = None, CallGroup()
                continue
            wave = waves.next_wave(settled=self.outcomes)
            if not wave:
                if not group:
                    break  # not reached: the first unsettled event heads its queue, within reach
                # The first unsettled event is in the group (its successor heads its queue): settle it.
                group = self._flushed(group)
                continue
            for aggregate in wave:
                index = waves.take(aggregate)
                group = self._take(index, self.candidates[index], group)
                if self.stopped_at is not None:
                    if index not in self.outcomes:  # the stop came from the group before it
                        waves.put_back(index)
                    break
        self._flush(group)
        # The report names the earliest stop in processing order: where the first event not done is.
        self.stopped_at = waves.earliest_stop(self.stopped_at)
        return self._report()

    def _report(self) -> PublishReport:
        outcomes = [
            self.outcomes[index] if index in self.outcomes else EventOutcome(candidate, Status.NOT_ATTEMPTED)
            for index, candidate in enumerate(self.candidates)
        ]
        return PublishReport(
            outcomes, self.stopped_at, self._mark(outcomes), self.deliverer.calls, self.gate_reads
        )

    def _poison_contract_break(self, index: int, candidate: Candidate, rejection: Rejection) -> None:
        """Marked FAILED first, then to the poison queue, at once whatever its predecessor: only this run saw
        the break (outbox_publisher.writer_contract), and a row left PENDING holds an event the sweeper would
        publish, so a mark DynamoDB did not make hands the record back. The row is never released: nothing
        after it can go first."""
        mark = contract_break_mark(candidate, rejection, self.engine._clock(), self.engine._router)
        report = mark_rows(self.engine._marker, [mark] if mark is not None else [], self.deadline)
        self.early_marks.marked.extend(report.marked)
        self.early_marks.already_moved.extend(report.already_moved)  # this run's retry, or a sweeper's
        self.early_marks.calls += report.calls
        self.early_marks.fallbacks += report.fallbacks
        if report.failed:
            self._stop(index, candidate, "MarkingFailed", "the row could not be marked FAILED", tried=False)
            return
        self._poison(index, candidate, rejection, attempts=0, delivered_to=())

    def _take(self, index: int, candidate: Candidate, group: CallGroup) -> CallGroup:
        """Adds the candidate to the group of the next calls, or settles it; the group to go on with."""
        if candidate.key is not None and group.holds(candidate.key.aggregate_key):
            # The gate decides on this event once its predecessor, in the group, is out.
            group = self._flushed(group)
            if self.stopped_at is not None:
                return group
        plan = planning.plan(index, candidate, self.engine._router, self.engine._destinations)
        if isinstance(plan, Rejection):
            # Earlier events go first; and if the poison queue then fails, nothing after it is sent.
            group = self._flushed(group)
            if self.stopped_at is not None:
                return group
            if plan.reason is PoisonReason.WRITER_CONTRACT:
                self._poison_contract_break(index, candidate, plan)
                return group
        try:
            # Poison too waits for its predecessor: on a route that continues past poison, poisoning it lets
            # its successors go, which must not happen while an earlier event is unpublished.
            hold = self.gate.check(candidate)
        except Unknown:
            group = self._flushed(group)
            if self.stopped_at is None:
                self._stop(
                    index,
                    candidate,
                    "GateReadFailed",
                    "the predecessor's state could not be read",
                    tried=False,
                )
            return group
        if hold is not None:
            self._hold(index, candidate, hold)
        elif isinstance(plan, Rejection):
            self._poison(index, candidate, plan, attempts=0, delivered_to=())
        else:
            if group and not group.fits(plan, self.engine._destinations):
                group = self._flushed(group)
                if self.stopped_at is not None:
                    return group
            group.add(plan)
        return group

    def _flushed(self, group: CallGroup) -> CallGroup:
        self._flush(group)
        return CallGroup()

    def _read_predecessors(self) -> dict[Any, PredecessorState] | None:
        """The states of predecessors outside the run, read at once; None if they could not be read."""
        keys = predecessors_to_read(self.candidates)
        if not keys:
            return {}
        if not self.engine._retry.has_time_for(self.deadline):
            return None
        self.gate_reads += 1
        try:
            return self.engine._predecessors.states(
                keys, may_call=lambda: self.engine._retry.has_time_for(self.deadline)
            )
        except OutboxError as error:
            _log.warning(
                "could not read predecessors' states; stopping where one is needed",
                extra={"error": type(error).__name__, "keys": len(keys)},
            )
            return None

    def _hold(self, index: int, candidate: Candidate, reason: HoldReason) -> None:
        self.gate.held(candidate.key, reason)
        if reason is not HoldReason.PREDECESSOR_HELD:
            event = candidate.event
            _log.info(
                "event held by the order gate",
                extra={**(_ids(event) if event is not None else {}), "reason": reason.value},
            )
        self.outcomes[index] = EventOutcome(candidate, Status.HELD, code=reason.value)

    def _flush(self, group: CallGroup) -> None:
        if not group or self.stopped_at is not None:
            return
        members = group.members
        if not self.engine._retry.has_time_for(self.deadline):
            first = members[0]
            _log.warning("too little time left to publish; handing the rest back", extra=_ids(first.event))
            self._stop(
                first.position,
                first.candidate,
                "DeadlineExceeded",
                "too little time left in the invocation",
                tried=False,
            )
            return
        deliveries: dict[int, dict[Destination, Delivery]] = {member.position: {} for member in members}
        # Once an event has failed on one destination (not for good), later events of the group are not
        # sent to the next destinations: they will be handed back and published everywhere on redelivery.
        cut: int | None = None
        for destination in DESTINATION_ORDER:
            sending = [
                member
                for member in members
                if destination in member.destinations
                and (cut is None or member.position < cut)
                and all(delivery.ok for delivery in deliveries[member.position].values())
            ]
            if not sending:
                continue
            results = self.deliverer.deliver(
                self.engine._destinations[destination], [member.message for member in sending]
            )
            for member, result in zip(sending, results, strict=True):
                deliveries[member.position][destination] = result
            failed = [
                member.position
                for member, result in zip(sending, results, strict=True)
                # A last-chance event that fails is poisoned, not retried: nothing after it must wait.
                if not result.ok and result.kind is not FailureKind.PERMANENT and not gives_up(member, result)
            ]
            if failed:
                cut = min(failed) if cut is None else min(cut, *failed)
        published_at = self.engine._clock()
        # In input order, the order the stream resumes in: an event after the cut that went to the first
        # destinations only is settled after the event that failed (not done), never before it.
        for member in sorted(members, key=lambda member: member.position):
            self._settle(member, deliveries[member.position], published_at)

    def _settle(
        self, member: Planned, deliveries: Mapping[Destination, Delivery], published_at: datetime
    ) -> None:
        verdict = judge(member, deliveries, stopped=self.stopped_at is not None)
        if verdict.status is Status.PUBLISHED:
            self.outcomes[member.position] = EventOutcome(
                member.candidate,
                Status.PUBLISHED,
                verdict.attempts,
                published_at=published_at,
                delivered_to=verdict.delivered_to,
            )
            self.gate.published(member.candidate.key)
        elif verdict.status is Status.NOT_ATTEMPTED:
            self.outcomes[member.position] = EventOutcome(
                member.candidate, Status.NOT_ATTEMPTED, verdict.attempts, delivered_to=verdict.delivered_to
            )
        elif verdict.rejection is not None:
            self._poison(
                member.position,
                member.candidate,
                verdict.rejection,
                attempts=verdict.attempts,
                delivered_to=verdict.delivered_to,
            )
        else:
            assert verdict.failed_on is not None  # noqa: S101 - judge names the destination that failed
            _log.warning(
                "publish failed after retries; stopping here",
                extra={
                    **_ids(member.event),
                    "destination": verdict.failed_on.value,
                    "code": deliveries[verdict.failed_on].code,
                },
            )
            self._stop(
                member.position,
                member.candidate,
                str(verdict.code),
                str(verdict.detail),
                attempts=verdict.attempts,
                delivered_to=verdict.delivered_to,
                tried=verdict.tried,
            )

    def _poison(
        self,
        index: int,
        candidate: Candidate,
        rejection: Rejection,
        *,
        attempts: int,
        delivered_to: tuple[Destination, ...],
    ) -> None:
        queue_error = send_to_poison_queue(
            self.engine._poison_queue,
            candidate,
            rejection,
            attempts=attempts,
            delivered_to=delivered_to,
            now=self.engine._clock(),
        )
        if queue_error is not None:
            self._stop(
                index,
                candidate,
                f"PoisonQueue:{queue_error}",
                "the poison queue did not take the event",
                attempts=attempts,
                delivered_to=delivered_to,
            )
            return
        self.gate.poisoned(candidate.key, continues=continues_past_poison(candidate, self.engine._router))
        self.outcomes[index] = poisoned(candidate, rejection, attempts=attempts, delivered_to=delivered_to)

    def _stop(
        self,
        index: int,
        candidate: Candidate,
        code: str,
        detail: str,
        *,
        attempts: int = 0,
        delivered_to: tuple[Destination, ...] = (),
        tried: bool = True,
    ) -> None:
        self.stopped_at = index
        self.outcomes[index] = EventOutcome(
            candidate,
            Status.FAILED,
            attempts,
            code=code,
            detail=detail,
            delivered_to=delivered_to,
            tried=tried,
        )

    def _mark(self, outcomes: Sequence[EventOutcome]) -> MarkingReport:
        marks = marks_for(outcomes, self.engine._router, self.engine._clock())
        report = mark_rows(self.engine._marker, marks, self.deadline)
        report.marked.extend(self.early_marks.marked)
        report.already_moved.extend(self.early_marks.already_moved)
        report.calls += self.early_marks.calls
        report.fallbacks += self.early_marks.fallbacks
        return report


def _ids(event: OutboxEvent) -> dict[str, Any]:
    return {"event_id": event.event_id, "aggregate_key": event.aggregate_key, "seq": event.seq}
