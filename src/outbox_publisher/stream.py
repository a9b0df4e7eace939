"""The DynamoDB-stream layer: Lambda's stream records in, the engine in the middle, batchItemFailures out
(docs/publisher.md, "How publishing works").

Only INSERTs of PENDING outbox rows are publishable; other records are skipped and counted, except a MODIFY
that replaced a slot's event (poison: outbox_publisher.writer_contract). A record that shows the publisher is
wired wrong (another table's stream, no new image) fails the whole invocation: neither skipped nor poison, so
the mapping retries and the alarms fire until the configuration is fixed.

A late row (at least `SWEEP_GRACE_SECONDS - PUBLISH_HORIZON - CLOCK_SKEW` old) may be in the sweeper's hands,
so it is claimed first (`leases`), which also reads its current state. A fresh row is published without
a claim, and no publish call may end later than `PUBLISH_HORIZON` after the run started: by then the row is
still younger than the grace, so no sweep has taken it. An event a destination did not take is left PENDING
for the sweeper. Only what the run could not attempt is handed back: the first such record and EVERY later
one, since Lambda re-sends from the LOWEST reported sequence number. The batch is one ordered unit, so
Powertools' BatchProcessor (record by record, carrying on past failures) is not used.

On an outbox across regions (outbox_publisher.regions), a record is published only when its row is this
region's to stream (`Ownership.may_stream`: its own origin, its heartbeat `own` and fresh, saved after the
last resume); any other is skipped as `not_owner`, left to the sweepers, never handed back, except a slot
of its own origin rewritten by another writer, which is marked FAILED whatever its state (only this record
shows the event it replaced). When the heartbeat cannot be read, the batch is handed back from its first
candidate: no guess either way.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from outbox.clock import Clock, parse_timestamp, utc_now
from outbox.errors import OutboxError
from outbox.model import DELIVERED_TO, ORIGIN, OutboxStatus, is_own_item
from outbox.region_settings import RegionSettings
from outbox.stream_mapping import INSERT_EVENT_NAME, MODIFY_EVENT_NAME
from outbox_publisher import writer_contract
from outbox_publisher.candidates import Candidate
from outbox_publisher.deadline import Deadline
from outbox_publisher.engine import PublishingEngine
from outbox_publisher.errors import InvalidStreamEventError, StreamConfigurationError
from outbox_publisher.gate import HoldReason
from outbox_publisher.leases import STREAM_PUBLISHER, Claim, ClaimResult, Fence, Lease, RowClaimer
from outbox_publisher.memory import RowMemory
from outbox_publisher.outcome_updates import park_for
from outbox_publisher.region_store import CachedOwnership
from outbox_publisher.report import PublishReport, Status
from outbox_publisher.retry import RetryPolicy
from outbox_publisher.row_updates import Park, RowUpdatesReport

INSERT = INSERT_EVENT_NAME
PUBLISH_HORIZON = timedelta(seconds=20)
"""The longest a run publishes rows it did not claim, from its start."""
CLOCK_SKEW = timedelta(seconds=2)
"""Allowed disagreement between the clocks of the publisher and the sweeper (both Lambda, NTP-synced)."""

_log = logging.getLogger(__name__)


class Skipped(NamedTuple):
    """Why a record is not published."""

    reason: str


class StreamBatchResult:
    """What publishing one batch did."""

    __slots__ = ("claims", "first_failure", "held", "parks", "records", "report", "skipped")

    def __init__(
        self,
        report: PublishReport,
        skipped: dict[str, int],
        first_failure: int | None,
        records: int = 0,
        *,
        held: dict[str, int] | None = None,
        claims: int = 0,
    ) -> None:
        self.report = report
        self.skipped = skipped
        """Skipped records by reason: `modify`, `remove`, `not_pending`, `already_moved`..."""
        self.first_failure = first_failure
        """Index, in the Lambda batch, of the first record handed back; every later one is handed back too."""
        self.records = records
        self.held: dict[str, int] = {} if held is None else held
        """Events held, by reason (the engine's order gate, and late rows another path holds)."""
        self.claims = claims
        self.parks = RowUpdatesReport()
        """The rows of undelivered events that recorded which destinations took them."""

    @property
    def contract_breaks(self) -> int:
        """Another writer's row contract breaks in this batch (outbox_publisher.writer_contract)."""
        return self.report.contract_breaks


def classify(raw: Mapping[str, Any], table_name: str) -> Candidate | Skipped:
    """A publishable candidate, or why the record is skipped. Raises StreamConfigurationError."""
    source_arn = raw.get("eventSourceARN")
    if isinstance(source_arn, str) and f":table/{table_name}/stream/" not in source_arn:
        raise StreamConfigurationError(
            f"a record comes from {source_arn}, not from table {table_name}'s stream: the mapping and "
            "OUTBOX_TABLE_NAME disagree"
        )
    event_name = raw.get("eventName")
    stream = raw.get("dynamodb") or {}
    if event_name not in (INSERT, MODIFY_EVENT_NAME):
        return Skipped(str(event_name).lower() if event_name else "unknown")
    sequence_number = sequence_number_of(raw)
    source = {
        "event_source_arn": str(source_arn or ""),
        "sequence_number": sequence_number,
        "event_name": str(event_name),
    }
    image = stream.get("NewImage")
    if not isinstance(image, dict):
        view = stream.get("StreamViewType", "unknown")
        raise StreamConfigurationError(
            f"a record carries no new image (stream view type {view}): the publisher needs a NEW_IMAGE or "
            "NEW_AND_OLD_IMAGES stream"
        )
    if is_own_item(image):
        return Skipped("not_an_event")  # an audit record, the sweeper's cursor
    if event_name == MODIFY_EVENT_NAME:
        return _modified(sequence_number, stream, image, source)
    status = image.get("status", {}).get("S") if isinstance(image.get("status"), dict) else None
    if status is not None and status != OutboxStatus.PENDING:
        return Skipped("not_pending")
    return Candidate.from_row(sequence_number, image, keys=stream.get("Keys"), source=source)


def _modified(
    sequence_number: str, stream: dict[str, Any], image: dict[str, Any], source: dict[str, str]
) -> Candidate | Skipped:
    """A MODIFY is skipped, unless another writer replaced the slot's event: then the row is poison."""
    old_image = stream.get("OldImage")
    changed = writer_contract.rewritten_fields(old_image, image)
    if not changed:
        return Skipped("modify")
    keys = stream.get("Keys") or image
    writer_contract.report_rewritten(keys, old_image or {}, changed)
    rejected = Candidate.rejected(
        sequence_number, image, writer_contract.slot_rewritten(changed), keys=keys, source=source
    )
    return rejected.but(replaced=old_image)


def _rewritten_here(candidate: Candidate, settings: RegionSettings) -> bool:
    """A slot of this region's origin rewritten by another writer: marked FAILED whatever the region's state
    (the mapping passes only its own origin's MODIFYs). Only this record shows the event it replaced; left to
    a sweeper, the new event would be published as the slot's."""
    if candidate.replaced is None:
        return False
    origin = candidate.row.get(ORIGIN)
    named = origin.get("S") if isinstance(origin, Mapping) else None
    return settings.origin_region(named if isinstance(named, str) else None) == settings.region


def sequence_number_of(raw: Mapping[str, Any]) -> str:
    sequence_number = (raw.get("dynamodb") or {}).get("SequenceNumber")
    if not isinstance(sequence_number, str) or not sequence_number:
        # An empty or null itemIdentifier would fail the whole batch anyway; say why instead.
        raise InvalidStreamEventError("a stream record has no SequenceNumber")
    return sequence_number


class StreamPublisher:
    """Publishes one Lambda batch of one shard with the engine, and says where to resume."""

    def __init__(
        self,
        engine: PublishingEngine,
        table_name: str,
        claimer: RowClaimer,
        *,
        sweep_grace: timedelta,
        clock: Clock = utc_now,
        retry: RetryPolicy | None = None,
        regions: CachedOwnership | None = None,
    ) -> None:
        self._regions = regions
        self._engine = engine
        self._table_name = table_name
        self._claimer = claimer
        self._claim_from_age = sweep_grace - PUBLISH_HORIZON - CLOCK_SKEW
        self._clock = clock
        self._retry = retry or RetryPolicy()

    @property
    def engine(self) -> PublishingEngine:
        """The engine it publishes with (and its memory of rows, outbox_publisher.memory)."""
        return self._engine

    def publish(self, records: Sequence[Mapping[str, Any]], deadline: Deadline) -> StreamBatchResult:
        """Publishes Lambda's records (the event's `Records`, as Lambda sends them)."""
        for record in records:
            sequence_number_of(record)  # before anything is published, not halfway
        verdicts = [classify(record, self._table_name) for record in records]  # raises before publishing
        started = self._clock()
        lease = Lease(STREAM_PUBLISHER, started + timedelta(milliseconds=deadline.remaining_ms()))
        result = StreamBatchResult(PublishReport([], None, RowUpdatesReport()), {}, None, len(records))
        candidates: list[Candidate] = []
        positions: list[int] = []
        stop: int | None = None
        ownership = None
        for position, verdict in enumerate(verdicts):
            if isinstance(verdict, Skipped):
                _count(result.skipped, verdict.reason)
                continue
            if self._regions is not None and not _rewritten_here(verdict, self._regions.settings):
                try:
                    ownership = ownership or self._regions.current(deadline)
                except OutboxError:
                    stop = position  # who owns it is unknown: resume from this record
                    break
                event = verdict.event
                occurred_at = parse_timestamp(event.occurred_at) if event is not None else None
                if not ownership.may_stream(verdict.row, occurred_at, started):
                    _count(result.skipped, "not_owner")  # the sweepers' (its owner's, or after a resume)
                    continue
            candidate: Candidate | None = verdict
            if self._late(verdict, started):
                if not self._retry.has_time_for(deadline):
                    stop = position
                    break
                try:
                    candidate = self._claim(verdict, lease, started, result, deadline)
                except OutboxError:
                    stop = position  # a claim DynamoDB did not answer: resume from this record
                    break
            elif verdict.key is not None and self._engine.memory.settled(verdict.key, verdict.event_id):
                _count(result.skipped, "already_settled")  # sent again after this process settled it
                continue
            else:
                candidate = _with_parked_deliveries(verdict, self._engine.memory)
            if candidate is not None:
                candidates.append(candidate)
                positions.append(position)
        unclaimed = any(candidate.lease is None for candidate in candidates)
        result.report = self._engine.publish(
            candidates, deadline, publish_until=started + PUBLISH_HORIZON if unclaimed else None
        )
        self._leave_pending(result, deadline)
        not_done = [
            positions[index] for index, outcome in enumerate(result.report.outcomes) if not outcome.done
        ]
        resume = [*not_done, *([stop] if stop is not None else [])]
        result.first_failure = min(resume) if resume else None
        return result

    def _leave_pending(self, result: StreamBatchResult, deadline: Deadline) -> None:
        """What the run leaves PENDING for later: an undelivered event's row records the destinations that
        took it (a park); a claimed row is released."""
        parks: list[Park] = []
        for outcome in result.report.outcomes:
            if outcome.status is Status.HELD:
                _count(result.held, str(outcome.code))
                self._release(outcome.candidate, deadline)
            elif outcome.status is Status.UNDELIVERED:
                park = park_for(outcome)
                if park is not None:
                    parks.append(park)
                else:
                    self._release(outcome.candidate, deadline)
        result.parks = self._engine.update_rows(parks, deadline)

    def _release(self, candidate: Candidate, deadline: Deadline) -> None:
        """A claimed row this run leaves PENDING is not this run's to publish: drop its lease now, so the
        sweeper may take it at once, not only once this invocation's deadline has passed."""
        if candidate.lease is None or candidate.key is None or not self._retry.has_time_for(deadline):
            return
        try:
            self._claimer.release(candidate.key, candidate.lease)
        except OutboxError as error:
            _log.info(
                "could not release a held row's lease; it expires with the invocation",
                extra={"error": type(error).__name__},
            )

    def _claim_row(self, candidate: Candidate, lease: Lease, now: datetime) -> ClaimResult:
        assert candidate.key is not None  # noqa: S101 - _late checked it
        if self._regions is None:
            return self._claimer.claim(candidate.key, lease, now)
        ownership = self._regions.current()
        fence = Fence(ownership.accepts(ownership.origin_of(candidate.row)))
        return self._claimer.claim(candidate.key, lease, now, fence)

    def _late(self, candidate: Candidate, now: datetime) -> bool:
        event = candidate.event
        if event is None or candidate.key is None:
            return False  # an unreadable row is only ever poisoned: no one else publishes it
        return now - parse_timestamp(event.occurred_at) >= self._claim_from_age

    def _claim(
        self,
        candidate: Candidate,
        lease: Lease,
        now: datetime,
        result: StreamBatchResult,
        deadline: Deadline,
    ) -> Candidate | None:
        """The candidate as claimed (its row as stored now), or None when it is not this path's to publish."""
        assert candidate.key is not None  # noqa: S101 - _late checked it
        result.claims += 1
        claim = self._claim_row(candidate, lease, now)
        if claim.claim is Claim.CLAIMED and claim.row is not None:
            if writer_contract.changed_fields(candidate.row, claim.row):
                # Another writer rewrote the slot since this INSERT: its MODIFY record, later in the shard,
                # makes the row poison (outbox_publisher.writer_contract); this record is not the row's now.
                self._release(candidate.but(lease=lease), deadline)
                _count(result.skipped, "rewritten")
                return None
            return Candidate.from_row(candidate.ref, claim.row, source=candidate.source).but(lease=lease)
        if claim.claim is Claim.LEASED:
            _count(result.held, HoldReason.LEASED.value)
        elif claim.claim is Claim.BACKING_OFF:
            _count(result.held, HoldReason.BACKING_OFF.value)
        elif claim.claim is Claim.TAKEN:
            _count(result.skipped, "not_owner")  # another region took it over and holds it
        else:
            _count(result.skipped, "already_moved")  # settled or failed meanwhile
        return None


def _with_parked_deliveries(candidate: Candidate, memory: RowMemory) -> Candidate:
    """The candidate, its row saying which destinations took its event when this process parked it (a record
    sent again after a hand-back carries the INSERT's image, which does not)."""
    if candidate.key is None:
        return candidate
    parked = memory.delivered_to(candidate.key, candidate.event_id)
    if not parked or parked <= candidate.delivered_to:
        return candidate
    delivered = {DELIVERED_TO: {"SS": sorted(parked | candidate.delivered_to)}}
    return candidate.but(row={**candidate.row, **delivered})


def _count(counts: dict[str, int], key: str) -> None:
    counts[key] = counts.get(key, 0) + 1


def batch_item_failures(records: Sequence[Mapping[str, Any]], first_failure: int | None) -> dict[str, Any]:
    """Lambda's partial-batch response (ReportBatchItemFailures): the record the run stopped at and every
    later one, by SequenceNumber. When that is the first record, every record is reported rather than the
    invocation failed, so Lambda retries the batch without bisecting it."""
    failed = records[first_failure:] if first_failure is not None else ()
    return {"batchItemFailures": [{"itemIdentifier": sequence_number_of(record)} for record in failed]}
