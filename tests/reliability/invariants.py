"""The invariant checker: what the system promised, checked from what is left after a run.

The table holds only what is not out yet (a published event's row is deleted, a skipped one's too), so the
events that were committed cannot be read from it afterwards: the suite records them as the writers commit
them (`committed`: the outbox rows of every TransactWriteItems the Orders API got an answer to, and every
row another writer put), independently of the table, the stream and the functions. From those, what is left
in the outbox table (`rows`), the operators' audit records (`skipped`), the orders, what the destinations
accepted (the wire, in order), the poison queue and the inbox consumers' state (their effect counters, read
models and dead letters), `check` says:

- **lost**: a committed event whose row is still PENDING after the drain, or FAILED without being injected
  poison, without a reason, or without having reached the poison queue; a committed event whose row left the
  table without reaching every destination, unless an operator skipped it (its audit record); injected
  poison that never reached the poison queue; injected poison whose FAILED reason does not name the fault
  injected (a stored envelope that was deleted: `PayloadMissing`), or that was never FAILED; an order whose
  committed events are not exactly seq 1..last_seq (the business write and its event commit together); a
  consumer message dead-lettered;
- **invented**: a publication without its committed event (unknown event_id, another aggregate or seq,
  another payload than the row held), a row in the table that no writer committed, an order's event beyond
  its last_seq, an effect applied for an event never delivered, a claim check published whose stored
  envelope could not be read (a consumer gets no event from it);
- **out of order**: per aggregate and destination, an event first published before its predecessor's first
  publication, unless an operator skipped the predecessor or its route let the events behind it go on
  (`released`);
- **duplicate effects**: an event whose effect committed more than once at a consumer, or never (while it
  was delivered to it); a read model that differs from the one derived from the Orders table;
- **duplicates on the wire**, by cause (allowed, counted): each publication of an event on a destination
  after its first, attributed to what happened in the invocation that delivered it there before. Once the
  table records a delivery (the row settled, or the destination in its `delivered_to`), nothing may send the
  event there again; so a duplicate is explained by a crash or timeout of that invocation (between its call
  and its record), by DynamoDB failing it (the record not written), or, for a recorded delivery, only by the
  mapping sending the batch again after the invocation handed (part of) it back. One nothing explains is a
  violation (`unexplained`).

Pure: the `History` is plain data, so the checker's own tests build violating histories by hand.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tests.reliability.wire import EVENTBRIDGE, SNS, Invocation, Publication

ORDER_EVENT_TYPES = frozenset({"OrderPlaced", "OrderConfirmed", "OrderCancelled"})
CANCELLED = "OrderCancelled"

CAUSE_CRASH = "crash or timeout before its record"
CAUSE_ROW_UPDATE = "record not written (DynamoDB failed)"
CAUSE_HANDED_BACK = "batch handed back and sent again"
CAUSE_UNEXPLAINED = "unexplained"
CAUSE_CUT_IN_FLIGHT = "in flight when its region was cut"
CAUSES = (CAUSE_CRASH, CAUSE_ROW_UPDATE, CAUSE_HANDED_BACK, CAUSE_CUT_IN_FLIGHT, CAUSE_UNEXPLAINED)


@dataclass(frozen=True)
class Committed:
    """An event a writer committed, as it was committed (its payload as an operator last fixed it)."""

    aggregate_key: str
    seq: int
    event_id: str
    event_type: str
    payload: str


@dataclass(frozen=True)
class Row:
    """An event's row left in the outbox table after the drain."""

    aggregate_key: str
    seq: int
    event_id: str
    status: str
    last_error: str | None = None
    released: bool = False
    """FAILED on a route that lets the events behind it go on (`released_at`)."""


