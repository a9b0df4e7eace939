"""The invariant checker itself: a clean history passes, and each hand-built violation is caught."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace

from tests.reliability.invariants import (
    CAUSE_CRASH,
    CAUSE_CUT_IN_FLIGHT,
    CAUSE_HANDED_BACK,
    CAUSE_ROW_UPDATE,
    CAUSE_UNEXPLAINED,
    Committed,
    History,
    OrderState,
    Row,
    check,
)
from tests.reliability.wire import EVENTBRIDGE, SNS, Invocation, Publication

ORDER = "Order#o-1"


def event(seq: int, *, event_type: str = "OrderPlaced", **changes: object) -> Committed:
    base = Committed(ORDER, seq, f"e-{seq}", event_type, json.dumps({"seq": seq}))
    return replace(base, **changes)  # type: ignore[arg-type]


def left(committed: Committed, status: str, **changes: object) -> Row:
    """The event's row as the drain left it in the table."""
    base = Row(committed.aggregate_key, committed.seq, committed.event_id, status)
    return replace(base, **changes)  # type: ignore[arg-type]


def publication(
    e: Committed, destination: str, *, invocation: int = 1, payload: object = None
) -> Publication:
    body = json.dumps(
        {
            "event_id": e.event_id,
            "aggregate_type": e.aggregate_key.split("#")[0],
            "aggregate_id": e.aggregate_key.split("#")[1],
            "seq": e.seq,
            "event_type": e.event_type,
            "payload": json.loads(e.payload) if payload is None else payload,
        }
    )
    return Publication(
        destination, e.event_id, e.aggregate_key, e.seq, e.event_type, body, invocation, "publisher", 0.0
    )


def clean() -> History:
    """o-1 placed then cancelled: both events out on both destinations, in order, applied once each, and
    their rows gone from the table (settled)."""
    placed, cancelled = event(1), event(2, event_type="OrderCancelled")
    return History(
        committed=[placed, cancelled],
        rows=[],
        orders=[OrderState("o-1", "CANCELLED", 2)],
        publications=[publication(e, d) for e in (placed, cancelled) for d in (SNS, EVENTBRIDGE)],
        effects={"order-summary": {"e-1": 1, "e-2": 1}, "order-cancellations": {"e-2": 1}},
        summary={"o-1": ("CANCELLED", 2)},
        ledger=frozenset({"o-1"}),
        invocations={1: Invocation(1, "publisher")},
    )


def without_seq_2(history: History) -> None:
    """seq 2 delivered nowhere: nor are its effects there."""
    history.publications = [p for p in history.publications if p.seq != 2]
    history.effects = {"order-summary": {"e-1": 1}, "order-cancellations": {}}
    history.orders = [OrderState("o-1", "CANCELLED", 2)]
    history.summary = {"o-1": ("CANCELLED", 2)}
    history.ledger = frozenset({"o-1"})


def test_a_clean_history_passes() -> None:
    verdict = check(clean())
    assert verdict.ok, verdict.violations()
    assert verdict.duplicates == Counter()


def test_a_row_left_pending_is_lost() -> None:
    history = clean()
    history.rows = [left(history.committed[1], "PENDING")]
    assert check(history).lost == ["Order#o-1 seq 2 (e-2) is still PENDING"]


def test_a_row_gone_from_the_table_that_never_reached_one_destination_is_lost() -> None:
    # Given seq 2's row left the table, but only SNS ever got the event
    history = clean()
    history.publications = [
        p for p in history.publications if not (p.seq == 2 and p.destination == EVENTBRIDGE)
    ]
    history.effects = {"order-summary": {"e-1": 1, "e-2": 1}, "order-cancellations": {}}
    history.ledger = frozenset()
    verdict = check(history)
    # Then it is lost on the bus
    assert verdict.lost == ["Order#o-1 seq 2 (e-2) left the table but never reached eventbridge"]


def test_a_row_gone_from_the_table_that_was_never_delivered_is_lost() -> None:
    # Given seq 2 committed, its row gone, and no destination ever got it
    history = clean()
    without_seq_2(history)
    verdict = check(history)
    # Then it is lost on both destinations
    assert [v for v in verdict.lost if "seq 2" in v] == [
        "Order#o-1 seq 2 (e-2) left the table but never reached sns",
        "Order#o-1 seq 2 (e-2) left the table but never reached eventbridge",
    ]
    assert not verdict.ok


def test_a_row_gone_because_an_operator_skipped_it_is_not_lost() -> None:
    # Given seq 2's row gone without any delivery, and its audit record saying an operator skipped it
    history = clean()
    without_seq_2(history)
    history.skipped = frozenset({"e-2"})
    verdict = check(history)
    # Then nothing is lost: the operator let it go
    assert not verdict.lost
    assert not verdict.invented


def test_a_failed_row_that_is_no_injected_poison_is_lost() -> None:
    history = clean()
    history.rows = [left(history.committed[1], "FAILED", last_error="gave_up")]
    assert any("no injected poison" in v for v in check(history).lost)


