"""The invariant checker: what the system promised, checked from what is left after a run.

From the tables (outbox rows, orders), what the destinations accepted (the wire, in order), the poison
queue, and the inbox consumers' state (their effect counters, read models and dead letters), `check` says:

- **lost**: a committed event not PUBLISHED (still PENDING after the drain, or FAILED without being injected
  poison, or FAILED without a reason); a PUBLISHED row missing on a destination; an order whose events are
  not exactly seq 1..last_seq (the business write and its event commit together); a consumer message
  dead-lettered;
- **invented**: a publication without its committed row (unknown event_id, another aggregate or seq, another
  payload), an order's event beyond its last_seq, an effect applied for an event never published;
- **out of order**: per aggregate and destination, an event first published before its predecessor's first
  publication, unless an operator skipped the predecessor;
- **duplicate effects**: an event whose effect committed more than once at a consumer, or never (while it
  was published to it); a read model that differs from the one derived from the Orders table;
- **duplicates on the wire**, by cause (allowed, counted): each publication of an event on a destination
  after its first, attributed to what happened in the invocation that published it before (a crash or
  timeout, a failed marking call; the poison queue or another destination or entry failing only if that
  invocation did not end with the row PUBLISHED); one no fault explains is a violation (`unexplained`).

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

CAUSE_CRASH = "crash or timeout before marking"
CAUSE_MARKING = "marking failed (DynamoDB)"
CAUSE_DESTINATION = "another destination or entry failed"
CAUSE_POISON_QUEUE = "poison queue unavailable"
CAUSE_UNEXPLAINED = "unexplained"
CAUSES = (CAUSE_CRASH, CAUSE_MARKING, CAUSE_DESTINATION, CAUSE_POISON_QUEUE, CAUSE_UNEXPLAINED)


@dataclass(frozen=True)
class Row:
    aggregate_key: str
    seq: int
    event_id: str
    event_type: str
    status: str
    payload: str
    last_error: str | None = None
    released: bool = False
    """An operator skipped it (`released_at`): the events behind it may go without it."""


@dataclass(frozen=True)
class OrderState:
    order_id: str
    status: str
    last_seq: int


@dataclass
class History:
    rows: Sequence[Row]
    orders: Sequence[OrderState]
    publications: Sequence[Publication]
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
    destinations: tuple[str, ...] = (SNS, EVENTBRIDGE)
    summary_consumer: str = "order-summary"
    ledger_consumer: str = "order-cancellations"


@dataclass
class Verdict:
    lost: list[str] = field(default_factory=list)
    invented: list[str] = field(default_factory=list)
    out_of_order: list[str] = field(default_factory=list)
    duplicate_effects: list[str] = field(default_factory=list)
    duplicates: Counter[str] = field(default_factory=Counter)
    unexplained: list[str] = field(default_factory=list)
    """Duplicates on the wire that no fault explains (also counted in `duplicates`): a broken promise."""

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
    rows = {row.event_id: row for row in history.rows}
    slots = {(row.aggregate_key, row.seq): row for row in history.rows}
    published: dict[str, list[Publication]] = {d: [] for d in history.destinations}
    for publication in history.publications:
        published.setdefault(publication.destination, []).append(publication)
    _lost(history, rows, published, verdict)
    _invented(history, rows, verdict)
    _order(history, slots, published, verdict)
    _effects(history, rows, published, verdict)
    _duplicates(history, published, verdict)
    return verdict


def _lost(
    history: History, rows: Mapping[str, Row], published: Mapping[str, list[Publication]], verdict: Verdict
) -> None:
    out = {d: {p.event_id for p in publications} for d, publications in published.items()}
    for row in history.rows:
        where = f"{row.aggregate_key} seq {row.seq} ({row.event_id})"
        if row.status == "PUBLISHED":
            verdict.lost.extend(
                f"{where} is PUBLISHED but never reached {d}"
                for d in history.destinations
                if row.event_id not in out[d]
            )
        elif row.status == "FAILED":
            if row.event_id not in history.injected_poison:
                verdict.lost.append(f"{where} is FAILED ({row.last_error}) but is no injected poison")
            elif not row.last_error:
                verdict.lost.append(f"{where} is FAILED without a reason")
            elif row.event_id not in history.poison_sent:
                verdict.lost.append(f"{where} is FAILED but never reached the poison queue")
        else:
            verdict.lost.append(f"{where} is still {row.status}")
    _orders_and_dead_letters(history, verdict)


def _orders_and_dead_letters(history: History, verdict: Verdict) -> None:
    by_aggregate: dict[str, set[int]] = {}
    for row in history.rows:
        by_aggregate.setdefault(row.aggregate_key, set()).add(row.seq)
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


def _invented(history: History, rows: Mapping[str, Row], verdict: Verdict) -> None:
    for publication in history.publications:
        row = rows.get(publication.event_id)
        where = f"{publication.destination} got {publication.aggregate_key} seq {publication.seq}"
        if row is None:
            verdict.invented.append(f"{where} ({publication.event_id}): no such committed row")
            continue
        if (row.aggregate_key, row.seq) != (publication.aggregate_key, publication.seq):
            verdict.invented.append(f"{where}: its row is {row.aggregate_key} seq {row.seq}")
            continue
        payload = json.loads(publication.body).get("payload")
        try:
            stored = json.loads(row.payload)
        except ValueError:
            stored = None
        if payload != stored:
            verdict.invented.append(f"{where}: the payload is not the row's")


def _order(
    history: History,
    slots: Mapping[tuple[str, int], Row],
    published: Mapping[str, list[Publication]],
    verdict: Verdict,
) -> None:
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
            elif predecessor.released:
                continue
            elif predecessor.event_id not in first:
                verdict.out_of_order.append(f"{where} went out, seq {publication.seq - 1} never did")
            elif first[predecessor.event_id] > position:
                verdict.out_of_order.append(f"{where} went out before seq {publication.seq - 1}")


def _effects(
    history: History, rows: Mapping[str, Row], published: Mapping[str, list[Publication]], verdict: Verdict
) -> None:
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
            cause = _cause(history.invocations.get(previous.invocation), previous.event_id)
            verdict.duplicates[cause] += 1
            if cause == CAUSE_UNEXPLAINED:
                verdict.unexplained.append(
                    f"{destination} got {publication.aggregate_key} seq {publication.seq} "
                    f"({publication.event_id}) again in invocation {publication.invocation}, after "
                    f"invocation {previous.invocation}, with no fault to explain it"
                )


def _cause(invocation: Invocation | None, event_id: str) -> str:  # noqa: PLR0911 - one answer a cause
    """Why an event went out again after `invocation` published it: a crash or timeout, a failed marking
    call, or (only if it did not end with the event's row PUBLISHED) the poison queue or another destination
    or entry failing. Anything else is unexplained."""
    if invocation is None:
        return CAUSE_UNEXPLAINED
    if invocation.crashed:
        return CAUSE_CRASH
    if invocation.faults.get("dynamodb"):
        return CAUSE_MARKING
    if event_id in invocation.marked and not invocation.retried:
        return CAUSE_UNEXPLAINED
    if invocation.faults.get("sqs"):
        return CAUSE_POISON_QUEUE
    if invocation.faults.get(SNS) or invocation.faults.get(EVENTBRIDGE) or invocation.faults.get("entries"):
        return CAUSE_DESTINATION
    return CAUSE_UNEXPLAINED
