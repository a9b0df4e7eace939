"""How an event of a call group fared, judged from its deliveries once the group's calls are made. Pure: the
engine (outbox_publisher.engine) acts on the verdict.

Each destination the event still needed (its route's, less those its row says already took it) was tried on
its own, whatever the others answered:

- Taken by every one of them: PUBLISHED.
- Refused for good by one: poison (`rejected`).
- Not taken by one for a transient reason, on its last chance (the sweeper's cutoff) after it was tried:
  poison (`gave_up`).
- Not taken by one for a transient reason: UNDELIVERED. The row stays PENDING for the sweeper, recording the
  destinations that did take it, so they never get it again.
- Not tried anywhere because no time was left: NOT_ATTEMPTED. Not sent to a destination that was down for
  the run: UNDELIVERED, not tried (nothing failed for it).
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
    """PUBLISHED, POISONED (to be sent to the poison queue), UNDELIVERED or NOT_ATTEMPTED."""
    attempts: int
    delivered_to: tuple[Destination, ...]
    """The destinations that took it in this run."""
    rejection: Rejection | None = None
    """POISONED only: why."""
    code: str | None = None
    """UNDELIVERED and NOT_ATTEMPTED: the destination that did not take it, and its error code."""
    detail: str | None = None
    tried: bool = True
    """UNDELIVERED: False when the destinations that did not take it were never tried (no time was left): it
    did not fail, it was not got to."""


def judge(member: Planned, deliveries: Mapping[Destination, Delivery]) -> Verdict:
    """The verdict on one event from its deliveries, one per destination it was sent to."""
    attempts = max((delivery.attempts for delivery in deliveries.values()), default=0)
    delivered = tuple(destination for destination, delivery in deliveries.items() if delivery.ok)
    if len(delivered) == len(member.destinations):
        return Verdict(Status.PUBLISHED, attempts, delivered)
    failures = [(destination, delivery) for destination, delivery in deliveries.items() if not delivery.ok]
    for destination, delivery in failures:
        if delivery.kind is FailureKind.PERMANENT:
            rejection = Rejection(
                PoisonReason.REJECTED,
                f"{destination.value}:{delivery.code}",
                f"{destination.value} refused the entry for good ({delivery.code})",
            )
            return Verdict(Status.POISONED, attempts, delivered, rejection)
    tried = [(destination, delivery) for destination, delivery in failures if delivery.attempts > 0]
    destination, delivery = tried[0] if tried else failures[0]
    code = f"{destination.value}:{delivery.code}"
    down = any(delivery.destination_down for _, delivery in failures)
    if not tried and not delivered and not down:
        # Nothing was sent anywhere (the run had no time to): nothing failed.
        return Verdict(Status.NOT_ATTEMPTED, 0, (), code=code, detail="too little time left to try it")
    if tried and gives_up(member, delivery):
        rejection = Rejection(
            PoisonReason.GAVE_UP,
            code,
            f"{delivery.kind} failures on {destination.value} outlasted the sweeper's limit",
        )
        return Verdict(Status.POISONED, attempts, delivered, rejection)
    return Verdict(
        Status.UNDELIVERED,
        attempts,
        delivered,
        code=code,
        detail=f"{delivery.kind} failure on {destination.value}",
        tried=bool(tried),
    )


def gives_up(member: Planned, delivery: Delivery) -> bool:
    """A last-chance event that was tried and failed becomes poison (`gave_up`). One the run had no time to
    try at all is not failed for it: it stays PENDING for the next run."""
    return member.candidate.last_chance and delivery.attempts > 0