def test_injected_poison_failed_with_its_reason_and_parked_is_fine_but_not_without_a_reason() -> None:
    poison = Committed("Invoice#i-1", 1, "p-1", "InvoiceIssued", "{not json")
    history = clean()
    history.committed = [*history.committed, poison]
    history.rows = [left(poison, "FAILED", last_error="unreadable")]
    history.injected_poison = frozenset({"p-1"})
    history.poison_sent = frozenset({"p-1"})
    assert check(history).ok
    history.rows = [left(poison, "FAILED")]
    assert any("without a reason" in v for v in check(history).lost)


def test_injected_poison_that_never_reached_the_poison_queue_is_lost_even_once_skipped() -> None:
    # Given injected poison an operator skipped, which the poison queue never got
    poison = Committed("Invoice#i-1", 1, "p-1", "InvoiceIssued", "{not json")
    history = clean()
    history.committed = [*history.committed, poison]
    history.injected_poison = frozenset({"p-1"})
    history.skipped = frozenset({"p-1"})
    # Then it was never isolated where an operator looks for it
    assert check(history).lost == [
        "Invoice#i-1 seq 1 (p-1) is injected poison that never reached the poison queue"
    ]
    history.poison_sent = frozenset({"p-1"})
    assert check(history).ok


def test_a_deleted_stored_envelope_must_end_failed_naming_payload_missing() -> None:
    # Given a stored envelope deleted after its row committed: poison, parked, the operator skipped it
    missing = Committed("Invoice#i-1", 1, "p-1", "InvoiceIssued", json.dumps({"n": 1}))
    history = clean()
    history.committed = [*history.committed, missing]
    history.injected_poison = frozenset({"p-1"})
    history.poison_sent = frozenset({"p-1"})
    history.skipped = frozenset({"p-1"})
    history.expected_reasons = {"p-1": "PayloadMissing"}
    # When it was seen FAILED naming the missing object, Then every promise held
    history.failed_reasons = {"p-1": "invalid_row: PayloadMissing: S3 GetObject: gone (NoSuchKey)"}
    assert check(history).ok
    # When it was FAILED for another reason, or never FAILED, Then it is lost
    history.failed_reasons = {"p-1": "invalid_row: PayloadMismatch"}
    assert check(history).lost == ["p-1 is FAILED (invalid_row: PayloadMismatch), not for PayloadMissing"]
    history.failed_reasons = {}
    assert check(history).lost == ["p-1 should have been FAILED (PayloadMissing) and never was"]


def test_a_claim_check_published_whose_envelope_cannot_be_read_is_invented() -> None:
    # Given a destination accepted a claim check of e-2 whose stored envelope was gone
    history = clean()
    history.unreadable_claims = ["e-2"]
    # Then it is invented: no consumer gets the event from it
    assert check(history).invented == ["a claim check of e-2 went out, its stored envelope unreadable"]


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


def test_a_publication_without_its_committed_event_is_invented() -> None:
    history = clean()
    ghost = event(3)
    history.publications = [*history.publications, publication(ghost, SNS)]
    assert any("no such committed event" in v for v in check(history).invented)


def test_a_publication_with_another_payload_is_invented() -> None:
    history = clean()
    first = history.committed[0]
    history.publications = [*history.publications, publication(first, SNS, payload={"seq": 99})]
    assert any("payload is not the row's" in v for v in check(history).invented)


def test_a_row_in_the_table_that_no_writer_committed_is_invented() -> None:
    history = clean()
    history.rows = [Row(ORDER, 3, "e-3", "PENDING")]
    assert "Order#o-1 seq 3 (e-3) is in the table but no writer committed it" in check(history).invented


def test_an_event_published_before_its_predecessor_is_out_of_order() -> None:
    history = clean()
    first, second = history.committed
    history.publications = [
        publication(second, SNS),
        publication(first, SNS),
        publication(first, EVENTBRIDGE),
        publication(second, EVENTBRIDGE),
    ]
    assert check(history).out_of_order == ["sns: Order#o-1 seq 2 went out before seq 1"]