@dataclass
class History:
    committed: Sequence[Committed]
    rows: Sequence[Row]
    orders: Sequence[OrderState]
    publications: Sequence[Publication]
    skipped: frozenset[str] = frozenset()
    """event_id of every event an operator skipped (its audit record says so)."""
    injected_poison: frozenset[str] = frozenset()
    poison_sent: frozenset[str] = frozenset()
    effects: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    """Consumer -> event_id -> how many times its effect committed."""
    summary: Mapping[str, tuple[str, int]] = field(default_factory=dict)
    """The order-summary read model: order_id -> (status, last_seq)."""
    ledger: frozenset[str] = frozenset()
    """The cancellations ledger: the order ids it holds."""
    dead_letters: Mapping[str, int] = field(default_factory=dict)
    invocations: Mapping[int, Invocation] = field(default_factory=dict)
    expected_reasons: Mapping[str, str] = field(default_factory=dict)
    """Injected poison whose FAILED reason must name a code (event_id -> code, e.g. PayloadMissing)."""
    unreadable_claims: Sequence[str] = ()
    """event_id of every claim check a destination accepted whose stored envelope could not be read."""
    failed_reasons: Mapping[str, str] = field(default_factory=dict)
    """event_id -> the `last_error` its row held when it was seen FAILED (by the operator, or after the
    drain)."""
    destinations: tuple[str, ...] = (SNS, EVENTBRIDGE)
    explained: Mapping[tuple[str, str, int], str] = field(default_factory=dict)
    """(event_id, destination, invocation of its previous publication) -> the cause of a copy that the
    invocations alone do not explain: on an outbox across regions, an event a region published and was cut
    off before its settle replicated, published again by the peer that took its rows over
    (tests.reliability.regions)."""
    summary_consumer: str = "order-summary"
    ledger_consumer: str = "order-cancellations"


@dataclass(frozen=True)
class OrderState:
    order_id: str
    status: str
    last_seq: int


@dataclass(frozen=True)
class Duplicate:
    """A publication of an event on a destination after its first there, and why."""

    destination: str
    event_id: str
    invocation: int
    after: int
    """The invocation that delivered it there before."""
    cause: str


@dataclass
class Verdict:
    lost: list[str] = field(default_factory=list)
    invented: list[str] = field(default_factory=list)
    out_of_order: list[str] = field(default_factory=list)
    duplicate_effects: list[str] = field(default_factory=list)
    duplicates: Counter[str] = field(default_factory=Counter)
    unexplained: list[str] = field(default_factory=list)
    """Duplicates on the wire that nothing explains (also counted in `duplicates`): a broken promise."""
    copies: list[Duplicate] = field(default_factory=list)
    """Every duplicate on the wire, in wire order."""

    @property
    def ok(self) -> bool:
        return not (
            self.lost or self.invented or self.out_of_order or self.duplicate_effects or self.unexplained
        )

    def violations(self) -> list[str]:
        return [
            *(f"lost: {v}" for v in self.lost),
            *(f"invented: {v}" for v in self.invented),
            *(f"out of order: {v}" for v in self.out_of_order),
            *(f"duplicate effect: {v}" for v in self.duplicate_effects),
            *(f"unexplained duplicate: {v}" for v in self.unexplained),
        ]


def check(history: History) -> Verdict:
    verdict = Verdict()
    committed = {event.event_id: event for event in history.committed}
    slots = {(event.aggregate_key, event.seq): event for event in history.committed}
    published: dict[str, list[Publication]] = {d: [] for d in history.destinations}
    for publication in history.publications:
        published.setdefault(publication.destination, []).append(publication)
    _lost(history, published, verdict)
    _invented(history, committed, verdict)
    _order(history, slots, published, verdict)
    _effects(history, published, verdict)
    _duplicates(history, published, verdict)
    return verdict


