"""What a run's outcomes mean for their rows: PUBLISHED or FAILED marks, made after publishing.

Marks carry the caller's lease owner when the caller claimed the row, and a FAILED mark is released at
once when the event's route continues past poison. Marking never fails an event: the event is out (or
parked on the poison queue); a row left PENDING is reconciled by the sweeper.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime

from outbox.deadline import Deadline
from outbox.model import FIRST_RELEASED_AT, RowKey, generation_of, string_attribute
from outbox.row_marks import FailedMark, Mark, MarkingReport, PublishedMark, RowMarker
from outbox_publisher.candidates import Candidate
from outbox_publisher.poison import PoisonReason
from outbox_publisher.report import EventOutcome, Status
from outbox_publisher.routing import PoisonPolicy, Router

# A FailedMark's release reason when the event's route lets later events go on past it.
CONTINUES_PAST_POISON = "its route continues past poison"

_log = logging.getLogger(__name__)


def continues_past_poison(candidate: Candidate, router: Router) -> bool:
    event = candidate.event
    if event is None:
        return False  # unreadable: no route to ask
    return router.poison_policy_for(event.aggregate_type, event.event_type) is PoisonPolicy.CONTINUE


def marks_for(outcomes: Sequence[EventOutcome], router: Router, now: datetime) -> list[Mark]:
    """The marks a run's outcomes call for, made after publishing. A writer-contract break is left out: it
    was marked as it was poisoned (`failed_mark`, engine)."""
    marks: list[Mark] = []
    unmarkable = 0
    for outcome in outcomes:
        candidate = outcome.candidate
        key = candidate.key
        if outcome.status is Status.PUBLISHED and outcome.published_at is not None and key is not None:
            marks.append(
                PublishedMark(
                    key,
                    outcome.published_at,
                    outcome.attempts,
                    lease_owner=_owner(candidate),
                    generation=generation_of(candidate.row),
                    event_id=_event_id(candidate),
                    attempts_stored="attempts" in candidate.row,
                )
            )
        elif outcome.status is Status.POISONED and outcome.poison_reason is PoisonReason.WRITER_CONTRACT:
            continue
        elif outcome.status is Status.POISONED and (
            mark := failed_mark(candidate, outcome.detail or str(outcome.code), outcome.attempts, now, router)
        ):
            marks.append(mark)
        elif outcome.status in (Status.PUBLISHED, Status.POISONED):
            unmarkable += 1
    if unmarkable:
        _log.warning("rows without a usable key cannot be marked", extra={"rows": unmarkable})
    return marks


def failed_mark(
    candidate: Candidate, error: str, attempts: int, now: datetime, router: Router
) -> FailedMark | None:
    """The FAILED mark of a poisoned candidate; None when its row has no usable key."""
    # A row whose key the order gate cannot read (a seq of "1.5") is still marked FAILED, by its key as
    # stored: else it would stay PENDING, poisoned again at every sweep.
    key = candidate.key or RowKey.stored(candidate.row)
    if key is None:
        return None
    return FailedMark(
        key,
        error,
        attempts,
        now,
        lease_owner=_owner(candidate),
        release_reason=CONTINUES_PAST_POISON if continues_past_poison(candidate, router) else None,
        generation=generation_of(candidate.row),
        event_id=_event_id(candidate),
        attempts_stored="attempts" in candidate.row,
        first_released_stored=FIRST_RELEASED_AT in candidate.row,
    )


def _owner(candidate: Candidate) -> str | None:
    return candidate.lease.owner if candidate.lease is not None else None


def _event_id(candidate: Candidate) -> str | None:
    event = candidate.event
    return event.event_id if event is not None else string_attribute(candidate.row, "event_id")


def mark_rows(marker: RowMarker, marks: Sequence[Mark], deadline: Deadline) -> MarkingReport:
    if not marks:
        return MarkingReport()
    try:
        report = marker.mark(marks, deadline)
    except Exception as error:
        # The events are out: failing now would hand them back and publish them again. The rows stay
        # PENDING and the sweeper reconciles them.
        _log.exception("marking rows failed", extra={"rows": len(marks)})
        return MarkingReport(failed={mark.key: type(error).__name__ for mark in marks})
    if report.failed:
        _log.warning(
            "rows left PENDING after publishing; the sweeper will reconcile them",
            extra={
                "rows": [f"{key.aggregate_key}/{key.seq}" for key in report.failed],
                "errors": sorted(set(report.failed.values())),
            },
        )
    return report
