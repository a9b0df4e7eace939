"""Poisoning an event during a run (outbox_publisher.engine): the poison queue receives the whole row and why
it can never be published; a writer-contract break is marked FAILED first.

If the poison queue does not take the message, the event is not poisoned: it stays PENDING (UNDELIVERED) and
is tried again later, never dropped.
"""

from __future__ import annotations

import logging
from datetime import datetime

from outbox_publisher.candidates import Candidate
from outbox_publisher.errors import PoisonQueueUnavailableError
from outbox_publisher.outcome_updates import failed_mark
from outbox_publisher.poison import PoisonMessage, Rejection
from outbox_publisher.ports import PoisonQueue
from outbox_publisher.report import EventOutcome, Status
from outbox_publisher.routing import Destination, Router
from outbox_publisher.row_updates import MarkFailed

_log = logging.getLogger(__name__)


def send_to_poison_queue(
    queue: PoisonQueue,
    candidate: Candidate,
    rejection: Rejection,
    *,
    attempts: int,
    delivered_to: tuple[Destination, ...],
    now: datetime,
) -> str | None:
    """Sends the event's poison message; None once the queue took it, else the queue's error code."""
    message = PoisonMessage.of(
        candidate, rejection, attempts=attempts, delivered_to=delivered_to, poisoned_at=now
    )
    log_fields = {
        "event_id": message.event_id,
        "aggregate_key": message.aggregate_key,
        "seq": message.seq,
        "reason": rejection.reason.value,
        "code": rejection.code,
    }
    try:
        queue.send(message)
    except PoisonQueueUnavailableError as error:
        _log.error(
            "poison queue unavailable; record will be retried",
            extra={**log_fields, "queue_error": error.code},
        )
        return error.code
    _log.error("poison event sent to the poison queue", extra=log_fields)
    return None


def poisoned(
    candidate: Candidate, rejection: Rejection, *, attempts: int, delivered_to: tuple[Destination, ...]
) -> EventOutcome:
    """The outcome of an event the poison queue took."""
    return EventOutcome(
        candidate,
        Status.POISONED,
        attempts,
        code=rejection.code,
        detail=failure_detail(rejection),
        delivered_to=delivered_to,
        poison_reason=rejection.reason,
    )


def contract_break_mark(
    candidate: Candidate, rejection: Rejection, now: datetime, router: Router
) -> MarkFailed | None:
    """The FAILED mark a writer-contract break gets at once, before its poison message; None without a usable
    key."""
    return failed_mark(
        candidate, failure_detail(rejection), 0, now, router, delivered_to=candidate.delivered_to
    )


def failure_detail(rejection: Rejection) -> str:
    """What the row's `last_error` and the outcome say of a poison event: reason, code and detail."""
    return f"{rejection.reason.value}: {rejection.code}: {rejection.detail}"
