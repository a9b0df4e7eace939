"""Whole numbers and durations written as text: settings in the environment, a command's arguments.

The one way this library reads them. ASCII digits only, as everywhere in the row contract: `[0-9]`, never
`\\d` or a bare `int()`, which also take Arabic-Indic, fullwidth and every other Unicode digit (and `int()`
signs, spaces and `1_000`). Bounded, so that no number becomes a traceback further on: `int()` refuses more
than 4,300 digits, a `timedelta` overflows past 999,999,999 days, and a `datetime` past the year 9999.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Final

from outbox.errors import InvalidNumberError

MAX_DURATION: Final = timedelta(days=36_500)
"""The longest duration anything takes (100 years): whatever time it is added to or taken from stays a
datetime, and a DynamoDB TTL."""

_DIGITS = re.compile(r"[0-9]+")


def positive_whole_number(text: str, *, maximum: int) -> int:
    """`text` (ASCII digits only) as a number from 1 to `maximum`; else InvalidNumberError, saying why."""
    if _DIGITS.fullmatch(text) is None:
        raise InvalidNumberError("must be a whole number written with the digits 0-9")
    # Counted before int() reads it: int() refuses more than 4,300 digits with a ValueError of its own.
    if len(text.lstrip("0")) > len(str(maximum)) or int(text) > maximum:
        raise InvalidNumberError(f"must be at most {maximum}")
    value = int(text)
    if value < 1:
        raise InvalidNumberError(f"must be positive, got {value}")
    return value


def positive_duration(text: str, unit: timedelta) -> timedelta:
    """`text` (ASCII digits) whole `unit`s, at most MAX_DURATION; else InvalidNumberError saying why."""
    return positive_whole_number(text, maximum=MAX_DURATION // unit) * unit
