"""How an event of a call group fared, judged from its deliveries once the group's calls are made. Pure: the
engine (outbox_publisher.engine) acts on the verdict.

- Delivered to every destination of its route: PUBLISHED, also after the run stopped (an event that shared
  the failing call is out, and its row says so).
- Else, once the run has stopped: NOT_ATTEMPTED, handed back.
- Refused for good by a destination: poison (`rejected`).
- Failed transiently on its last chance (the sweeper's cutoff) after it was tried: poison (`gave_up`).
- Else the run stops here (FAILED): the event and everything after it are handed back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from outbox_publisher.delivery import Delivery
from outbox_publisher.errors import FailureKind
from outbox_publisher.planning import Planned
from outbox_publisher.poison import PoisonReason, Rejection
from outbox_publisher.report import Status
from outbox_publisher.routing import Destination


class Verdict(NamedTuple):
    """Made once per event of every call group: a tuple is the cheapest immutable value to build."""

    status: Status
    """PUBLISHED, NOT_ATTEMPTED, POISONED (to be sent to the poison queue) or FAILED (the run stops)."""
    attempts: int
    delivered_to: tuple[Destination, ...]
    rejection: Rejection | None = None
    """POISONED only: why."""
    failed_on: Destination | None = None
    """FAILED only: the destination that failed, with its `code` and `detail`."""
    code: str | None = None
    detail: str | None = None
    tried: bool = True
    """FAILED only: False when the failing destination was never tried (no time was left): nothing failed."""


def judge(member: Planned, deliveries: Mapping[Destination, Delivery], *, stopped: bool) -> Verdict:
    """The verdict on one event from its deliveries, one per destination it was sent to; `stopped`: the run
    stopped before (or while) this group went out."""
    attempts = max((delivery.attempts for delivery in deliveries.values()), default=0)
    delivered = tuple(destination for destination, delivery in deliveries.items() if delivery.ok)
    if len(delivered) == len(member.destinations):
        return Verdict(Status.PUBLISHED, attempts, delivered)
    if stopped:
        return Verdict(Status.NOT_ATTEMPTED, attempts, delivered)
    failures = [(destination, delivery) for destination, delivery in deliveries.items() if not delivery.ok]
    for destination, delivery in failures:
        if delivery.kind is FailureKind.PERMANENT:
            rejection = Rejection(
                PoisonReason.REJECTED,
                f"{destination.value}:{delivery.code}",
                f"{destination.value} refused the entry for good ({delivery.code})",
            )
            return Verdict(Status.POISONED, attempts, delivered, rejection)
    destination, delivery = failures[0]
    if gives_up(member, delivery):
        rejection = Rejection(
            PoisonReason.GAVE_UP,
            f"{destination.value}:{delivery.code}",
            f"{delivery.kind} failures on {destination.value} outlasted the sweeper's limit",
        )
        return Verdict(Status.POISONED, attempts, delivered, rejection)
    return Verdict(
        Status.FAILED,
        attempts,
        delivered,
        failed_on=destination,
        code=f"{destination.value}:{delivery.code}",
        detail=f"{delivery.kind} failure on {destination.value}",
        # No attempt at that destination: the run had no time to try it, nothing failed.
        tried=delivery.attempts > 0,
    )


def gives_up(member: Planned, delivery: Delivery) -> bool:
    """A last-chance event that was tried and failed becomes poison (`gave_up`). One the run had no time to
    try at all is not failed for it: it stays PENDING for the next run."""
    return member.candidate.last_chance and delivery.attempts > 0
