"""The Order aggregate: money, transitions and its document form. Pure: no AWS."""

from __future__ import annotations

from decimal import Decimal

import pytest

from orders.errors import InvalidTransitionError, OrderValidationError
from orders.model import (
    Command,
    Order,
    OrderLine,
    OrderStatus,
    StatusChange,
    change_at,
    format_money,
    parse_unit_price,
    seq_at,
    statuses_at,
)

NOW = "2026-11-29T12:00:00.000Z"
LATER = "2026-11-29T12:05:00.000Z"


def placed(**overrides: object) -> Order:
    arguments: dict[str, object] = {
        "order_id": "o-1",
        "customer_id": "c-1",
        "currency": "EUR",
        "lines": [OrderLine("A", 2, Decimal("9.99")), OrderLine("B", 1, Decimal("0.02"))],
        "now": NOW,
    }
    arguments.update(overrides)
    return Order.place(**arguments)  # type: ignore[arg-type]


def test_a_new_order_is_placed_at_version_1_with_seq_1_and_an_exact_total() -> None:
    # Given / When an order of 2 x 9.99 + 1 x 0.02
    order = placed()
    # Then its total is exact (no float drift) and it starts at version 1, seq 1
    assert order.total == Decimal("20.00")
    assert order.total_text == "20.00"
    assert (order.status, order.version, order.last_seq) == (OrderStatus.PLACED, 1, 1)


@pytest.mark.parametrize(
    ("start", "command", "target"),
    [
        (OrderStatus.PLACED, Command.CONFIRM, OrderStatus.CONFIRMED),
        (OrderStatus.PLACED, Command.CANCEL, OrderStatus.CANCELLED),
        (OrderStatus.CONFIRMED, Command.CANCEL, OrderStatus.CANCELLED),
    ],
)
def test_allowed_transitions_advance_status_version_and_seq(
    start: OrderStatus, command: Command, target: OrderStatus
) -> None:
    # Given an order in `start`
    order = placed()._replace(status=start, version=4, last_seq=4)
    # When `command` is applied
    after = order.apply(command, now=LATER)
    # Then the status moves, version and last_seq advance by one, the original is untouched
    assert (after.status, after.version, after.last_seq, after.updated_at) == (target, 5, 5, LATER)
    assert order.status is start


@pytest.mark.parametrize(
    ("start", "command"),
    [
        (OrderStatus.CONFIRMED, Command.CONFIRM),
        (OrderStatus.CANCELLED, Command.CONFIRM),
        (OrderStatus.CANCELLED, Command.CANCEL),
    ],
)
def test_disallowed_transitions_raise_a_typed_error(start: OrderStatus, command: Command) -> None:
    # Given an order in `start`
    order = placed()._replace(status=start)
    # When / Then the command is refused, naming the current status
    with pytest.raises(InvalidTransitionError) as raised:
        order.apply(command, now=LATER)
    assert raised.value.current == start.value
    assert not order.can(command)


def test_place_is_not_a_transition() -> None:
    # Given / When / Then: applying PLACE to an existing order is a programming error
    with pytest.raises(ValueError, match="not a transition"):
        placed().apply(Command.PLACE, now=LATER)


@pytest.mark.parametrize(
    ("amount", "currency", "text"),
    [("19.98", "EUR", "19.98"), ("5", "EUR", "5.00"), ("2000", "JPY", "2000"), ("1.5", "KWD", "1.500")],
)
def test_money_is_formatted_with_the_currency_exponent(amount: str, currency: str, text: str) -> None:
    # Given / When / Then
    assert format_money(Decimal(amount), currency) == text


@pytest.mark.parametrize(
    ("value", "currency"),
    [("1.5", "JPY"), ("1.0001", "KWD"), ("0", "EUR"), ("abc", "EUR"), (1, "EUR"), (" 1.00", "EUR")],
)
def test_unit_price_parsing_refuses_bad_text(value: object, currency: str) -> None:
    # Given / When / Then
    with pytest.raises(OrderValidationError) as raised:
        parse_unit_price(value, currency, field="items[0].unit_price")
    assert raised.value.field == "items[0].unit_price"


