"""One sweep: publish the PENDING rows that are due, in order per aggregate, through the publishing engine.

1. Read the pending index: rows older than the grace, not backing off, oldest first (bounded per run).
2. Per aggregate, from its lowest due `seq`: read that row's predecessor (one batched, consistent read for
   all aggregates). If it is not out (PENDING, FAILED, missing), nothing of the aggregate is claimed: the
   rows stay as they are, and an aggregate held behind a FAILED or missing event is counted, for its alarm.
3. Claim the aggregate's due rows in `seq` order (outbox.leases); stop at the first that is not this
   sweep's to take (another path holds it, or it backs off): later ones must not go before it.
4. Publish the claimed rows with the engine (its order gate, routing, poison, marking under the lease).
5. The row the engine stopped at (a transient failure) backs off: `attempts` grows by the run's tries,
   `sweep_failures` by one, and `next_attempt_at` is set: base * 2^(sweep_failures - 1), capped, with equal
   jitter. A run that may take a row to its attempt cutoff, or a row past its age cutoff, is its last
   chance: if it fails again it becomes FAILED (poison, `gave_up`) and goes whole to the poison queue.

A second sweep over the same rows adds nothing: a published row left the index, and one another path holds
is not claimed.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from outbox.clock import Clock, parse_timestamp, utc_now
from outbox.deadline import Deadline
from outbox.errors import OutboxError
from outbox.leases import Claim, Lease, RowClaimer
from outbox.model import PENDING_SHARDS, REDRIVEN_AT, SWEEP_FAILURES, RowKey
from outbox.predecessors import MAX_KEYS_PER_CALL, PredecessorReader, PredecessorState
from outbox.row_marks import MarkingReport
from outbox_publisher.candidates import Candidate
from outbox_publisher.engine import PublishingEngine
from outbox_publisher.gate import HoldReason
from outbox_publisher.poison import PoisonReason
from outbox_publisher.report import EventOutcome, PublishReport, Status
from outbox_publisher.retry import Random, RetryPolicy, system_random
from outbox_sweeper.config import SweepSettings
from outbox_sweeper.pending import PendingIndex, PendingRow, PendingScan

SWEEPER = "sweeper"
"""Prefix of the sweeper's lease owners. Each run owns its leases (`sweeper:<run id>`): two runs that
overlap (a slow run and the next scheduled one) never take each other's rows, and a run's leases end with
its invocation, so a crashed run holds nothing for long."""

UNSWEPT_PREDECESSOR = "pending_unswept"
"""Why an aggregate is held, in its log line, when its predecessor is PENDING where no sweep takes it."""

_log = logging.getLogger(__name__)


class SweepReport:
    """What one sweep did. A plain class, not a dataclass: it is only filled in and read, and a dataclass
    would cost the cold start its generated methods (docs/BENCHMARKS.md, "Cold start")."""

    __slots__ = (
        "backed_off",
        "claimed",
        "due",
        "gave_up",
        "held_aggregates",
        "oldest_pending_age_s",
        "pending",
        "pending_complete",
        "poisoned",
        "publish",
        "swept",
    )

    def __init__(self) -> None:
        self.pending = 0
        self.pending_complete = True
        self.oldest_pending_age_s = 0.0
        self.due = 0
        self.held_aggregates = 0
        """Aggregates whose next event waits behind a FAILED or missing one."""
        self.claimed = 0
        self.swept = 0
        """Events this sweep published."""
        self.backed_off = 0
        self.gave_up = 0
        self.poisoned = 0
        self.publish = PublishReport([], None, MarkingReport())


class _Claiming:
    """One run's claiming: its lease and clock reading, its deadline, what it claimed. (A plain class: only
    its run reads it, and a dataclass would cost the cold start its generated methods.)"""

    __slots__ = ("candidates", "deadline", "lease", "now", "report")

    def __init__(self, lease: Lease, now: datetime, deadline: Deadline, report: SweepReport) -> None:
        self.lease = lease
        self.now = now
        self.deadline = deadline
        self.report = report
        self.candidates: list[Candidate] = []


class Sweeper:
    def __init__(
        self,
        *,
        engine: PublishingEngine,
        index: PendingIndex,
        predecessors: PredecessorReader,
        claimer: RowClaimer,
        grace: timedelta,
        settings: SweepSettings,
        clock: Clock = utc_now,
        random: Random = system_random,
        retry: RetryPolicy | None = None,
        run_id: Callable[[], str] = lambda: uuid.uuid4().hex,
    ) -> None:
        self._run_id = run_id
        self._engine = engine
        self._index = index
        self._predecessors = predecessors
        self._claimer = claimer
        self._grace = grace
        self._settings = settings
        self._clock = clock
        self._random = random
        self._retry = retry or RetryPolicy()

    def run(self, deadline: Deadline) -> SweepReport:
        now = self._clock()
        report = SweepReport()
        scan = self._index.scan(
            due_before=now - self._grace,
            now=now,
            limit=self._settings.max_rows,
            deadline=deadline,
            # A random shard first: a scan cut short by time leaves different ones out each run.
            first_shard=int(self._random() * PENDING_SHARDS) % PENDING_SHARDS,
        )
        report.pending, report.pending_complete, report.due = scan.count, scan.complete, scan.due_count
        if scan.oldest is not None:
            report.oldest_pending_age_s = max(0.0, (now - scan.oldest).total_seconds())
        lease = Lease(f"{SWEEPER}:{self._run_id()}", now + timedelta(milliseconds=deadline.remaining_ms()))
        candidates = self._claim(scan, lease, now, deadline, report)
        if candidates:
            report.publish = self._engine.publish(candidates, deadline)
            self._settle(report, lease)
        return report

    def _claim(
        self, scan: PendingScan, lease: Lease, now: datetime, deadline: Deadline, report: SweepReport
    ) -> list[Candidate]:
        """Claims, aggregate by aggregate (oldest first), up to `max_rows` rows. An aggregate whose first due
        row waits for its predecessor is passed over, so held aggregates never crowd out the others.
        Predecessors are read a batch of aggregates at a time, only as far as the claims go."""
        run = _Claiming(lease, now, deadline, report)
        aggregates = list(scan.due.values())
        for start in range(0, len(aggregates), MAX_KEYS_PER_CALL):
            chunk = aggregates[start : start + MAX_KEYS_PER_CALL]
            states = self._predecessor_states([rows[0] for rows in chunk], run.deadline)
            if states is None:
                break
            if not all(self._claim_aggregate(rows, states, run) for rows in chunk):
                break
        return run.candidates

    def _claim_aggregate(
        self, rows: Sequence[PendingRow], states: Mapping[RowKey, PredecessorState], run: _Claiming
    ) -> bool:
        """Claims the aggregate's due rows in `seq` order; False when the run must claim no more."""
        first = rows[0]
        state = PredecessorState.PUBLISHED if first.key.seq == 1 else states[first.key.predecessor]
        if not state.resolved and not first.predecessor_released:
            if state in (PredecessorState.FAILED, PredecessorState.MISSING):
                run.report.held_aggregates += 1
                _held(first.key, state.value)
            elif self._waits_for_good(first, run.now):
                run.report.held_aggregates += 1
                _held(first.key, UNSWEPT_PREDECESSOR)
            return True
        for position, row in enumerate(rows):
            if run.report.claimed >= self._settings.max_rows or not self._retry.has_time_for(run.deadline):
                return False
            try:
                claim = self._claimer.claim(row.key, run.lease, run.now)
            except OutboxError as error:
                # DynamoDB did not answer: publish what is claimed; the rest waits for the next run.
                _log.warning("could not claim a row; claiming stops here", extra={"error": str(error)})
                return False
            if claim.claim is Claim.CLAIMED and claim.row is not None:
                run.report.claimed += 1
                candidate = Candidate.from_row(_ref(row.key), claim.row, source={"swept_by": run.lease.owner})
                run.candidates.append(
                    candidate.but(
                        lease=run.lease,
                        predecessor=state if position == 0 else None,
                        last_chance=self._last_chance(claim.row, run.now),
                    )
                )
            elif claim.claim in (Claim.LEASED, Claim.BACKING_OFF):
                break  # later events of the aggregate must not go before this one
        return True

    def _waits_for_good(self, row: PendingRow, now: datetime) -> bool:
        """A PENDING predecessor that a swept row would have published or failed by now (its cutoff and one
        more backoff have passed since this row occurred): the sweeper does not see it (no `pending_shard`,
        a far-future date), so this row would wait forever, unseen, without an operator."""
        if row.occurred_at is None:
            return False
        return now - row.occurred_at > self._settings.fail_after + self._settings.backoff_max

    def _predecessor_states(
        self, firsts: Sequence[PendingRow], deadline: Deadline
    ) -> dict[RowKey, PredecessorState] | None:
        keys = [row.key.predecessor for row in firsts if row.key.seq > 1]
        if not keys:
            return {}
        try:
            return self._predecessors.states(keys, may_call=lambda: self._retry.has_time_for(deadline))
        except OutboxError as error:
            _log.warning(
                "could not read predecessors; nothing more is swept this time", extra={"error": str(error)}
            )
            return None

    def _last_chance(self, row: Mapping[str, Any], now: datetime) -> bool:
        """This run may take the row to its attempt cutoff, or it is past its age cutoff (both counted from
        its redrive, if an operator redrove it)."""
        if _number(row, "attempts") + self._retry.max_attempts >= self._settings.max_attempts:
            return True
        try:
            since = parse_timestamp(str(row.get(REDRIVEN_AT, row["occurred_at"])["S"]))
        except (KeyError, TypeError, ValueError):
            return False  # unreadable: the engine poisons it anyway
        return now - since >= self._settings.fail_after

    def _settle(self, report: SweepReport, lease: Lease) -> None:
        held: set[str] = set()
        failed_at = self._clock()  # the backoff counts from the failure, not from the start of the run
        for outcome in report.publish.outcomes:
            key = outcome.candidate.key
            if outcome.status is Status.PUBLISHED:
                report.swept += 1
            elif outcome.status is Status.POISONED:
                report.poisoned += 1
                if outcome.poison_reason is PoisonReason.GAVE_UP:
                    report.gave_up += 1
            elif (
                outcome.status is Status.HELD
                and key is not None
                and HoldReason(str(outcome.code)).needs_operator
                and key.aggregate_key not in held
            ):
                held.add(key.aggregate_key)
                _held(key, str(outcome.code).removeprefix("predecessor_"))
            elif outcome.status is Status.FAILED and key is not None and outcome.tried:
                # Only a row the run tried and failed backs off (a publish, or the poison queue, failed).
                self._back_off(key, outcome, failed_at, lease)
                report.backed_off += 1
            elif outcome.status in (Status.FAILED, Status.NOT_ATTEMPTED) and key is not None:
                # Claimed, not got to (no time, no gate read, after the stop): free for the next run at once.
                self._release(key, lease)
        report.held_aggregates += len(held)

    def _release(self, key: RowKey, lease: Lease) -> None:
        try:
            self._claimer.release(key, lease)
        except OutboxError as error:
            # The lease expires with this invocation anyway.
            _log.warning("could not release a lease", extra={"row": _ref(key), "error": str(error)})

    def _back_off(self, key: RowKey, outcome: EventOutcome, now: datetime, lease: Lease) -> None:
        tried = max(1, outcome.attempts)
        code = outcome.code or "Failed"
        failures = _number(outcome.candidate.row, SWEEP_FAILURES) + 1
        base, most = self._settings.backoff_base, self._settings.backoff_max
        # Doubled no more often than it takes to pass the cap: base * 2**n overflows a timedelta past n ~ 40.
        doublings = min(failures - 1, (most // base).bit_length())
        ceiling = min(most, base * 2**doublings)
        # Equal jitter: at least half the ceiling, so a failing row is never retried right away.
        delay = ceiling * (0.5 + self._random() / 2)
        try:
            self._claimer.back_off(key, lease, attempts=tried, next_attempt_at=now + delay, error=code)
        except OutboxError as error:
            # The lease expires on its own; the row is tried again by a later sweep.
            _log.warning("could not record the backoff", extra={"row": _ref(key), "error": str(error)})


def _held(key: RowKey, why: str) -> None:
    """One line per held aggregate and run: what the operator must redrive or skip (outbox.release)."""
    _log.warning(
        "aggregate held: an operator must redrive or skip its predecessor",
        extra={"aggregate_key": key.aggregate_key, "waiting_seq": key.seq, "predecessor": why},
    )


def _ref(key: RowKey) -> str:
    return f"{key.aggregate_key}/{key.seq}"


def _number(row: Mapping[str, Any], name: str) -> int:
    try:
        return int(float(row.get(name, {}).get("N", "0")))
    except (TypeError, ValueError, AttributeError):
        return 0
