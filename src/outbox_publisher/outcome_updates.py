"""What a run's outcomes mean for their rows (outbox_publisher.row_updates), written after publishing.

A published event's row is settled (deleted); a poisoned one is marked FAILED, under the caller's lease when
it claimed the row, and released at once when the event's route continues past poison. An undelivered one is
left to the caller (the stream publisher parks it, the sweeper backs it off). Updating never fails an event:
the event is out (or parked on the poison queue); a row DynamoDB did not update stays PENDING and the sweeper
reconciles it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime

from outbox.model import RowKey
from outbox_publisher.candidates import Candidate
from outbox_publisher.deadline import Deadline
from outbox_publisher.report import EventOutcome, Status
from outbox_publisher.routing import PoisonPolicy, Router
from outbox_publisher.row_updates import MarkFailed, Park, RowUpdate, RowUpdater, RowUpdatesReport, Settle

# A FAILED mark's release reason when the event's route lets later events go on past it.
CONTINUES_PAST_POISON = "its route continues past poison"

_log = logging.getLogger(__name__)


def continues_past_poison(candidate: Candidate, router: Router) -> bool:
    event = candidate.event
    if event is None:
        return False  # unreadable: no route to ask
    return router.poison_policy_for(event.aggregate_type, event.event_type) is PoisonPolicy.CONTINUE


def updates_for(outcomes: Sequence[EventOutcome], router: Router, now: datetime) -> list[RowUpdate]:
    """The updates a run's outcomes call for."""
    updates: list[RowUpdate] = []
    unmarkable = 0
    for outcome in outcomes:
        candidate = outcome.candidate
        if outcome.status is Status.PUBLISHED and candidate.key is not None:
            updates.append(Settle(candidate.key, candidate.event_id, candidate.generation))
        elif outcome.status is Status.POISONED and (
            mark := failed_mark(
                candidate,
                outcome.detail or str(outcome.code),
                outcome.attempts,
                now,
                router,
                delivered_to=outcome.delivered_so_far,
            )
        ):
            updates.append(mark)
        elif outcome.status in (Status.PUBLISHED, Status.POISONED):
            unmarkable += 1
    if unmarkable:
        _log.warning("rows without a usable key cannot be updated", extra={"rows": unmarkable})
    return updates


def failed_mark(
    candidate: Candidate,
    error: str,
    attempts: int,
    now: datetime,
    router: Router,
    *,
    delivered_to: frozenset[str] = frozenset(),
) -> MarkFailed | None:
    """The FAILED mark of a poisoned candidate; None when its row has no usable key."""
    # A row whose key the order gate cannot read (a seq of "1.5") is still marked FAILED, by its key as
    # stored: else it would stay PENDING, poisoned again at every sweep.
    key = candidate.key or RowKey.stored(candidate.row)
    if key is None:
        return None
    return MarkFailed(
        key,
        error,
        attempts,
        now,
        lease_owner=candidate.lease.owner if candidate.lease is not None else None,
        release_reason=CONTINUES_PAST_POISON if continues_past_poison(candidate, router) else None,
        generation=candidate.generation,
        event_id=candidate.event_id,
        delivered_to=delivered_to,
    )


def park_for(outcome: EventOutcome) -> Park | None:
    """The park of an undelivered event that destinations took in this run: it records them all (and drops
    the run's lease); None when this run got it to none."""
    candidate = outcome.candidate
    if not outcome.delivered_to or candidate.key is None:
        return None
    return Park(
        candidate.key,
        candidate.event_id,
        candidate.generation,
        outcome.delivered_so_far,
        str(outcome.code),
        lease_owner=candidate.lease.owner if candidate.lease is not None else None,
    )


def update_rows(updater: RowUpdater, updates: Sequence[RowUpdate], deadline: Deadline) -> RowUpdatesReport:
    if not updates:
        return RowUpdatesReport()
    try:
        report = updater.apply(updates, deadline)
    except Exception as error:
        # The events are out: failing now would hand them back and publish them again. The rows stay
        # PENDING and the sweeper reconciles them.
        _log.exception("updating rows failed", extra={"rows": len(updates)})
        report = RowUpdatesReport()
        report.failed.update((update.key, type(error).__name__) for update in updates)
        return report
    if report.failed:
        _log.warning(
            "rows left PENDING after publishing; the sweeper will reconcile them",
            extra={
                "rows": [f"{key.aggregate_key}/{key.seq_text}" for key in report.failed],
                "errors": sorted(set(report.failed.values())),
            },
        )
    return report
