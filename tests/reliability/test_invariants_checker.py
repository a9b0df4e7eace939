"""The invariant checker itself: a clean history passes, and each hand-built violation is caught."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace

from tests.reliability.invariants import (
    CAUSE_CRASH,
    CAUSE_DESTINATION,
    CAUSE_MARKING,
    CAUSE_UNEXPLAINED,
    History,
    OrderState,
    Row,
    check,
)
from tests.reliability.wire import EVENTBRIDGE, SNS, Invocation, Publication

ORDER = "Order#o-1"


def row(seq: int, *, status: str = "PUBLISHED", event_type: str = "OrderPlaced", **changes: object) -> Row:
    base = Row(ORDER, seq, f"e-{seq}", event_type, status, json.dumps({"seq": seq}))
    return replace(base, **changes)  # type: ignore[arg-type]


def publication(r: Row, destination: str, *, invocation: int = 1, payload: object = None) -> Publication:
    body = json.dumps(
        {
            "event_id": r.event_id,
            "aggregate_type": r.aggregate_key.split("#")[0],
            "aggregate_id": r.aggregate_key.split("#")[1],
            "seq": r.seq,
            "event_type": r.event_type,
            "payload": json.loads(r.payload) if payload is None else payload,
        }
    )
    return Publication(
        destination, r.event_id, r.aggregate_key, r.seq, r.event_type, body, invocation, "publisher", 0.0
    )


def clean() -> History:
    """o-1 placed then cancelled: both events out on both destinations, in order, applied once each."""
    placed, cancelled = row(1), row(2, event_type="OrderCancelled")
    return History(
        rows=[placed, cancelled],
        orders=[OrderState("o-1", "CANCELLED", 2)],
        publications=[publication(r, d) for r in (placed, cancelled) for d in (SNS, EVENTBRIDGE)],
        effects={"order-summary": {"e-1": 1, "e-2": 1}, "order-cancellations": {"e-2": 1}},
        summary={"o-1": ("CANCELLED", 2)},
        ledger=frozenset({"o-1"}),
        invocations={1: Invocation(1, "publisher")},
    )


def test_a_clean_history_passes() -> None:
    verdict = check(clean())
    assert verdict.ok, verdict.violations()
    assert verdict.duplicates == Counter()


def test_a_row_left_pending_is_lost() -> None:
    history = clean()
    history.rows = [history.rows[0], replace(history.rows[1], status="PENDING")]
    assert any("still PENDING" in v for v in check(history).lost)


def test_a_published_row_missing_on_one_destination_is_lost() -> None:
    history = clean()
    history.publications = [
        p for p in history.publications if not (p.seq == 2 and p.destination == EVENTBRIDGE)
    ]
    history.effects = {"order-summary": {"e-1": 1, "e-2": 1}, "order-cancellations": {}}
    history.ledger = frozenset()
    verdict = check(history)
    assert any("never reached eventbridge" in v for v in verdict.lost)


def test_a_failed_row_that_is_no_injected_poison_is_lost() -> None:
    history = clean()
    history.rows = [history.rows[0], replace(history.rows[1], status="FAILED", last_error="gave_up")]
    assert any("no injected poison" in v for v in check(history).lost)


def test_injected_poison_failed_with_its_reason_and_parked_is_fine_but_not_without_a_reason() -> None:
    poison = Row("Invoice#i-1", 1, "p-1", "InvoiceIssued", "FAILED", "{not json", last_error="unreadable")
    history = clean()
    history.rows = [*history.rows, poison]
    history.injected_poison = frozenset({"p-1"})
    history.poison_sent = frozenset({"p-1"})
    assert check(history).ok
    history.rows = [*history.rows[:2], replace(poison, last_error=None)]
    assert any("without a reason" in v for v in check(history).lost)


def test_an_order_without_its_event_is_lost_and_an_event_without_its_order_is_invented() -> None:
    history = clean()
    history.orders = [OrderState("o-1", "CANCELLED", 3)]
    history.summary = {"o-1": ("CANCELLED", 3)}
    assert any("has no event [3]" in v for v in check(history).lost)
    history.orders = [OrderState("o-1", "PLACED", 1)]
    history.summary = {"o-1": ("PLACED", 1)}
    history.ledger = frozenset()
    assert any("has events [2]" in v for v in check(history).invented)


def test_a_dead_lettered_consumer_message_is_lost() -> None:
    history = clean()
    history.dead_letters = {"order-summary": 1}
    assert any("dead-lettered 1" in v for v in check(history).lost)


def test_a_publication_without_its_row_is_invented() -> None:
    history = clean()
    ghost = row(3)
    history.publications = [*history.publications, publication(ghost, SNS)]
    assert any("no such committed row" in v for v in check(history).invented)


def test_a_publication_with_another_payload_is_invented() -> None:
    history = clean()
    history.publications = [*history.publications, publication(history.rows[0], SNS, payload={"seq": 99})]
    assert any("payload is not the row's" in v for v in check(history).invented)


def test_an_event_published_before_its_predecessor_is_out_of_order() -> None:
    history = clean()
    first, second = history.rows
    history.publications = [
        publication(second, SNS),
        publication(first, SNS),
        publication(first, EVENTBRIDGE),
        publication(second, EVENTBRIDGE),
    ]
    assert check(history).out_of_order == ["sns: Order#o-1 seq 2 went out before seq 1"]


def test_an_event_published_while_its_predecessor_never_was_is_out_of_order_unless_skipped() -> None:
    history = clean()
    first, second = history.rows
    history.rows = [replace(first, status="FAILED", last_error="poison"), second]
    history.publications = [publication(second, d) for d in (SNS, EVENTBRIDGE)]
    history.injected_poison = frozenset({"e-1"})
    history.poison_sent = frozenset({"e-1"})
    history.effects = {"order-summary": {"e-2": 1}, "order-cancellations": {"e-2": 1}}
    verdict = check(history)
    assert any("seq 1 never did" in v for v in verdict.out_of_order)
    history.rows = [replace(first, status="FAILED", last_error="poison", released=True), second]
    assert not check(history).out_of_order


def test_an_effect_applied_twice_or_never_is_caught() -> None:
    history = clean()
    history.effects = {"order-summary": {"e-1": 2, "e-2": 1}, "order-cancellations": {"e-2": 1}}
    assert check(history).duplicate_effects == ["order-summary applied e-1 2 time(s)"]
    history.effects = {"order-summary": {"e-1": 1}, "order-cancellations": {"e-2": 1}}
    assert check(history).duplicate_effects == ["order-summary applied e-2 0 time(s)"]


def test_an_effect_for_an_event_never_delivered_is_invented() -> None:
    history = clean()
    history.effects = {"order-summary": {"e-1": 1, "e-2": 1, "e-9": 1}, "order-cancellations": {"e-2": 1}}
    assert any("applied e-9" in v for v in check(history).invented)


def test_a_read_model_that_differs_from_the_orders_table_is_caught() -> None:
    history = clean()
    history.summary = {"o-1": ("PLACED", 1)}
    assert any("order summary of o-1" in v for v in check(history).duplicate_effects)
    history = clean()
    history.ledger = frozenset()
    assert any("ledger lacks order o-1" in v for v in check(history).duplicate_effects)


def test_duplicates_on_the_wire_are_counted_by_the_cause_of_the_earlier_publication() -> None:
    history = clean()
    crashed = Invocation(2, "publisher", crashed=True)
    marking = Invocation(3, "publisher", faults=Counter({"dynamodb": 1}))
    first = history.rows[0]
    history.publications = [
        publication(first, SNS, invocation=2),
        publication(first, SNS, invocation=3),
        publication(first, SNS, invocation=1),
        *history.publications[1:],
    ]
    history.invocations = {1: Invocation(1, "publisher"), 2: crashed, 3: marking}
    verdict = check(history)
    assert verdict.ok
    assert verdict.duplicates == Counter({CAUSE_CRASH: 1, CAUSE_MARKING: 1})


def test_a_duplicate_no_fault_explains_is_a_violation() -> None:
    # Given seq 1 published to SNS by invocation 2, in which nothing failed, then again by invocation 1
    history = clean()
    first = history.rows[0]
    history.publications = [publication(first, SNS, invocation=2), *history.publications]
    history.invocations = {1: Invocation(1, "publisher"), 2: Invocation(2, "publisher")}
    # Then the duplicate is unexplained, and that breaks a promise
    verdict = check(history)
    assert verdict.duplicates == Counter({CAUSE_UNEXPLAINED: 1})
    assert not verdict.ok
    assert verdict.unexplained == [
        "sns got Order#o-1 seq 1 (e-1) again in invocation 1, after invocation 2, with no fault to explain it"
    ]
    assert any(v.startswith("unexplained duplicate: ") for v in verdict.violations())
    # And so is one published by an invocation the checker knows nothing of
    history.invocations = {1: Invocation(1, "publisher")}
    assert check(history).unexplained


def test_a_destination_fault_explains_a_duplicate_of_a_marked_row_only_if_the_batch_came_back() -> None:
    # Given invocation 2 had an entry fault (another entry failed) and published seq 1 to SNS
    history = clean()
    first = history.rows[0]
    history.publications = [publication(first, SNS, invocation=2), *history.publications]
    faulted = Invocation(2, "publisher", faults=Counter({"entries": 1}))
    history.invocations = {1: Invocation(1, "publisher"), 2: faulted}
    # Then, the row left PENDING by it, the republication is the fault's
    assert check(history).duplicates == Counter({CAUSE_DESTINATION: 1})
    assert check(history).ok
    # But had it marked the row PUBLISHED, nothing explains publishing it again
    history.invocations = {1: Invocation(1, "publisher"), 2: replace(faulted, marked=frozenset({"e-1"}))}
    verdict = check(history)
    assert verdict.duplicates == Counter({CAUSE_UNEXPLAINED: 1})
    assert not verdict.ok
    # Unless it reported batch item failures: the mapping sent its batch again, the marked record included
    retried = replace(faulted, marked=frozenset({"e-1"}), retried=True)
    history.invocations = {1: Invocation(1, "publisher"), 2: retried}
    assert check(history).duplicates == Counter({CAUSE_DESTINATION: 1})
    # While a crash or a failed marking call explains it either way (the marking may not have been the last)
    crashed = Invocation(2, "publisher", crashed=True, marked=frozenset({"e-1"}))
    history.invocations = {1: Invocation(1, "publisher"), 2: crashed}
    assert check(history).duplicates == Counter({CAUSE_CRASH: 1})
