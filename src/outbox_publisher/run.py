"""One call of the publishing engine (outbox_publisher.engine): its state, and the steps in order: the gate,
the waves of calls, the verdicts, poison, and the row updates (the constraints are the engine's docstring)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from outbox.errors import OutboxError
from outbox.model import OutboxEvent, RowKey
from outbox_publisher import planning
from outbox_publisher.candidates import Candidate
from outbox_publisher.deadline import Deadline
from outbox_publisher.delivery import Deliverer, Delivery, destination_failed
from outbox_publisher.gate import HoldReason, OrderGate, Unknown, predecessors_to_read, processing_order
from outbox_publisher.memory import RowMemory
from outbox_publisher.outcome_updates import continues_past_poison, failed_mark, update_rows, updates_for
from outbox_publisher.planning import CallGroup, Planned
from outbox_publisher.poison import Rejection
from outbox_publisher.poisoning import contract_break_mark, poisoned, send_to_poison_queue
from outbox_publisher.predecessors import PredecessorState
from outbox_publisher.report import EventOutcome, PublishReport, Status
from outbox_publisher.routing import DESTINATION_ORDER, Destination
from outbox_publisher.row_updates import RowUpdate, RowUpdatesReport
from outbox_publisher.stored_envelopes import NO_TIME_TO_READ, EnvelopeUnavailable, resolve
from outbox_publisher.verdicts import judge
from outbox_publisher.waves import Waves
from outbox_publisher.writer_contract import reject_reused_event_ids

if TYPE_CHECKING:
    from outbox_publisher.engine import PublishingEngine

_log = logging.getLogger(__name__)


class EngineRun:
    """One call of `PublishingEngine.publish`: its state, and the steps in order."""

    def __init__(
        self,
        engine: PublishingEngine,
        candidates: Sequence[Candidate],
        deadline: Deadline,
        publish_until: datetime | None,
    ) -> None:
        self.engine = engine
        self.candidates = [_known_predecessor(candidate, engine.memory) for candidate in candidates]
        self.candidates = reject_reused_event_ids(self.candidates)
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
        self.down: dict[Destination, Delivery] = {}
        """Destinations that failed a whole call after its retries: not called again in this run."""
        self.gate_reads = 0
        self.early_updates = RowUpdatesReport()
        """Updates made before the run's end (writer-contract breaks, releases past poison), added to the
        run's report; their rows are not updated again at the end."""
        self.updated_early: set[RowKey] = set()

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
            outcomes, self.stopped_at, self._update_rows(outcomes), self.deliverer.calls, self.gate_reads
        )

    def _poison_contract_break(self, index: int, candidate: Candidate, rejection: Rejection) -> None:
        """Marked FAILED first, then to the poison queue, at once whatever its predecessor: only this run saw
        the break (outbox_publisher.writer_contract), and a row left PENDING holds an event the sweeper would
        publish, so a mark DynamoDB did not make hands the record back. The row is never released: nothing
        after it can go first."""
        mark = contract_break_mark(candidate, rejection, self.engine._clock(), self.engine._router)
        report = self._update_early(mark)  # already moved: this run's retry, or a sweeper's
        if report.failed:
            self._stop(index, candidate, "MarkingFailed", "the row could not be marked FAILED")
            return
        self._poison(index, candidate, rejection, attempts=0, delivered_to=())

    def _contract_break(self, index: int, candidate: Candidate, rejection: Rejection) -> bool:
        """Poisons a writer-contract break (or a late replica) at once, whatever its predecessor; False for
        other poison."""
        if not rejection.reason.marked_at_once:
            return False
        self._poison_contract_break(index, candidate, rejection)
        return True

    def _take(self, index: int, candidate: Candidate, group: CallGroup) -> CallGroup:
        """Adds the candidate to the group of the next calls, or settles it; the group to go on with."""
        if candidate.key is not None and group.holds(candidate.key.aggregate_key):
            # The gate decides on this event once its predecessor, in the group, is out.
            group = self._flushed(group)
            if self.stopped_at is not None:
                return group
        candidate, plan = self._plan(index, candidate)
        if not isinstance(plan, Planned):
            # Earlier events go first.
            group = self._flushed(group)
            if self.stopped_at is not None or (
                isinstance(plan, Rejection) and self._contract_break(index, candidate, plan)
            ):
                return group
        try:
            # Poison too waits for its predecessor: on a route that continues past poison, poisoning it lets
            # its successors go, which must not happen while an earlier event is unpublished.
            hold = self.gate.check(candidate)
        except Unknown:
            group = self._flushed(group)
            if self.stopped_at is None:
                self._stop(index, candidate, "GateReadFailed", "the predecessor's state could not be read")
            return group
        if hold is not None:
            self._hold(index, candidate, hold)
        elif not isinstance(plan, Planned):
            self._not_planned(index, candidate, plan)
        elif not plan.destinations:
            # Every destination of its route took it already (its row says so): out, with nothing to send.
            self._published(plan.position, candidate, 0, ())
        else:
            if group and not group.fits(plan, self.engine._destinations):
                group = self._flushed(group)
                if self.stopped_at is not None:
                    return group
            group.add(plan)
        return group

    def _not_planned(self, index: int, candidate: Candidate, why: Rejection | EnvelopeUnavailable) -> None:
        """Poison; or, when its stored envelope could not be read, left PENDING: not the event's fault, and no
        destination was tried, so the sweeper does not count it against the row (never poison)."""
        if isinstance(why, Rejection):
            self._poison(index, candidate, why, attempts=0, delivered_to=())
            return
        if why.code == NO_TIME_TO_READ:
            # Like any event the run has no time for: handed back, the rest of the run with it.
            self._stop(index, candidate, why.code, why.detail)
            return
        _log.warning("stored envelope not read: left for a later attempt", extra={"code": why.code})
        self._undelivered(
            index, candidate, why.code, why.detail, attempts=0, delivered_to=(), tried=False, unreadable=True
        )

    def _plan(
        self, index: int, candidate: Candidate
    ) -> tuple[Candidate, Planned | Rejection | EnvelopeUnavailable]:
        """The candidate with its stored envelope read (outbox_publisher.stored_envelopes), and its plan."""
        engine = self.engine
        resolved = resolve(
            candidate,
            engine._router,
            engine._destinations,
            engine._payloads,
            may_read=lambda: engine._retry.has_time_for(self.deadline),
        )
        if not isinstance(resolved, Candidate):
            return candidate, resolved
        return resolved, planning.plan(index, resolved, engine._router, engine._destinations)

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
            self._stop(first.position, first.candidate, "DeadlineExceeded", "too little time left")
            return
        deliveries: dict[int, dict[Destination, Delivery]] = {member.position: {} for member in members}
        for destination in DESTINATION_ORDER:
            sending = [member for member in members if destination in member.destinations]
            if not sending:
                continue
            down = self.down.get(destination)
            if down is not None:
                results = [down] * len(sending)
            else:
                results = self.deliverer.deliver(
                    self.engine._destinations[destination],
                    [member.message_for(destination) for member in sending],
                )
                if destination_failed(results):
                    # Later events are not sent to it: not tried, so not counted against them.
                    self.down[destination] = results[0]._replace(attempts=0, destination_down=True)
                    _log.warning(
                        "destination failing: not called again in this run",
                        extra={"destination": destination.value, "code": results[0].code},
                    )
            for member, result in zip(sending, results, strict=True):
                deliveries[member.position][destination] = result
        # In input order, the order the stream resumes in.
        for member in sorted(members, key=lambda member: member.position):
            self._settle(member, deliveries[member.position])

    def _settle(self, member: Planned, deliveries: Mapping[Destination, Delivery]) -> None:
        verdict = judge(member, deliveries)
        if verdict.status is Status.PUBLISHED:
            self._published(member.position, member.candidate, verdict.attempts, verdict.delivered_to)
        elif verdict.rejection is not None:
            self._poison(
                member.position,
                member.candidate,
                verdict.rejection,
                attempts=verdict.attempts,
                delivered_to=verdict.delivered_to,
            )
        elif verdict.status is Status.UNDELIVERED:
            _log.warning(
                "a destination did not take the event; it stays PENDING for the sweeper",
                extra={**_ids(member.event), "code": verdict.code, "delivered_to": verdict.delivered_to},
            )
            self._undelivered(
                member.position,
                member.candidate,
                str(verdict.code),
                str(verdict.detail),
                attempts=verdict.attempts,
                delivered_to=verdict.delivered_to,
                tried=verdict.tried,
            )
        elif self.stopped_at is None:
            self._stop(member.position, member.candidate, str(verdict.code), str(verdict.detail))
        else:
            self.outcomes[member.position] = EventOutcome(
                member.candidate, Status.NOT_ATTEMPTED, code=verdict.code, detail=verdict.detail
            )

    def _published(
        self, index: int, candidate: Candidate, attempts: int, delivered_to: tuple[Destination, ...]
    ) -> None:
        self.outcomes[index] = EventOutcome(
            candidate,
            Status.PUBLISHED,
            attempts,
            published_at=self.engine._clock(),
            delivered_to=delivered_to,
        )
        self.gate.published(candidate.key)

    def _undelivered(
        self,
        index: int,
        candidate: Candidate,
        code: str,
        detail: str,
        *,
        attempts: int,
        delivered_to: tuple[Destination, ...],
        tried: bool = True,
        unreadable: bool = False,
    ) -> None:
        """Left PENDING for later; its aggregate's later events in the run wait behind it."""
        self.gate.held(candidate.key, HoldReason.PREDECESSOR_PENDING)
        self.outcomes[index] = EventOutcome(
            candidate,
            Status.UNDELIVERED,
            attempts,
            code=code,
            detail=detail,
            delivered_to=delivered_to,
            tried=tried,
            envelope_unavailable=unreadable,
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
        if not self.engine._retry.has_time_for(self.deadline):
            # The poison queue's call, and the mark after it, might not end in time: the next run poisons it.
            self._stop(index, candidate, "DeadlineExceeded", "too little time left to poison it")
            return
        queue_error = send_to_poison_queue(
            self.engine._poison_queue,
            candidate,
            rejection,
            attempts=attempts,
            delivered_to=delivered_to,
            now=self.engine._clock(),
        )
        if queue_error is not None:
            self._undelivered(
                index,
                candidate,
                f"PoisonQueue:{queue_error}",
                "the poison queue did not take the event",
                attempts=attempts,
                delivered_to=delivered_to,
            )
            return
        outcome = poisoned(candidate, rejection, attempts=attempts, delivered_to=delivered_to)
        continues = continues_past_poison(candidate, self.engine._router)
        if continues and not rejection.reason.marked_at_once:
            # Its successors go on past it only once its row says so (FAILED, released): were they to go
            # first and the mark fail, the sweeper would publish it later, after them.
            continues = self._released(outcome)
        self.gate.poisoned(candidate.key, continues=continues)
        self.outcomes[index] = outcome

    def _released(self, outcome: EventOutcome) -> bool:
        """Marks the poisoned row FAILED and released now; whether it was (else its aggregate waits)."""
        candidate = outcome.candidate
        mark = failed_mark(
            candidate,
            outcome.detail or str(outcome.code),
            outcome.attempts,
            self.engine._clock(),
            self.engine._router,
            delivered_to=outcome.delivered_so_far,
        )
        if mark is None or candidate.key is None:
            return False
        if not self._update_early(mark).done:
            _log.warning(
                "poison not released: its aggregate waits for a later run",
                extra={"event_id": candidate.event_id, "aggregate_key": mark.key.aggregate_key},
            )
            return False
        return True

    def _update_early(self, mark: RowUpdate | None) -> RowUpdatesReport:
        report = update_rows(self.engine._updater, [mark] if mark is not None else [], self.deadline)
        self.early_updates.add(report)
        if mark is not None and mark.key not in report.failed:
            self.updated_early.add(mark.key)  # done, or moved on by someone else: nothing to redo at the end
        return report

    def _stop(self, index: int, candidate: Candidate, code: str, detail: str) -> None:
        self.stopped_at = index
        self.outcomes[index] = EventOutcome(candidate, Status.NOT_ATTEMPTED, code=code, detail=detail)

    def _update_rows(self, outcomes: Sequence[EventOutcome]) -> RowUpdatesReport:
        # A row updated early (a contract break, a release past poison) is not updated again.
        updates = updates_for(outcomes, self.engine._router, self.engine._clock())
        updates = [update for update in updates if update.key not in self.updated_early]
        report = update_rows(self.engine._updater, updates, self.deadline)
        settled = set(report.done)
        for outcome in outcomes:
            key = outcome.candidate.key
            if outcome.status is Status.PUBLISHED and key in settled:
                self.engine.memory.settled_row(key, outcome.candidate.event_id)
        report.add(self.early_updates)
        return report


def _known_predecessor(candidate: Candidate, memory: RowMemory) -> Candidate:
    """The candidate, told that its predecessor is out when this engine settled it (no read needed)."""
    key = candidate.key
    if key is None or key.seq <= 1 or candidate.predecessor is not None or key.predecessor not in memory:
        return candidate
    return candidate.but(predecessor=PredecessorState.OUT)


def _ids(event: OutboxEvent) -> dict[str, Any]:
    return {"event_id": event.event_id, "aggregate_key": event.aggregate_key, "seq": event.seq}
