"""The sweeper's part on an outbox across regions (outbox_publisher.regions, docs/multi-region.md).

Each run first reads every region's heartbeat and writes its own (`begin`): its state, the origins it holds
for lost regions, the ones it hands back. The run then publishes only the rows it owns (the census leaves the
others, and they hold the rows after them back), claims a taken-over row with `taken_by` stamped, and refuses
a row another region took and still holds (outbox_publisher.leases.Fence).

Late replicas: a row a taker never saw (it replicated late) may sit below a seq the taker published. Before a
taker publishes rows of a taken origin it adds their seqs to the aggregate's `#taken#` record (`claimed`), and
after, the ones it published (`published`). Every run checks the rows it claims that a taker may have dealt
with (a taken origin's, or its own origin's saved before its last resume) against that record
(`TakenRecord.verdict`): a row the taker published is settled without publishing; one it never claimed, below
one it claimed or published, is marked FAILED (`LateReplica`), and its aggregate holds for an operator.
Its own origin's records are read in each taker's own replica (`RegionRun.record_sources`: its replica may
not have them yet, replication having no order across items); a replica that cannot be read leaves the rows
that need it PENDING (`unchecked`), never published on a guess.

If the heartbeats cannot be read or written, the run owns nothing: it publishes no row and takes nothing over,
and its figures are still reported.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

from outbox.errors import OutboxError
from outbox.model import REDRIVEN_AT
from outbox_publisher.candidates import Candidate
from outbox_publisher.deadline import Deadline
from outbox_publisher.leases import Fence
from outbox_publisher.poison import LATE_REPLICA_CODE, PoisonReason, Rejection
from outbox_publisher.region_store import RegionStore, read_view, taken_expiry
from outbox_publisher.regions import (
    Heartbeat,
    Ownership,
    RegionSettings,
    RegionState,
    RegionView,
    TakenRecord,
    TakenVerdict,
    next_heartbeat,
    ownership,
)
from outbox_publisher.report import EventOutcome, Status
from outbox_sweeper.census import DueRow

_log = logging.getLogger(__name__)


class RegionRun:
    """One sweep's view, heartbeat and ownership, and what it did of late replicas."""

    def __init__(
        self,
        settings: RegionSettings,
        view: RegionView | None,
        heartbeat: Heartbeat | None,
    ) -> None:
        self.settings = settings
        self.view = view
        self.heartbeat = heartbeat
        """The heartbeat this run wrote; None when it could not read or write one (it owns nothing)."""
        self.ownership: Ownership = (
            ownership(view, heartbeat) if view is not None else Ownership(settings, None)
        )
        self.records: dict[str, TakenRecord] = {}
        self.unchecked: set[str] = set()
        """Aggregates whose `#taken#` record could not be read: their rows that need it are not claimed."""
        self.late_replicas = 0
        self.duplicates_avoided = 0

    @property
    def region(self) -> str:
        return self.settings.region

    @property
    def state(self) -> RegionState | None:
        return self.heartbeat.state if self.heartbeat else None

    @property
    def taking(self) -> tuple[str, ...]:
        return tuple(sorted(self.heartbeat.taking)) if self.heartbeat else ()

    @property
    def oldest_peer_age_s(self) -> float:
        """The oldest peer heartbeat's age in this run's view (the takeover time when no view, or none)."""
        age = self.view.oldest_peer_age_ms() if self.view is not None else None
        return self.settings.takeover_after.total_seconds() if age is None else age / 1000

    def row(self, due: DueRow) -> dict[str, Any]:
        """What the ownership decisions read of a due row."""
        return {} if due.origin is None else {"origin": {"S": due.origin}}

    def fence(self, due: DueRow) -> Fence:
        row = self.row(due)
        origin = self.ownership.origin_of(row)
        stamp = self.region if self.ownership.taken(row) else None
        return Fence(self.ownership.accepts(origin), stamp)

    def needs_record(self, due: DueRow) -> bool:
        row = self.row(due)
        return self.ownership.taken(row) or self.ownership.from_before_resume(row, due.occurred_at)

    def record_sources(self, due: DueRow) -> tuple[str, ...]:
        """The regions whose replica holds the `#taken#` records a due row needing one is checked against.

        A taken origin's row: this region's own replica (it is the taker: its writes are all there). A row of
        its own origin saved before its last resume: the replica of every peer whose heartbeat names this
        region in `taking` or `released` (each taker writes its records in its own replica first: read
        there, strongly consistent, they hold all it claimed and published, where this replica may not have
        them yet), and this region's own replica (a takeover whose release has aged out of the heartbeats).
        """
        if self.ownership.taken(self.row(due)) or self.view is None:
            return (self.region,)
        return (self.region, *self.view.takers_of(self.region))

    def verdict(self, due: DueRow, claimed_row: Mapping[str, Any]) -> TakenVerdict | None:
        """What a taker's record says of a due row that needs one (None: publish it as usual). A row an
        operator redrove is published as they decided (a late replica redriven goes out after its
        successors: their choice, `outbox redrive`)."""
        if not self.needs_record(due) or REDRIVEN_AT in claimed_row:
            return None
        record = self.records.get(due.key.aggregate_key)
        return record.verdict(due.key.seq) if record is not None else None

    def late_replica(self, due: DueRow, claimed_row: Mapping[str, Any], candidate: Candidate) -> Candidate:
        """The claimed row, rejected as a late replica (marked FAILED at once, never released)."""
        record = self.records[due.key.aggregate_key]
        detail = (
            f"seq {due.key.seq_text} replicated after region {record.by} took origin {record.origin} over "
            "and "
            f"published up to seq {record.highest()} of its aggregate: redrive or skip it"
        )
        rejection = Rejection(PoisonReason.LATE_REPLICA, LATE_REPLICA_CODE, detail)
        self.late_replicas += 1
        return Candidate.rejected(
            candidate.ref, claimed_row, rejection, keys=due.key.item(), source=candidate.source
        ).but(lease=candidate.lease)


