"""One sweep: publish the PENDING rows that are due, in order per aggregate, through the publishing engine
(docs/publisher.md, "Order gate and sweeper", gives each step).

It reads its segment from where the last run stopped (`scan`, `cursor`): the table holds only what is not out
yet, so this finds every row left behind, whoever wrote it, with no index. The census picks the due rows; they
are claimed in order, aggregate by aggregate, and an aggregate stops at the first row that is not this sweep's
to take (another path holds it, it backs off, it is FAILED now): later ones must not go before it. The engine
publishes what was claimed; a row it could not deliver backs off exponentially (capped, equal jitter), and a
run that may take a row past its attempt or age cutoff is its last chance: failing again makes it poison
(`gave_up`). FAILED rows missing from the failed index are added to it, so operators see them.

On an outbox across regions, each run first writes its region's heartbeat and publishes only the rows its
region owns (outbox_sweeper.regional).

A second sweep over the same rows adds nothing: a published row left the table, and one another path holds
is not claimed.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from outbox.clock import Clock, parse_timestamp, utc_now
from outbox.errors import OutboxError
from outbox.model import (
    ENVELOPE_WAITS,
    REDRIVEN_AT,
    RELEASED_AT,
    SWEEP_FAILURES,
    OutboxStatus,
    RowKey,
    string_attribute,
)
from outbox.regions import TakenVerdict
from outbox_publisher.candidates import Candidate
from outbox_publisher.deadline import Deadline
from outbox_publisher.dynamodb_rows import UPDATE_CALL_MS
from outbox_publisher.engine import PublishingEngine
from outbox_publisher.gate import HoldReason
from outbox_publisher.leases import Claim, ClaimResult, Lease, RowClaimer
from outbox_publisher.outcome_updates import park_for
from outbox_publisher.poison import PoisonReason
from outbox_publisher.predecessors import PredecessorState
from outbox_publisher.report import EventOutcome, PublishReport, Status
from outbox_publisher.retry import Random, RetryPolicy, system_random
from outbox_publisher.row_updates import Park, RowUpdatesReport, Settle
from outbox_sweeper.backoff import backoff, stored_count
from outbox_sweeper.census import Census, DueRow, Figures
from outbox_sweeper.config import SweepSettings
from outbox_sweeper.cursor import Cursor, CursorStore
from outbox_sweeper.failed_index import FailedIndexer
from outbox_sweeper.regional import RegionalSweep, RegionRun
from outbox_sweeper.scan import TableScan, read_segment

__all__ = ["SWEEPER", "SweepReport", "Sweeper", "backoff", "stored_count"]

SWEEPER = "sweeper"
"""Prefix of the sweeper's lease owners. Each run owns its leases (`sweeper:<run id>`): two runs that
overlap (a slow run and the next scheduled one) never take each other's rows, and a run's leases end with
its invocation, so a crashed run holds nothing for long."""

SCAN_RESERVE_MS = 30_000
"""Stop reading the table with less than this left: the run still has to claim, publish and settle."""

_log = logging.getLogger(__name__)


class SweepReport:
    """What one sweep did."""

    __slots__ = (
        "backed_off",
        "checked_at",
        "claimed",
        "complete",
        "due",
        "figures",
        "gave_up",
        "indexed",
        "pages",
        "parked",
        "poisoned",
        "publish",
        "region",
        "rows_read",
        "swept",
    )

    def __init__(self, checked_at: datetime | None = None) -> None:
        self.checked_at = checked_at
        """When the run read the table (its clock)."""
        self.figures = Figures()
        """The table's figures: this pass's when it ended in this run, else the larger of the last complete
        pass's and this pass's so far (outbox_sweeper.cursor)."""
        self.complete = True
        """Whether the pass over the table ended in this run."""
        self.rows_read = 0
        self.pages = 0
        self.due = 0
        self.claimed = 0
        self.swept = 0
        """Events this sweep published."""
        self.backed_off = 0
        self.gave_up = 0
        self.poisoned = 0
        self.indexed = 0
        """FAILED rows this sweep added to the failed index."""
        self.parked = RowUpdatesReport()
        """Rows of events the run had no time to take everywhere, recording which destinations took them."""
        self.publish = PublishReport([], None, RowUpdatesReport())
        self.region: RegionRun | None = None
        """On an outbox across regions: the run's heartbeat, ownership and late replicas."""

    @property
    def held_aggregates(self) -> int:
        return self.figures.held_aggregates

    @property
    def oldest_pending_age_s(self) -> float:
        oldest = self.figures.oldest_pending
        if oldest is None or self.checked_at is None:
            return 0.0
        return max(0.0, (self.checked_at - oldest).total_seconds())