def test_unit_price_accepts_the_currency_decimals() -> None:
    # Given / When / Then
    assert parse_unit_price("1.234", "KWD", field="p") == Decimal("1.234")
    assert parse_unit_price("1000000", "EUR", field="p") == Decimal(1_000_000)


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"order_id": "has space"}, "order_id"),
        ({"customer_id": ""}, "customer_id"),
        ({"currency": "eur"}, "currency"),
        ({"lines": []}, "items"),
        ({"lines": [OrderLine("A", 1, Decimal(1)), OrderLine("A", 2, Decimal(1))]}, "items[1].sku"),
    ],
)
def test_place_validates_its_invariants(overrides: dict[str, object], field: str) -> None:
    # Given / When / Then
    with pytest.raises(OrderValidationError) as raised:
        placed(**overrides)
    assert raised.value.field == field


def test_document_round_trips() -> None:
    # Given a confirmed order / When it goes to a document and back / Then nothing is lost
    order = placed().apply(Command.CONFIRM, now=LATER)
    document = order.to_dict()
    assert Order.from_dict(document) == order
    assert document["items"][1] == {"sku": "B", "quantity": 1, "unit_price": "0.02"}


# --- What a version tells about an order, without reading it ----------------------------------------------


def test_the_statuses_an_order_can_have_at_each_version_follow_the_transitions() -> None:
    assert statuses_at(1) == {OrderStatus.PLACED}
    assert statuses_at(2) == {OrderStatus.CONFIRMED, OrderStatus.CANCELLED}
    assert statuses_at(3) == {OrderStatus.CANCELLED}
    assert statuses_at(4) == set()
    assert statuses_at(10**17) == set()


def test_every_walk_through_the_transitions_agrees_with_statuses_at() -> None:
    # Given every order reachable in up to 4 commands
    orders = [placed()]
    for version in range(1, 5):
        # Then the statuses at each version are exactly those statuses_at names
        assert {order.status for order in orders} == statuses_at(version)
        assert {order.last_seq for order in orders} <= {seq_at(version)}
        orders = [
            order.apply(command, now=LATER)
            for order in orders
            for command in Command
            if command is not Command.PLACE and order.can(command)
        ]


@pytest.mark.parametrize(
    ("command", "version", "previous"),
    [
        (Command.CONFIRM, 1, OrderStatus.PLACED),
        (Command.CANCEL, 1, OrderStatus.PLACED),
        (Command.CANCEL, 2, OrderStatus.CONFIRMED),
        (Command.CONFIRM, 2, None),
        (Command.CANCEL, 3, None),
    ],
)
def test_a_change_is_known_without_reading_when_the_version_tells_the_status(
    command: Command, version: int, previous: OrderStatus | None
) -> None:
    change = change_at(command, order_id="o-1", version=version, now=LATER)
    if previous is None:
        assert change is None
        return
    assert change is not None
    assert (change.previous_status, change.version, change.last_seq, change.updated_at) == (
        previous,
        version + 1,
        version + 1,
        LATER,
    )
    assert (change.expected_version, change.expected_seq) == (version, version)


def test_a_change_made_without_reading_matches_the_one_made_from_the_order() -> None:
    # Given / When a placed order is confirmed both ways
    change = change_at(Command.CONFIRM, order_id="o-1", version=1, now=LATER)
    order = placed().apply(Command.CONFIRM, now=LATER)
    # Then they agree on everything the change holds, and it round-trips
    assert change is not None
    assert (change.status, change.version, change.last_seq, change.updated_at) == (
        order.status,
        order.version,
        order.last_seq,
        order.updated_at,
    )
    assert StatusChange.from_dict(change.to_dict()) == change


def test_change_at_refuses_what_is_no_transition_and_a_bad_id() -> None:
    with pytest.raises(ValueError, match="not a transition"):
        change_at(Command.PLACE, order_id="o-1", version=1, now=NOW)
    with pytest.raises(OrderValidationError):
        change_at(Command.CONFIRM, order_id="o 1", version=1, now=NOW)
