"""DynamoDB's transaction limits, enforced before anything is sent. Pure: no AWS."""

from __future__ import annotations

from typing import Any

import pytest

from outbox.errors import (
    DuplicateItemKeyError,
    InvalidEventError,
    ItemTooLargeError,
    OutboxValidationError,
    TooManyActionsError,
    TransactionTooLargeError,
)
from outbox.limits import MAX_ITEM_BYTES, MAX_TRANSACTION_BYTES, attribute_value_size, item_size
from outbox.model import OutboxEvent, OutboxStatus
from outbox.transaction import TableKeys, Transaction
from outbox.writer import OutboxWriter

ORDERS = TableKeys("orders", "pk")
OUTBOX = TableKeys("outbox", "aggregate_key", "seq")


def item(pk: str, blob_bytes: int = 0) -> dict[str, Any]:
    return {"pk": {"S": pk}, "blob": {"S": "x" * blob_bytes}}


def test_a_transaction_holds_100_actions_and_refuses_the_101st() -> None:
    # Given a transaction with 100 actions
    transaction = Transaction()
    for n in range(100):
        transaction.put(ORDERS, item(f"k{n}"), label=f"put {n}")
    # When / Then the 101st is refused and the transaction is unchanged
    with pytest.raises(TooManyActionsError):
        transaction.put(ORDERS, item("k100"), label="put 100")
    assert len(transaction) == 100


def test_a_transaction_refuses_to_grow_past_4_mb() -> None:
    # Given ten items just under 400 KB each (about 4 000 000 bytes)
    transaction = Transaction()
    for n in range(10):
        transaction.put(ORDERS, item(f"k{n}", MAX_ITEM_BYTES - 100), label=f"put {n}")
    size_before = transaction.size_bytes
    # When / Then an eleventh is refused: it would pass 4 MB
    with pytest.raises(TransactionTooLargeError):
        transaction.put(ORDERS, item("k10", MAX_ITEM_BYTES - 100), label="put 10")
    assert size_before <= MAX_TRANSACTION_BYTES
    assert (len(transaction), transaction.size_bytes) == (10, size_before)


def test_an_item_over_400_kb_is_refused() -> None:
    # Given / When / Then
    with pytest.raises(ItemTooLargeError):
        Transaction().put(ORDERS, item("k", MAX_ITEM_BYTES), label="big")


def test_two_actions_on_one_item_are_refused_but_same_key_in_another_table_is_not() -> None:
    # Given a Put on orders/k
    transaction = Transaction()
    transaction.put(ORDERS, item("k"), label="first")
    # When / Then an Update of the same item is refused ...
    with pytest.raises(DuplicateItemKeyError):
        transaction.update(
            ORDERS, {"pk": {"S": "k"}}, "SET a = :a", label="second", values={":a": {"N": "1"}}
        )
    # ... while the same key value in another table is a different item
    transaction.put(TableKeys("other", "pk"), item("k"), label="elsewhere")
    assert transaction.labels == ("first", "elsewhere")


def test_the_outbox_writer_refuses_two_events_in_one_seq_slot() -> None:
    # Given two events for the same aggregate and seq
    first = OutboxEvent.new(aggregate_type="Order", aggregate_id="o", seq=1, event_type="A", payload={})
    second = OutboxEvent.new(aggregate_type="Order", aggregate_id="o", seq=1, event_type="B", payload={})
    # When / Then appending both is refused
    with pytest.raises(DuplicateItemKeyError):
        OutboxWriter("outbox").append(Transaction(), first, second)


def test_the_outbox_writer_only_writes_pending_events() -> None:
    # Given a published event / When appended / Then refused
    published = OutboxEvent.new(
        aggregate_type="Order", aggregate_id="o", seq=1, event_type="A", payload={}
    ).with_status(OutboxStatus.PUBLISHED, expires_at=1)
    with pytest.raises(InvalidEventError):
        OutboxWriter("outbox").append(Transaction(), published)


def test_an_item_without_its_key_is_refused_naming_the_attribute() -> None:
    # Given / When / Then
    with pytest.raises(OutboxValidationError) as raised:
        Transaction().put(OUTBOX, {"aggregate_key": {"S": "Order#o"}}, label="no seq")
    assert raised.value.field == "seq"


def test_conditional_actions_ask_for_the_old_item_on_failure() -> None:
    # Given a conditional Put and an unconditional one
    transaction = Transaction()
    transaction.put(ORDERS, item("a"), label="a", condition="attribute_not_exists(pk)")
    transaction.put(ORDERS, item("b"), label="b")
    # When / Then only the conditional one requests ALL_OLD (handed to its error factory)
    conditional, plain = transaction.transact_items()
    assert conditional["Put"]["ReturnValuesOnConditionCheckFailure"] == "ALL_OLD"
    assert "ReturnValuesOnConditionCheckFailure" not in plain["Put"]


def test_item_sizes_follow_dynamodb_rules() -> None:
    # Given / When / Then: names plus values; numbers by significant digits; nested overheads
    assert item_size({"pk": {"S": "abc"}}) == 5
    assert attribute_value_size({"N": "12345"}) == 4
    assert attribute_value_size({"L": [{"S": "ab"}]}) == 3 + 1 + 2
    assert attribute_value_size({"M": {"k": {"BOOL": True}}}) == 3 + 1 + 1 + 1
    assert attribute_value_size({"SS": ["a", "bc"]}) == 3
    with pytest.raises(ValueError, match="unknown attribute value type"):
        attribute_value_size({"X": 1})


@pytest.mark.parametrize(
    ("number", "significant"),
    [
        ("0", 1),
        ("000", 1),
        ("7", 1),
        ("10", 1),
        ("1200", 2),
        ("0012", 2),
        ("1020", 3),
        ("9" * 28, 28),
        ("9" * 29, 29),  # past Decimal's default precision: not rounded
        ("9" * 38, 38),  # DynamoDB's most
        ("1" + "0" * 37, 1),
        ("1.50", 2),
        ("-10", 1),
        ("1e3", 1),
        ("0.00120", 2),
        ("-123456789012345678901234567890.12345678", 38),
    ],
)
def test_a_number_counts_its_significant_digits_exactly(number: str, significant: int) -> None:
    # Given a number's text: plain digits or not, within Decimal's 28 digits or past them
    # When / Then: one byte per two significant digits, plus one
    assert attribute_value_size({"N": number}) == (significant + 1) // 2 + 1
