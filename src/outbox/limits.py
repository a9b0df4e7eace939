"""DynamoDB limits the library enforces itself, before calling AWS.

moto does not enforce all of them (docs/local.md, "Where moto differs from AWS"), and failing early
with a typed error is clearer than decoding a cancelled transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

MAX_TRANSACTION_ACTIONS = 100
MAX_TRANSACTION_BYTES = 4 * 1024 * 1024
MAX_ITEM_BYTES = 400 * 1024
MAX_WHOLE_NUMBER = 10**38 - 1
"""The largest whole number DynamoDB holds exactly (38 significant digits): no seq, version or count is
larger."""

AttributeValue = Mapping[str, Any]
Item = Mapping[str, AttributeValue]


def item_size(item: Item) -> int:
    """Size of an item as DynamoDB bills and limits it: attribute names plus values."""
    size = 0
    for name, value in item.items():  # a loop, not sum() over a generator: every write sizes its items
        size += len(name.encode()) + attribute_value_size(value)
    return size


def attribute_value_size(value: AttributeValue) -> int:
    """Size of one low-level AttributeValue, following DynamoDB's published sizing rules."""
    (kind, data), *_ = value.items()
    scalar = _SCALAR_SIZE.get(kind)
    if scalar is not None:  # most values are: looked up first
        return scalar(data)
    if kind == "L":
        # 3 bytes for the list, 1 byte per element, plus the elements.
        return 3 + sum(1 + attribute_value_size(element) for element in data)
    if kind == "M":
        return 3 + sum(
            1 + len(name.encode()) + attribute_value_size(element) for name, element in data.items()
        )
    if kind in _SET_ELEMENT:
        return sum(_SCALAR_SIZE[_SET_ELEMENT[kind]](element) for element in data)
    raise ValueError(f"unknown attribute value type {kind!r}")


def _number_size(text: str) -> int:
    # About one byte per two significant digits, plus one. DynamoDB keeps up to 38 significant digits: counted
    # exactly, from the text (plain digits, as every seq, version and count is) or from the Decimal's digits
    # (its normalize() would round them to its context's 28).
    digits = text if text.isdigit() and text.isascii() else "".join(map(str, Decimal(text).as_tuple().digits))
    significant = len(digits.strip("0")) or 1
    return (significant + 1) // 2 + 1


_SCALAR_SIZE: dict[str, Callable[[Any], int]] = {
    "S": lambda text: len(str(text).encode()),
    "N": lambda number: _number_size(str(number)),
    "B": len,
    "BOOL": lambda _: 1,
    "NULL": lambda _: 1,
}
_SET_ELEMENT = {"SS": "S", "NS": "N", "BS": "B"}