def _lost(history: History, published: Mapping[str, list[Publication]], verdict: Verdict) -> None:
    out = {d: {p.event_id for p in publications} for d, publications in published.items()}
    rows = {(row.aggregate_key, row.seq): row for row in history.rows}
    for event in history.committed:
        where = f"{event.aggregate_key} seq {event.seq} ({event.event_id})"
        row = rows.get((event.aggregate_key, event.seq))
        if row is not None and row.event_id != event.event_id:
            verdict.lost.append(f"{where}: its slot holds another event, {row.event_id}")
        elif row is not None and row.status == "FAILED":
            _failed(history, row, where, verdict)
        elif row is not None and row.status != "PUBLISHED":
            # PUBLISHED: a row an earlier release kept, read as out (and checked as a settled one below).
            verdict.lost.append(f"{where} is still {row.status}")
        elif event.event_id not in history.skipped:
            verdict.lost.extend(
                f"{where} left the table but never reached {d}"
                for d in history.destinations
                if event.event_id not in out[d]
            )
        pending = row is not None and row.status == "PENDING"
        if (
            event.event_id in history.injected_poison
            and not pending
            and event.event_id not in history.poison_sent
        ):
            verdict.lost.append(f"{where} is injected poison that never reached the poison queue")
    _expected_reasons(history, verdict)
    _orders_and_dead_letters(history, verdict)


def _expected_reasons(history: History, verdict: Verdict) -> None:
    for event_id, code in sorted(history.expected_reasons.items()):
        reason = history.failed_reasons.get(event_id)
        if reason is None:
            verdict.lost.append(f"{event_id} should have been FAILED ({code}) and never was")
        elif code not in reason:
            verdict.lost.append(f"{event_id} is FAILED ({reason}), not for {code}")


def _failed(history: History, row: Row, where: str, verdict: Verdict) -> None:
    if row.event_id not in history.injected_poison:
        verdict.lost.append(f"{where} is FAILED ({row.last_error}) but is no injected poison")
    elif not row.last_error:
        verdict.lost.append(f"{where} is FAILED without a reason")


def _orders_and_dead_letters(history: History, verdict: Verdict) -> None:
    by_aggregate: dict[str, set[int]] = {}
    for event in history.committed:
        by_aggregate.setdefault(event.aggregate_key, set()).add(event.seq)
    for order in history.orders:
        seqs = by_aggregate.get(f"Order#{order.order_id}", set())
        missing = sorted(set(range(1, order.last_seq + 1)) - seqs)
        extra = sorted(seq for seq in seqs if seq > order.last_seq)
        if missing:
            verdict.lost.append(
                f"order {order.order_id} is at seq {order.last_seq} but has no event {missing}"
            )
        if extra:
            verdict.invented.append(
                f"order {order.order_id} is at seq {order.last_seq} but has events {extra}"
            )
    for consumer, count in sorted(history.dead_letters.items()):
        if count:
            verdict.lost.append(f"{consumer} dead-lettered {count} message(s)")


def _invented(history: History, committed: Mapping[str, Committed], verdict: Verdict) -> None:
    for publication in history.publications:
        event = committed.get(publication.event_id)
        where = f"{publication.destination} got {publication.aggregate_key} seq {publication.seq}"
        if event is None:
            verdict.invented.append(f"{where} ({publication.event_id}): no such committed event")
            continue
        if (event.aggregate_key, event.seq) != (publication.aggregate_key, publication.seq):
            verdict.invented.append(f"{where}: it was committed as {event.aggregate_key} seq {event.seq}")
            continue
        payload = json.loads(publication.body).get("payload")
        try:
            stored = json.loads(event.payload)
        except ValueError:
            stored = None
        if payload != stored:
            verdict.invented.append(f"{where}: the payload is not the row's")
    verdict.invented.extend(
        f"a claim check of {event_id} went out, its stored envelope unreadable"
        for event_id in history.unreadable_claims
    )
    for row in history.rows:
        if row.event_id not in committed:
            where = f"{row.aggregate_key} seq {row.seq} ({row.event_id})"
            verdict.invented.append(f"{where} is in the table but no writer committed it")


