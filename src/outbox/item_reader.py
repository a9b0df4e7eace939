"""Reading a low-level DynamoDB item (a row, a stream image) attribute by attribute, by type, for
`OutboxEvent.from_item`. Any attribute that is missing or of another shape raises InvalidOutboxRowError naming
it: a made-up record may hold anything where an attribute value goes.

Attribute values that are plain dicts (every stream image, every boto3 answer) take a fast path read inline;
any other mapping the general one (tests/unit/outbox/test_outbox_row_reading.py compares the two).
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from outbox.errors import InvalidOutboxRowError
from outbox.limits import MAX_WHOLE_NUMBER, Item


class ItemReader:
    """Reads an item's attributes by type; any breach raises InvalidOutboxRowError naming the field."""

    def __init__(self, item: Item) -> None:
        self._item = item

    def _value(self, name: str, kind: str) -> Any:
        attribute = self._item.get(name)
        if type(attribute) is dict and kind in attribute:
            return attribute[kind]  # the common case, without the Mapping check below (an ABC's: slow)
        if attribute is None:
            raise InvalidOutboxRowError(f"{name} is missing", field=name)
        # A made-up record may hold anything where an attribute value (a map) goes.
        if not isinstance(attribute, Mapping) or kind not in attribute:
            raise InvalidOutboxRowError(f"{name} must be of type {kind}", field=name)
        return attribute[kind]

    def string(self, name: str) -> str:
        attribute = self._item.get(name)
        if type(attribute) is dict and type(value := attribute.get("S")) is str:
            return value  # the common case, read inline: it is most of a row
        return str(self._value(name, "S"))

    def optional_string(self, name: str) -> str | None:
        return self.string(name) if name in self._item else None

    def integer(self, name: str) -> int:
        attribute = self._item.get(name)
        if type(attribute) is dict and type(value := attribute.get("N")) is str:
            text = value  # the common case, read inline, as in `string`
        else:
            text = str(self._value(name, "N"))
        if text.isascii() and text.isdigit() and len(text) <= _PLAIN_DIGITS:
            return int(text)  # the common case, read without a Decimal: the same whole number
        try:
            number = Decimal(text)
        except InvalidOperation:
            raise InvalidOutboxRowError(f"{name} is not a number", field=name) from None
        if not number.is_finite() or number != number.to_integral_value():
            raise InvalidOutboxRowError(f"{name} must be a whole number", field=name)
        # Only a made-up record holds more (DynamoDB refuses it): and int() spells no more than 4,300 digits.
        if number.copy_abs() > MAX_WHOLE_NUMBER:  # copy_abs, exact: abs() rounds to 28 digits
            raise InvalidOutboxRowError(f"{name} has more digits than a whole number may", field=name)
        return int(number)


_PLAIN_DIGITS = 18
"""Digits an N value may have to be read as a whole number directly (well within MAX_WHOLE_NUMBER)."""
