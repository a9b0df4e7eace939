"""The core library on moto: a business item and its outbox rows commit together or not at all.

Limit violations are the library's own checks (moto does not enforce the 4 MB limit): each raises
its typed error while the transaction is built, so nothing reaches DynamoDB and nothing is written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from outbox import (
    ConditionFailedError,
    DuplicateEventError,
    DuplicateItemKeyError,
    DynamoDBTransactionExecutor,
    InvalidPayloadError,
    ItemTooLargeError,
    OutboxError,
    OutboxEvent,
    OutboxWriter,
    TableKeys,
    TooManyActionsError,
    Transaction,
    TransactionTooLargeError,
)
from outbox.limits import MAX_ITEM_BYTES, Item
from tests.support.aws import Tables, scan_all


def snapshot(dynamodb: Any, tables: Tables) -> tuple[list[Any], list[Any]]:
    def key(item: dict[str, Any]) -> str:
        return repr(sorted(item.items()))

    return (
        sorted(scan_all(dynamodb, tables.orders), key=key),
        sorted(scan_all(dynamodb, tables.outbox), key=key),
    )


def new_event(seq: int, payload: Any = None, aggregate_id: str = "o-1") -> OutboxEvent:
    return OutboxEvent.new(
        aggregate_type="Order",
        aggregate_id=aggregate_id,
        seq=seq,
        event_type="OrderPlaced",
        payload={"n": seq} if payload is None else payload,
    )


class OrderExistsError(ConditionFailedError):
    def __init__(self, label: str, index: int, old: Item | None) -> None:
        super().__init__(label, index=index)
        self.old = old


def write(dynamodb: Any, tables: Tables, *events: OutboxEvent, blob: int = 0, pk: str = "ORDER#o-1") -> None:
    """Build and execute one transaction: the order item and its events, the way a Lambda would."""
    transaction = Transaction()
    transaction.put(
        TableKeys(tables.orders, "pk"),
        {"pk": {"S": pk}, "blob": {"S": "x" * blob}},
        label="order",
        condition="attribute_not_exists(pk)",
        on_condition_failed=OrderExistsError,
    )
    OutboxWriter(tables.outbox).append(transaction, *events)
    DynamoDBTransactionExecutor(dynamodb).execute(transaction)


def test_the_business_item_and_its_rows_commit_together(dynamodb: Any, tables: Tables) -> None:
    # Given / When an order with two events is written
    write(dynamodb, tables, new_event(1), new_event(2))
    # Then the order and both rows are stored, readable back as events
    orders, outbox = snapshot(dynamodb, tables)
    assert [item["pk"]["S"] for item in orders] == ["ORDER#o-1"]
    assert sorted(OutboxEvent.from_item(row).seq for row in outbox) == [1, 2]


def test_a_failed_business_condition_writes_no_row_and_hands_over_the_old_item(
    dynamodb: Any, tables: Tables
) -> None:
    # Given an existing order
    write(dynamodb, tables, new_event(1))
    before = snapshot(dynamodb, tables)
    # When another transaction tries to create it again with a new event
    with pytest.raises(OrderExistsError) as raised:
        write(dynamodb, tables, new_event(2))
    # Then nothing was written, and the error carries the item that broke the condition (ALL_OLD)
    assert snapshot(dynamodb, tables) == before
    assert raised.value.old is not None
    assert raised.value.old["pk"] == {"S": "ORDER#o-1"}


def test_a_taken_seq_slot_writes_no_business_item(dynamodb: Any, tables: Tables) -> None:
    # Given a row already at seq 1 of aggregate o-2
    write(dynamodb, tables, new_event(1, aggregate_id="o-2"), pk="ORDER#o-2")
    before = snapshot(dynamodb, tables)
    # When a new order o-3 is written along with an event in that same slot
    with pytest.raises(DuplicateEventError):
        write(dynamodb, tables, new_event(1, aggregate_id="o-2"), pk="ORDER#o-3")
    # Then the order o-3 was not written either
    assert snapshot(dynamodb, tables) == before


LIMIT_VIOLATIONS: list[tuple[str, Callable[[Any, Tables], None], type[OutboxError]]] = [
    ("100-actions", lambda d, t: write(d, t, *(new_event(n) for n in range(1, 101))), TooManyActionsError),
    (
        "4-MB",
        # 12 rows of 360 KB: each a valid item on its own (moto caps items at 405 000 bytes), 4.3 MB in all.
        lambda d, t: write(d, t, *(new_event(n, {"pad": "y" * 360_000}) for n in range(1, 13))),
        TransactionTooLargeError,
    ),
    ("duplicate-item-keys", lambda d, t: write(d, t, new_event(1), new_event(1)), DuplicateItemKeyError),
    ("400-KB-item", lambda d, t: write(d, t, new_event(1), blob=MAX_ITEM_BYTES), ItemTooLargeError),
    (
        "payload-not-object",
        lambda d, t: write(d, t, new_event(1, payload=["a", "list"])),
        InvalidPayloadError,
    ),
]


@pytest.mark.parametrize(
    ("violation", "expected"),
    [(v, e) for _, v, e in LIMIT_VIOLATIONS],
    ids=[name for name, _, _ in LIMIT_VIOLATIONS],
)
def test_each_limit_violation_raises_its_typed_error_and_writes_nothing(
    dynamodb: Any, tables: Tables, violation: Callable[[Any, Tables], None], expected: type[OutboxError]
) -> None:
    # Given a table with one committed order
    write(dynamodb, tables, new_event(1, aggregate_id="o-0"), pk="ORDER#o-0")
    before = snapshot(dynamodb, tables)
    # When a transaction breaking one limit is attempted
    with pytest.raises(expected):
        violation(dynamodb, tables)
    # Then neither table changed
    assert snapshot(dynamodb, tables) == before


class CustomerMissingError(ConditionFailedError):
    def __init__(self, label: str, index: int, old: Item | None) -> None:
        super().__init__(label, index=index)


def test_a_condition_check_on_another_item_guards_the_whole_transaction(
    dynamodb: Any, tables: Tables
) -> None:
    # Given a transaction that writes an event only if a customer item exists (a ConditionCheck)
    def guarded(customer: str) -> None:
        transaction = Transaction()
        transaction.condition_check(
            TableKeys(tables.orders, "pk"),
            {"pk": {"S": customer}},
            "attribute_exists(pk)",
            label="customer exists",
            on_condition_failed=CustomerMissingError,
        )
        OutboxWriter(tables.outbox).append(transaction, new_event(1, aggregate_id=customer))
        DynamoDBTransactionExecutor(dynamodb).execute(transaction)

    dynamodb.put_item(TableName=tables.orders, Item={"pk": {"S": "CUSTOMER#c-1"}})
    before = snapshot(dynamodb, tables)

    # When the customer is missing, Then the declared typed error is raised and nothing is written
    with pytest.raises(CustomerMissingError) as raised:
        guarded("CUSTOMER#c-2")
    assert raised.value.index == 0
    assert snapshot(dynamodb, tables) == before

    # When the customer exists, Then the event is written (the check itself writes nothing)
    guarded("CUSTOMER#c-1")
    orders, outbox = snapshot(dynamodb, tables)
    assert orders == before[0]
    assert [OutboxEvent.from_item(row).aggregate_id for row in outbox] == ["CUSTOMER#c-1"]
