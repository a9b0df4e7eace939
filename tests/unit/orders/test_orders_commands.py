"""Strict request parsing and the idempotency fingerprint. Pure: no AWS."""

from __future__ import annotations

from decimal import Decimal

import pytest

from orders.commands import (
    IfMatch,
    PlaceOrder,
    TransitionOrder,
    entity_tag,
    request_hash,
    validate_idempotency_key,
)
from orders.errors import OrderValidationError
from orders.model import Command
from tests.support.orders import place_body


def test_a_valid_body_parses_into_lines_with_decimal_prices() -> None:
    # Given / When the contract's example body is parsed
    command = PlaceOrder.from_json(place_body())
    # Then prices are Decimals and the canonical form renders them with the currency's decimals
    assert command.lines[0].unit_price == Decimal("9.99")
    assert command.canonical() == place_body()


def test_items_count_is_checked_before_the_items() -> None:
    # Given 51 items of which the last is also malformed
    items = [{"sku": f"S{n}", "quantity": 1, "unit_price": "1.00"} for n in range(50)] + [{}]
    # When / Then the count is what is reported
    with pytest.raises(OrderValidationError) as raised:
        PlaceOrder.from_json(place_body(items=items))
    assert raised.value.field == "items"


def test_the_same_request_hashes_the_same_whatever_its_formatting() -> None:
    # Given the same order written with keys in another order
    a = PlaceOrder.from_json(place_body())
    b = PlaceOrder.from_json(dict(reversed(list(place_body().items()))))
    # When / Then the fingerprints match
    assert request_hash(Command.PLACE, None, a.canonical()) == request_hash(
        Command.PLACE, None, b.canonical()
    )


@pytest.mark.parametrize(
    ("command", "order_id", "body"),
    [
        (Command.PLACE, None, place_body(customer_id="c-2")),
        (Command.CONFIRM, "o-1", {"expected_version": None}),
        (Command.CANCEL, "o-1", {"expected_version": None}),
        (Command.CANCEL, "o-2", {"expected_version": None}),
        (Command.CANCEL, "o-1", {"expected_version": 3}),
    ],
)
def test_any_difference_in_command_order_or_body_changes_the_hash(
    command: Command, order_id: str | None, body: dict[str, object]
) -> None:
    # Given a reference request (cancel o-1 with no expected version)
    reference = request_hash(Command.CANCEL, "o-1", {"expected_version": None})
    # When / Then a request that differs in any part has another fingerprint (or is the reference)
    same = (command, order_id, body) == (Command.CANCEL, "o-1", {"expected_version": None})
    assert (request_hash(command, order_id, body) == reference) is same


@pytest.mark.parametrize("key", ["", "a b", "x" * 129, "é", "k\n"])
def test_idempotency_keys_are_bounded_and_header_safe(key: str) -> None:
    # Given / When / Then
    with pytest.raises(OrderValidationError) as raised:
        validate_idempotency_key(key)
    assert raised.value.field == "Idempotency-Key"


def test_uuid_idempotency_keys_are_accepted() -> None:
    # Given / When / Then
    assert validate_idempotency_key("0b8f7a3c-1d2e-4f5a-8b9c-0d1e2f3a4b5c")


def test_transition_body_may_be_absent_or_carry_an_expected_version() -> None:
    # Given / When / Then
    assert TransitionOrder.from_json(Command.CONFIRM, "o-1", None).expected_version is None
    assert TransitionOrder.from_json(Command.CONFIRM, "o-1", {}).expected_version is None
    assert TransitionOrder.from_json(Command.CANCEL, "o-1", {"expected_version": 3}).expected_version == 3


@pytest.mark.parametrize(
    ("order_id", "body", "field"),
    [
        ("o 1", None, "order_id"),
        ("o-1", {"expected_version": True}, "expected_version"),
        ("o-1", {"expected_version": Decimal("1.0")}, "expected_version"),
        ("o-1", {"extra": 1}, "extra"),
        ("o-1", "text", "body"),
    ],
)
def test_invalid_transition_requests_name_the_field(order_id: str, body: object, field: str) -> None:
    # Given / When / Then
    with pytest.raises(OrderValidationError) as raised:
        TransitionOrder.from_json(Command.CONFIRM, order_id, body)
    assert raised.value.field == field


# --- If-Match (RFC 9110 section 13.1.1): "*" or quoted entity tags, compared strongly ---------------------


@pytest.mark.parametrize(
    ("header", "versions", "single"),
    [
        ('"1"', {1}, 1),
        (' "12" ', {12}, 12),
        ('"3", "1"', {1, 3}, None),
        ('"3","3"', {3}, 3),
        ('W/"1"', set(), None),  # weak: never matches
        ('W/"1", "2"', {2}, 2),
        ('"abc"', set(), None),  # a tag this API never issues
        ('"0"', set(), None),
        ('"01"', set(), None),
        ('""', set(), None),
    ],
)
def test_if_match_names_the_versions_it_accepts(header: str, versions: set[int], single: int | None) -> None:
    parsed = IfMatch.parse(header)
    assert (parsed.wildcard, parsed.versions, parsed.single_version) == (False, frozenset(versions), single)


def test_if_match_star_accepts_any_version_and_names_none() -> None:
    parsed = IfMatch.parse(" * ")
    assert parsed.wildcard
    assert parsed.matches(1)
    assert parsed.matches(99)
    assert parsed.single_version is None


@pytest.mark.parametrize(
    "header",
    [
        "",
        " ",
        "1",
        '"1',
        '1"',
        "W/1",
        '"1",',
        ', "1"',
        '*, "1"',
        '"a b"',
        '"é"',
        '"1" "2"',
        'w/"1"',
        '"' + "9" * 1030 + '"',
    ],
)
def test_a_malformed_if_match_is_a_validation_error_on_the_header(header: str) -> None:
    with pytest.raises(OrderValidationError) as raised:
        TransitionOrder.from_json(Command.CONFIRM, "o-1", None, if_match=header)
    assert raised.value.field == "If-Match"


def test_the_etag_is_the_version_quoted_and_if_match_reads_it_back() -> None:
    assert entity_tag(7) == '"7"'
    assert IfMatch.parse(entity_tag(7)).single_version == 7


def test_if_match_is_fingerprinted_only_when_sent() -> None:
    # Without the header the canonical form is what it was before If-Match existed: stored keys still replay
    assert TransitionOrder.from_json(Command.CONFIRM, "o-1", None).canonical() == {"expected_version": None}
    # With it, its tags (order and repeats aside) are part of the request
    a = TransitionOrder.from_json(Command.CONFIRM, "o-1", None, if_match='"2", "1"').canonical()
    b = TransitionOrder.from_json(Command.CONFIRM, "o-1", None, if_match='"1","2","1"').canonical()
    c = TransitionOrder.from_json(Command.CONFIRM, "o-1", None, if_match='"1"').canonical()
    assert a == b != c


@pytest.mark.parametrize(
    ("header", "body", "blind"),
    [
        ('"2"', None, 2),
        ('"2"', {"expected_version": 2}, 2),
        ('"2"', {"expected_version": 1}, None),  # they disagree: read, and judge both
        ('"1", "2"', None, None),
        ("*", None, None),
        (None, {"expected_version": 2}, None),
    ],
)
def test_a_write_is_conditioned_without_reading_only_on_one_agreed_version(
    header: str | None, body: object, blind: int | None
) -> None:
    assert TransitionOrder.from_json(Command.CANCEL, "o-1", body, if_match=header).blind_version() == blind