def test_an_event_published_while_its_predecessor_never_was_is_out_of_order_unless_let_go() -> None:
    history = clean()
    first, second = history.committed
    history.rows = [left(first, "FAILED", last_error="poison")]
    history.publications = [publication(second, d) for d in (SNS, EVENTBRIDGE)]
    history.injected_poison = frozenset({"e-1"})
    history.poison_sent = frozenset({"e-1"})
    history.effects = {"order-summary": {"e-2": 1}, "order-cancellations": {"e-2": 1}}
    verdict = check(history)
    assert any("seq 1 never did" in v for v in verdict.out_of_order)
    # Released by its route (it continues past poison): the events behind it may go
    history.rows = [left(first, "FAILED", last_error="poison", released=True)]
    assert not check(history).out_of_order
    # Skipped by an operator (its row gone, its audit record kept): likewise
    history.rows = []
    history.skipped = frozenset({"e-1"})
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
    # Given seq 1 on SNS from a crashed invocation, then from one DynamoDB failed (its record not written),
    # then from invocation 1
    history = clean()
    crashed = Invocation(2, "publisher", crashed=True)
    unrecorded = Invocation(3, "publisher", faults=Counter({"dynamodb": 1}))
    first = history.committed[0]
    history.publications = [
        publication(first, SNS, invocation=2),
        publication(first, SNS, invocation=3),
        publication(first, SNS, invocation=1),
        *history.publications[1:],
    ]
    history.invocations = {1: Invocation(1, "publisher"), 2: crashed, 3: unrecorded}
    verdict = check(history)
    # Then both copies are explained, each by its own cause, and listed
    assert verdict.ok
    assert verdict.duplicates == Counter({CAUSE_CRASH: 1, CAUSE_ROW_UPDATE: 1})
    assert [(c.destination, c.event_id, c.after, c.cause) for c in verdict.copies] == [
        (SNS, "e-1", 2, CAUSE_CRASH),
        (SNS, "e-1", 3, CAUSE_ROW_UPDATE),
    ]


def test_a_duplicate_no_fault_explains_is_a_violation() -> None:
    # Given seq 1 published to SNS by invocation 2, in which nothing failed, then again by invocation 1
    history = clean()
    first = history.committed[0]
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


def test_another_destination_failing_explains_no_duplicate() -> None:
    # Given invocation 2 delivered seq 1 to SNS while EventBridge and single entries failed, and the table
    # did not record the delivery
    history = clean()
    first = history.committed[0]
    history.publications = [publication(first, SNS, invocation=2), *history.publications]
    faulted = Invocation(2, "publisher", faults=Counter({EVENTBRIDGE: 3, "entries": 1, "sqs": 1}))
    history.invocations = {1: Invocation(1, "publisher"), 2: faulted}
    # Then SNS getting it again is unexplained: another destination's failure must not repeat this one
    verdict = check(history)
    assert verdict.duplicates == Counter({CAUSE_UNEXPLAINED: 1})
    assert not verdict.ok


def test_a_recorded_delivery_sent_again_is_explained_only_by_a_crash_or_a_handed_back_batch() -> None:
    # Given invocation 2 delivered seq 1 to SNS and the table recorded it (its row gone, or SNS in its
    # delivered_to), DynamoDB having failed some other call of it
    history = clean()
    first = history.committed[0]
    history.publications = [publication(first, SNS, invocation=2), *history.publications]
    recorded = Invocation(2, "publisher", faults=Counter({"dynamodb": 1}), recorded=frozenset({("e-1", SNS)}))
    history.invocations = {1: Invocation(1, "publisher"), 2: recorded}
    # Then nothing may send it there again: the repeat is unexplained
    verdict = check(history)
    assert verdict.duplicates == Counter({CAUSE_UNEXPLAINED: 1})
    assert not verdict.ok
    # Unless that invocation handed its batch back: the mapping sent the record again
    history.invocations = {1: Invocation(1, "publisher"), 2: replace(recorded, retried=True)}
    assert check(history).duplicates == Counter({CAUSE_HANDED_BACK: 1})
    assert check(history).ok
    # Or it crashed (whatever it recorded before dying)
    history.invocations = {1: Invocation(1, "publisher"), 2: replace(recorded, crashed=True)}
    assert check(history).duplicates == Counter({CAUSE_CRASH: 1})
    # And a record of another destination does not cover this one
    other = replace(recorded, faults=Counter({"dynamodb": 1}), recorded=frozenset({("e-1", EVENTBRIDGE)}))
    history.invocations = {1: Invocation(1, "publisher"), 2: other}
    assert check(history).duplicates == Counter({CAUSE_ROW_UPDATE: 1})


def test_a_copy_the_invocations_do_not_explain_is_explained_only_by_the_cause_given_for_it() -> None:
    # Given seq 1 published to SNS by invocation 2 (nothing failed, nothing recorded), then again by
    # invocation 1 (on two regions: its region was cut off before its settle replicated, and the peer that
    # took its rows over published it again: tests.reliability.region_oracle says so)
    history = clean()
    first = history.committed[0]
    history.publications = [publication(first, SNS, invocation=2), *history.publications]
    history.invocations = {1: Invocation(1, "publisher"), 2: Invocation(2, "publisher")}
    history.explained = {("e-1", SNS, 2): CAUSE_CUT_IN_FLIGHT}
    # Then the copy is counted under that cause, and breaks no promise
    verdict = check(history)
    assert verdict.duplicates == Counter({CAUSE_CUT_IN_FLIGHT: 1})
    assert verdict.ok
    # But a cause given for another destination, or another earlier invocation, explains nothing
    history.explained = {("e-1", EVENTBRIDGE, 2): CAUSE_CUT_IN_FLIGHT, ("e-1", SNS, 1): CAUSE_CUT_IN_FLIGHT}
    assert check(history).unexplained
