"""Time, injectable: domain code takes a `Clock` so tests never depend on the wall clock."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from functools import lru_cache

Clock = Callable[[], datetime]

# [0-9], not \d: \d also matches Arabic-Indic, fullwidth and every other Unicode digit.
_TIMESTAMP = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$")


def utc_now() -> datetime:
    return datetime.now(UTC)


@lru_cache(maxsize=256)
def format_timestamp(moment: datetime) -> str:
    """ISO-8601 UTC with milliseconds and a `Z`, the contract's `occurred_at` format."""
    if moment.tzinfo is None:
        raise ValueError("timestamps must be timezone-aware")
    utc = moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


@lru_cache(maxsize=4096)
def parse_timestamp(text: str) -> datetime:
    """Inverse of `format_timestamp`; raises ValueError on any other shape (TypeError on a non-string).

    Read straight from its fixed places once the shape matched (`datetime` refuses a day, hour, minute or
    second out of range, as strptime did), and cached: the publisher reads one `occurred_at` several times
    per record (the row's validation, the claim's age, the latency metric), and a datetime is immutable."""
    if not _TIMESTAMP.fullmatch(text):
        raise ValueError("timestamp must look like 2026-11-29T12:00:00.123Z")
    return datetime(
        int(text[0:4]),
        int(text[5:7]),
        int(text[8:10]),
        int(text[11:13]),
        int(text[14:16]),
        int(text[17:19]),
        int(text[20:23]) * 1000,
        tzinfo=UTC,
    )