class Sweeper:
    def __init__(
        self,
        *,
        engine: PublishingEngine,
        scan: TableScan,
        cursors: CursorStore,
        claimer: RowClaimer,
        indexer: FailedIndexer,
        grace: timedelta,
        settings: SweepSettings,
        clock: Clock = utc_now,
        random: Random = system_random,
        retry: RetryPolicy | None = None,
        run_id: Callable[[], str] = lambda: uuid.uuid4().hex,
        regions: RegionalSweep | None = None,
    ) -> None:
        self._run_id = run_id
        self._regions = regions
        self._engine = engine
        self._scan = scan
        self._cursors = cursors
        self._claimer = claimer
        self._indexer = indexer
        self._grace = grace
        self._settings = settings
        self._clock = clock
        self._random = random
        self._retry = retry or RetryPolicy()

    def run(self, deadline: Deadline, segment: int = 0) -> SweepReport:
        segments = self._settings.segments
        if not 0 <= segment < segments:
            raise ValueError(f"segment must be 0..{segments - 1}, got {segment}")
        now = self._clock()
        report = SweepReport(now)
        regions = self._regions
        report.region = region = regions.begin(now, deadline) if regions is not None else None
        cursor = self._cursors.load(segment, segments)
        census = Census(
            now=now,
            grace=self._grace,
            due_limit=self._settings.max_rows,
            resumed_after=RowKey.stored(cursor.position) if cursor.position is not None else None,
            owns=region.ownership.owns if region is not None else None,
        )
        progress = read_segment(
            census,
            self._scan,
            segment=segment,
            segments=segments,
            start=cursor.position,
            deadline=deadline,
            reserve_ms=SCAN_RESERVE_MS,
        )
        report.rows_read, report.pages, report.due = census.rows, progress.pages, len(census.due)
        for held in census.held:
            _held(held.aggregate_key, held.waiting_seq, held.failed_seq)
        lease = Lease(f"{SWEEPER}:{self._run_id()}", now + timedelta(milliseconds=deadline.remaining_ms()))
        if regions is not None and region is not None:
            regions.read_records(region, census.due, deadline)
        candidates = self._claim(census.due, lease, now, deadline, report)
        if regions is not None and region is not None and candidates:
            candidates, unrecorded = regions.record_claimed(region, candidates, now, deadline)
            for candidate in unrecorded:
                if candidate.key is not None:
                    self._release(candidate.key, lease)
        held_beyond = 0
        if candidates:
            report.publish = self._engine.publish(candidates, deadline)
            if regions is not None and region is not None:
                regions.record_published(region, report.publish.outcomes, now, deadline)
            held_beyond = self._settle(report, lease, deadline)
        report.indexed = self._index(census.unindexed, deadline)
        # What the run published is out: it counts no more (the oldest-pending alarm clears at once).
        out = {
            key
            for outcome in report.publish.outcomes
            if outcome.status is Status.PUBLISHED and (key := outcome.candidate.key) is not None
        }
        figures = census.figures(out)
        so_far = cursor.so_far.plus(figures._replace(held_aggregates=figures.held_aggregates + held_beyond))
        self._save(segment, cursor, progress.position, so_far, report=report, deadline=deadline)
        return report

    def _save(
        self,
        segment: int,
        cursor: Cursor,
        position: Mapping[str, Any] | None,
        so_far: Figures,
        *,
        report: SweepReport,
        deadline: Deadline,
    ) -> None:
        if position is None:
            report.figures, report.complete = so_far, True
            saved = Cursor(cursor.segments, None, Figures(), so_far)
        else:
            report.figures = so_far if cursor.last is None else so_far.at_least(cursor.last)
            report.complete = False
            saved = Cursor(cursor.segments, position, so_far, cursor.last)
        if deadline.remaining_ms() < UPDATE_CALL_MS:
            # No time for the call to end (the rows' own updates went first: a lost one costs a duplicate, a
            # lost position only a second read): the next run reads again from the last saved position.
            _log.warning("no time left to save the sweep's position")
            return
        try:
            self._cursors.save(segment, saved)
        except OutboxError as error:
            # The next run reads again from the last saved position: nothing is missed, some rows are read
            # twice.
            _log.warning("could not save the sweep's position", extra={"error": type(error).__name__})

    def _claim(
        self, due: list[DueRow], lease: Lease, now: datetime, deadline: Deadline, report: SweepReport
    ) -> list[Candidate]:
        """Claims the due rows in order; an aggregate stops at its first row that is not this sweep's to take.
        Each claimed row carries what is known of its predecessor: out (no read needed), or nothing (the
        engine's gate reads it, or finds it in the run)."""
        candidates: list[Candidate] = []
        aggregate: str | None = None
        known: PredecessorState | None = None
        stopped = False
        region = report.region
        for row in due:
            if row.key.aggregate_key != aggregate:
                aggregate, stopped = row.key.aggregate_key, False
                known = PredecessorState.OUT if row.predecessor_out else None
            if stopped:
                continue
            if report.claimed >= self._settings.max_rows or not self._retry.has_time_for(deadline):
                break
            try:
                claim = self._claim_one(row, lease, now, region)
            except OutboxError as error:
                # DynamoDB did not answer: publish what is claimed; the rest waits for the next run.
                _log.warning("could not claim a row; claiming stops here", extra={"error": str(error)})
                break
            if claim.claim is Claim.CLAIMED and claim.row is not None:
                report.claimed += 1
                candidate = Candidate.from_row(_ref(row.key), claim.row, source={"swept_by": lease.owner})
                if region is not None and (verdict := region.verdict(row, claim.row)) is not None:
                    late, out = self._taken_over(verdict, row, candidate.but(lease=lease), region, deadline)
                    candidates.extend(late)
                    known, stopped = (PredecessorState.OUT, False) if out else (known, True)
                    continue
                candidates.append(
                    candidate.but(
                        lease=lease, predecessor=known, last_chance=self._last_chance(claim.row, now)
                    )
                )
                known = None  # the next row's predecessor is in the run
            elif claim.claim is Claim.MISSING:
                known = PredecessorState.OUT  # settled (or skipped) since the scan saw it
            elif claim.claim is Claim.NOT_PENDING and _out(claim.row):
                known = PredecessorState.OUT
            else:
                stopped = True  # leased, backing off, or FAILED now: later events must not go before it
        return candidates

    def _claim_one(self, row: DueRow, lease: Lease, now: datetime, region: RegionRun | None) -> ClaimResult:
        if region is None:
            return self._claimer.claim(row.key, lease, now)
        if region.needs_record(row) and row.key.aggregate_key in region.unchecked:
            return ClaimResult(Claim.TAKEN)  # its takeover record could not be read: the aggregate waits
        return self._claimer.claim(row.key, lease, now, region.fence(row))

    def _taken_over(
        self, verdict: TakenVerdict, row: DueRow, candidate: Candidate, region: RegionRun, deadline: Deadline
    ) -> tuple[list[Candidate], bool]:
        """A claimed row a taker dealt with: the candidates it becomes (a late replica, marked FAILED at once:
        the events after it wait for an operator), and whether it is out now (a duplicate the taker published,
        settled without publishing)."""
        if verdict is TakenVerdict.LATE_REPLICA:
            assert candidate.row is not None  # noqa: S101 - claimed
            return [region.late_replica(row, candidate.row, candidate)], False
        assert candidate.key is not None  # noqa: S101 - claimed
        assert candidate.lease is not None  # noqa: S101 - claimed
        settle = Settle(candidate.key, candidate.event_id, candidate.generation)
        if candidate.key in self._engine.update_rows([settle], deadline).done:
            region.duplicates_avoided += 1
            return [], True
        self._release(candidate.key, candidate.lease)
        return [], False

    def _last_chance(self, row: Mapping[str, Any], now: datetime) -> bool:
        """This run may take the row to its attempt cutoff, or it is past its age cutoff (both counted from
        its redrive, if an operator redrove it)."""
        if stored_count(row, "attempts") + self._retry.max_attempts >= self._settings.max_attempts:
            return True
        try:
            since = parse_timestamp(str(row.get(REDRIVEN_AT, row["occurred_at"])["S"]))
        except (KeyError, TypeError, ValueError):
            return False  # unreadable: the engine poisons it anyway
        return now - since >= self._settings.fail_after

    def _settle(self, report: SweepReport, lease: Lease, deadline: Deadline) -> int:
        """Acts on the engine's outcomes; returns the aggregates it found held behind a FAILED row that the
        census could not see (its run began in the middle of them)."""
        held: set[str] = set()
        parks: list[Park] = []
        failed_at = self._clock()  # the backoff counts from the failure, not from the start of the run
        for outcome in report.publish.outcomes:
            key = outcome.candidate.key
            if outcome.status is Status.PUBLISHED:
                report.swept += 1
            elif outcome.status is Status.POISONED:
                report.poisoned += 1
                if outcome.poison_reason is PoisonReason.GAVE_UP:
                    report.gave_up += 1
            elif key is None:
                continue
            elif outcome.status is Status.UNDELIVERED and (outcome.tried or outcome.envelope_unavailable):
                # A stored envelope S3 would not give (throttled, denied, down) is not the event's fault: its
                # reason is recorded and the row waits, but the failure does not count towards giving up.
                if deadline.remaining_ms() >= UPDATE_CALL_MS:
                    self._back_off(key, outcome, failed_at, lease, counted=outcome.tried)
                    report.backed_off += 1
                # else: its lease expires with the invocation, and a later run tries it again
            elif outcome.status is Status.UNDELIVERED and (park := park_for(outcome)) is not None:
                # Not got to everywhere (no time left): nothing failed, so no backoff; the destinations that
                # took it are recorded, and the row is free for the next run at once.
                parks.append(park)
            else:
                if (
                    outcome.status is Status.HELD
                    and HoldReason(str(outcome.code)).needs_operator
                    and key.aggregate_key not in held
                ):
                    held.add(key.aggregate_key)
                    _held(key.aggregate_key, key.seq_text, str(key.seq - 1))
                # Held, or not got to (no time, no gate read): free for the next run at once, time permitting
                # (else its lease expires with the invocation).
                if deadline.remaining_ms() >= UPDATE_CALL_MS:
                    self._release(key, lease)
        report.parked = self._engine.update_rows(parks, deadline)
        return len(held)

    def _release(self, key: RowKey, lease: Lease) -> None:
        try:
            self._claimer.release(key, lease)
        except OutboxError as error:
            # The lease expires with this invocation anyway.
            _log.warning("could not release a lease", extra={"row": _ref(key), "error": str(error)})

    def _back_off(
        self, key: RowKey, outcome: EventOutcome, now: datetime, lease: Lease, *, counted: bool = True
    ) -> None:
        tried = max(1, outcome.attempts) if counted else 0
        code = outcome.code or "Failed"
        # An envelope S3 would not give waits longer each time too, on its own count (not towards giving up).
        failures = stored_count(outcome.candidate.row, SWEEP_FAILURES if counted else ENVELOPE_WAITS) + 1
        delay = backoff(failures, self._settings, self._random())
        try:
            self._claimer.back_off(
                key,
                lease,
                attempts=tried,
                next_attempt_at=now + delay,
                error=code,
                delivered_to=outcome.delivered_so_far,
                counted=counted,
            )
        except OutboxError as error:
            # The lease expires on its own; the row is tried again by a later sweep.
            _log.warning("could not record the backoff", extra={"row": _ref(key), "error": str(error)})

    def _index(self, keys: list[RowKey], deadline: Deadline) -> int:
        added = 0
        for key in keys:
            if not self._retry.has_time_for(deadline):
                break
            try:
                added += self._indexer.add(key, self._clock())
            except OutboxError as error:
                _log.warning("could not index a FAILED row", extra={"row": _ref(key), "error": str(error)})
                break
        return added


def _held(aggregate_key: str, waiting_seq: str, failed_seq: str) -> None:
    """One line per held aggregate and run: what the operator must redrive or skip (outbox_ops.release)."""
    _log.warning(
        "aggregate held: an operator must redrive or skip the FAILED event it waits behind",
        extra={"aggregate_key": aggregate_key, "waiting_seq": waiting_seq, "failed_seq": failed_seq},
    )


def _out(row: Mapping[str, Any] | None) -> bool:
    """A row that is no longer PENDING but lets its successors go: PUBLISHED (an earlier release), or a
    FAILED one whose route continues past it."""
    if row is None:
        return True
    return string_attribute(row, "status") == OutboxStatus.PUBLISHED or RELEASED_AT in row


def _ref(key: RowKey) -> str:
    return f"{key.aggregate_key}/{key.seq_text}"
