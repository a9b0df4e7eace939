"""Reading a row takes a fast path for attribute values that are plain dicts (every stream image, every
boto3 answer) and the general one for any other mapping: both give the same event, or the same typed error
naming the same field, whatever each attribute holds."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import pytest

from outbox.errors import InvalidOutboxRowError
from outbox.model import OutboxEvent
from tests.support.events import event

ROW = event("reading", 3, payload={"n": 1, "p": "9.99", "nested": {"list": [1.5, None, True]}}).to_item()
ROW_WITH_OPTIONALS = ROW | {
    "correlation_id": {"S": "req-1"},
    "last_error": {"S": "earlier"},
    "status": {"S": "PUBLISHED"},
    "expires_at": {"N": "1800000000"},
}

# Every DynamoDB attribute type, and what a made-up record may hold where an attribute value goes.
VALUES: list[Any] = [
    {"S": "text"},
    {"S": ""},
    {"S": "Order"},
    {"S": 7},
    {"S": None},
    {"N": "1"},
    {"N": "0"},
    {"N": "-1"},
    {"N": "1.5"},
    {"N": "1e3"},
    {"N": "9" * 19},
    {"N": "9" * 39},
    {"N": "٣"},
    {"N": "NaN"},
    {"N": 12},
    {"B": b"bytes"},
    {"BOOL": True},
    {"NULL": True},
    {"M": {"S": {"S": "x"}}},
    {"L": [{"S": "x"}]},
    {"SS": ["a"]},
    {"NS": ["1"]},
    {"BS": [b"x"]},
    {"S": "x", "N": "1"},
    {},
    "S",
    1,
    None,
    ["S"],
]


def _proxied(item: Mapping[str, Any]) -> Mapping[str, Any]:
    """The same row with every mapping a read-only proxy, no dict: the general path everywhere."""
    return MappingProxyType(
        {name: MappingProxyType(value) if isinstance(value, dict) else value for name, value in item.items()}
    )


def _read(item: Mapping[str, Any]) -> tuple[str, Any]:
    try:
        return "event", OutboxEvent.from_item(item)
    except InvalidOutboxRowError as error:
        return "invalid", (str(error), error.field)


@pytest.mark.parametrize("row", [ROW, ROW_WITH_OPTIONALS], ids=["minimal", "with-optionals"])
@pytest.mark.parametrize("name", sorted(ROW_WITH_OPTIONALS))
@pytest.mark.parametrize("value", [*VALUES, "missing"], ids=repr)
def test_the_fast_path_reads_every_attribute_value_as_the_general_path_does(
    row: dict[str, Any], name: str, value: Any
) -> None:
    # Given a row with one attribute replaced (or left out)
    item = {key: attribute for key, attribute in row.items() if key != name}
    if value != "missing":
        item[name] = value
    # When it is read from dicts (the fast path) and from other mappings (the general path)
    fast, general = _read(item), _read(_proxied(item))
    # Then both give the same event, or the same error naming the same field
    assert fast == general
    if fast[0] == "event":
        assert fast[1].to_item() == general[1].to_item()
        assert fast[1].envelope_json() == general[1].envelope_json()


@pytest.mark.parametrize("row", [ROW, ROW_WITH_OPTIONALS], ids=["minimal", "with-optionals"])
def test_a_well_formed_row_is_read_alike_on_both_paths(row: dict[str, Any]) -> None:
    fast, general = OutboxEvent.from_item(row), OutboxEvent.from_item(_proxied(row))
    assert fast == general
    assert fast.envelope_json() == general.envelope_json()