def _order(
    history: History,
    slots: Mapping[tuple[str, int], Committed],
    published: Mapping[str, list[Publication]],
    verdict: Verdict,
) -> None:
    released = {row.event_id for row in history.rows if row.released}
    for destination, publications in published.items():
        first: dict[str, int] = {}
        for position, publication in enumerate(publications):
            first.setdefault(publication.event_id, position)
        for position in first.values():
            publication = publications[position]
            if publication.seq <= 1:
                continue
            predecessor = slots.get((publication.aggregate_key, publication.seq - 1))
            where = f"{destination}: {publication.aggregate_key} seq {publication.seq}"
            if predecessor is None:
                verdict.out_of_order.append(f"{where} went out with no seq {publication.seq - 1} at all")
            elif predecessor.event_id in history.skipped or predecessor.event_id in released:
                continue
            elif predecessor.event_id not in first:
                verdict.out_of_order.append(f"{where} went out, seq {publication.seq - 1} never did")
            elif first[predecessor.event_id] > position:
                verdict.out_of_order.append(f"{where} went out before seq {publication.seq - 1}")


def _effects(history: History, published: Mapping[str, list[Publication]], verdict: Verdict) -> None:
    expected = {
        history.summary_consumer: {
            p.event_id for p in published.get(SNS, []) if p.event_type in ORDER_EVENT_TYPES
        },
        history.ledger_consumer: {
            p.event_id for p in published.get(EVENTBRIDGE, []) if p.event_type == CANCELLED
        },
    }
    for consumer, events in expected.items():
        counts = history.effects.get(consumer, {})
        for event_id in sorted(set(counts) | events):
            count = counts.get(event_id, 0)
            if event_id not in events:
                verdict.invented.append(f"{consumer} applied {event_id}, which was never delivered to it")
            elif count != 1:
                verdict.duplicate_effects.append(f"{consumer} applied {event_id} {count} time(s)")
    derived = {order.order_id: (order.status, order.last_seq) for order in history.orders}
    for order_id in sorted(set(derived) | set(history.summary)):
        if history.summary.get(order_id) != derived.get(order_id):
            verdict.duplicate_effects.append(
                f"order summary of {order_id} is {history.summary.get(order_id)}, the Orders table says "
                f"{derived.get(order_id)}"
            )
    cancelled = {order.order_id for order in history.orders if order.status == "CANCELLED"}
    for order_id in sorted(cancelled ^ set(history.ledger)):
        verdict.duplicate_effects.append(
            f"cancellations ledger {'lacks' if order_id in cancelled else 'holds'} order {order_id}"
        )


def _duplicates(history: History, published: Mapping[str, list[Publication]], verdict: Verdict) -> None:
    for destination, publications in published.items():
        last: dict[str, Publication] = {}
        for publication in publications:
            previous = last.get(publication.event_id)
            last[publication.event_id] = publication
            if previous is None:
                continue
            cause = _cause(history.invocations.get(previous.invocation), previous.event_id, destination)
            if cause == CAUSE_UNEXPLAINED:
                cause = history.explained.get((publication.event_id, destination, previous.invocation), cause)
            verdict.duplicates[cause] += 1
            verdict.copies.append(
                Duplicate(
                    destination, publication.event_id, publication.invocation, previous.invocation, cause
                )
            )
            if cause == CAUSE_UNEXPLAINED:
                verdict.unexplained.append(
                    f"{destination} got {publication.aggregate_key} seq {publication.seq} "
                    f"({publication.event_id}) again in invocation {publication.invocation}, after "
                    f"invocation {previous.invocation}, with no fault to explain it"
                )


def _cause(invocation: Invocation | None, event_id: str, destination: str) -> str:
    """Why an event went out to `destination` again after `invocation` delivered it there: that invocation
    crashed or timed out before recording it; DynamoDB failed it, and the delivery was not recorded; or the
    delivery was recorded, but the invocation handed its batch back and the mapping sent the record again.
    Anything else is unexplained: a recorded delivery repeated, or one left unrecorded for no reason."""
    if invocation is None:
        return CAUSE_UNEXPLAINED
    if invocation.crashed:
        return CAUSE_CRASH
    if (event_id, destination) in invocation.recorded:
        return CAUSE_HANDED_BACK if invocation.retried else CAUSE_UNEXPLAINED
    if invocation.faults.get("dynamodb"):
        return CAUSE_ROW_UPDATE
    return CAUSE_UNEXPLAINED