class RegionalSweep:
    """The regions' side of every sweep: heartbeat first, `#taken#` records around the publish."""

    def __init__(
        self,
        store: RegionStore,
        settings: RegionSettings,
        stores: Callable[[str], RegionStore] | None = None,
    ) -> None:
        """`store`: this region's replica. `stores`: a region's replica of the same table (a client for
        that region), where the `#taken#` records its sweeper wrote are read; None: `store` for every
        region (one replica: tests)."""
        self._store = store
        self._settings = settings
        self._stores = stores or (lambda _region: store)
        self._peer_stores: dict[str, RegionStore] = {}

    @property
    def settings(self) -> RegionSettings:
        return self._settings

    def begin(self, now: datetime, deadline: Deadline) -> RegionRun:
        """Reads the view, decides and writes this region's heartbeat."""
        try:
            view = read_view(self._store, self._settings, now, deadline)
        except OutboxError as error:
            _log.warning("could not read the regions' heartbeats: publishing nothing", extra=_err(error))
            return RegionRun(self._settings, None, None)
        heartbeat = next_heartbeat(view)
        try:
            self._store.write_heartbeat(heartbeat, deadline)
        except OutboxError as error:
            # Unwritten, its decisions are no one's to see: act on none of them.
            _log.warning("could not write this region's heartbeat: publishing nothing", extra=_err(error))
            return RegionRun(self._settings, view, None)
        if view.own is None or view.own.state is not heartbeat.state or view.own.taking != heartbeat.taking:
            _log.warning(
                "region state",
                extra={
                    "region": heartbeat.region,
                    "state": heartbeat.state.value,
                    "taking": sorted(heartbeat.taking),
                    "released": sorted(heartbeat.released),
                },
            )
        return RegionRun(self._settings, view, heartbeat)

    def read_records(self, run: RegionRun, due: Iterable[DueRow], deadline: Deadline) -> None:
        """Reads the `#taken#` records of the aggregates whose due rows need one, from every replica that
        may hold them (`RegionRun.record_sources`), and merges them. An aggregate whose record could not be
        read from one of them is `unchecked`: its rows that need the record wait (PENDING) for a later run."""
        wanted: dict[str, set[str]] = {}
        for row in due:
            if run.needs_record(row):
                for source in run.record_sources(row):
                    wanted.setdefault(source, set()).add(row.key.aggregate_key)
        records: dict[str, TakenRecord] = {}
        unchecked: set[str] = set()
        for source, aggregates in sorted(wanted.items()):
            try:
                found = self._store_of(source).read_taken(aggregates, deadline)
            except OutboxError as error:
                _log.warning(
                    "could not read the takeover records of a replica: their rows wait",
                    extra={**_err(error), "replica": source, "aggregates": len(aggregates)},
                )
                unchecked |= aggregates
                continue
            for key, record in found.items():
                records[key] = record.merged(records[key]) if key in records else record
        run.records = records
        run.unchecked = unchecked

    def _store_of(self, region: str) -> RegionStore:
        if region == self._settings.region:
            return self._store
        if region not in self._peer_stores:
            self._peer_stores[region] = self._stores(region)
        return self._peer_stores[region]

    def record_claimed(
        self, run: RegionRun, candidates: list[Candidate], now: datetime, deadline: Deadline
    ) -> tuple[list[Candidate], list[Candidate]]:
        """Adds the seqs of the taken rows about to be published to their records; returns the candidates to
        publish and those to release (their record could not be written: they are not published)."""
        failed = self._record(run, candidates, now, deadline, published=False)
        keep: list[Candidate] = []
        dropped: list[Candidate] = []
        for candidate in candidates:
            key = candidate.key
            (dropped if key is not None and key.aggregate_key in failed else keep).append(candidate)
        return keep, dropped

    def record_published(
        self, run: RegionRun, outcomes: Iterable[EventOutcome], now: datetime, deadline: Deadline
    ) -> None:
        """Adds the seqs of the taken rows published to their records (best effort: a row whose seq stays in
        `claimed` only is published again if found pending, never counted a late replica)."""
        published = [outcome.candidate for outcome in outcomes if outcome.status is Status.PUBLISHED]
        self._record(run, published, now, deadline, published=True)

    def _record(
        self,
        run: RegionRun,
        candidates: Iterable[Candidate],
        now: datetime,
        deadline: Deadline,
        *,
        published: bool,
    ) -> set[str]:
        """Adds the seqs of the taken rows among `candidates` to their records (`claimed`, or `published`);
        returns the aggregates whose record could not be written."""
        failed: set[str] = set()
        for aggregate, origin, seqs in _taken_groups(run, candidates):
            try:
                self._store.record_taken(
                    aggregate,
                    origin=origin,
                    by=run.region,
                    seqs=seqs,
                    published=published,
                    expires_at=taken_expiry(self._settings, now),
                    deadline=deadline,
                )
            except OutboxError as error:
                what = "published taken rows" if published else "taken rows: not publishing them"
                _log.warning(f"could not record {what}", extra=_err(error))
                failed.add(aggregate)
        return failed


def _taken_groups(run: RegionRun, candidates: Iterable[Candidate]) -> list[tuple[str, str, list[int]]]:
    """(aggregate, origin, seqs) of the candidates of origins this run holds."""
    groups: dict[str, tuple[str, list[int]]] = {}
    for candidate in candidates:
        key = candidate.key
        if key is None or candidate.rejection is not None or not run.ownership.taken(candidate.row):
            continue
        origin = run.ownership.origin_of(candidate.row)
        groups.setdefault(key.aggregate_key, (origin, []))[1].append(key.seq)
    return [(aggregate, origin, seqs) for aggregate, (origin, seqs) in groups.items()]


def _err(error: Exception) -> dict[str, str]:
    return {"error": type(error).__name__, "detail": str(error)}
