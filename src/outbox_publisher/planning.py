"""Planning a publish: where an event goes (its route), what it weighs on each destination, and which
events may share one batch call. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

from outbox.model import OutboxEvent
from outbox_publisher.candidates import Candidate
from outbox_publisher.messages import MAX_ENTRIES_PER_CALL, Message, eventbridge_refusal
from outbox_publisher.poison import PoisonReason, Rejection
from outbox_publisher.ports import DestinationPort
from outbox_publisher.routing import Destination, Router


class Planned(NamedTuple):
    """What publishing one candidate takes."""

    position: int
    """The candidate's index in the run's input (not `index`: a tuple's method)."""
    candidate: Candidate
    event: OutboxEvent
    message: Message
    destinations: tuple[Destination, ...]
    """Where it still goes: its route's destinations that have not taken it yet (none: it is out already)."""
    sizes: Mapping[Destination, int]
    claims: Mapping[Destination, Message] = MappingProxyType({})
    """The claim checks sent instead of `message` where a stored envelope does not fit
    (outbox.payload_refs)."""

    def message_for(self, destination: Destination) -> Message:
        return self.claims.get(destination, self.message)


def plan(
    index: int, candidate: Candidate, router: Router, ports: Mapping[Destination, DestinationPort]
) -> Planned | Rejection:
    """What publishing the candidate takes, or why it never can (poison)."""
    if candidate.rejection is not None:
        return candidate.rejection
    event = candidate.event
    if event is None:
        return Rejection(PoisonReason.INVALID_ROW, "InvalidOutboxRow", "the row could not be read")
    routed = router.destinations_for(event.aggregate_type, event.event_type)
    if not routed:
        return Rejection(
            PoisonReason.NO_ROUTE,
            "NoRoute",
            f"no route for aggregate_type {event.aggregate_type} and event_type {event.event_type}",
        )
    # Each destination is served once: not again to those that took it already (the row's `delivered_to`).
    delivered = candidate.delivered_to
    destinations = tuple(destination for destination in routed if destination.value not in delivered)
    message = Message.of(event)
    sizes: dict[Destination, int] = {}
    claims: dict[Destination, Message] = {}
    for destination in destinations:
        port = ports[destination]
        size = port.size_of(message)
        if size > port.max_entry_bytes and event.stored is not None:
            claim = Message.claim_check(event, sns=destination is Destination.SNS)
            claims[destination] = claim
            size = port.size_of(claim)
        if size > port.max_entry_bytes:
            return Rejection(
                PoisonReason.TOO_LARGE,
                "EntryTooLarge",
                f"{destination.value} entry is {size} bytes, over the {port.max_entry_bytes}-byte limit",
            )
        sizes[destination] = size
        refusal = (
            eventbridge_refusal(event, message.body if event.stored is not None else event.payload_json)
            if destination is Destination.EVENTBRIDGE and destination not in claims
            else None
        )
        if refusal is not None:
            return Rejection(
                PoisonReason.REJECTED, "InvalidEventBridgeDetail", f"{destination.value}: {refusal}"
            )
    return Planned(index, candidate, event, message, destinations, sizes, claims)


class CallGroup:
    """The events the next calls will carry: at most 10, never two of one aggregate (see the engine's
    docstring), within every destination's batch limit. Keeps its aggregates and byte totals as it grows, so
    asking whether one more fits costs the same whatever the group holds."""

    def __init__(self) -> None:
        self.members: list[Planned] = []
        self._aggregates: set[str] = set()
        self._bytes: dict[Destination, int] = {}

    def __bool__(self) -> bool:
        return bool(self.members)

    def holds(self, aggregate_key: str) -> bool:
        """Whether an event of that aggregate is in the group."""
        return aggregate_key in self._aggregates

    def fits(self, planned: Planned, ports: Mapping[Destination, DestinationPort]) -> bool:
        """Whether `planned` may join the call the group will make."""
        if len(self.members) >= MAX_ENTRIES_PER_CALL or planned.event.aggregate_key in self._aggregates:
            return False
        return all(
            self._bytes.get(destination, 0) + size <= ports[destination].max_batch_bytes
            for destination, size in planned.sizes.items()
        )

    def add(self, planned: Planned) -> None:
        self.members.append(planned)
        self._aggregates.add(planned.event.aggregate_key)
        for destination, size in planned.sizes.items():
            self._bytes[destination] = self._bytes.get(destination, 0) + size
