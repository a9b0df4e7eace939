"""Time, injectable: domain code takes a `Clock` so tests never depend on the wall clock."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], datetime]

# [0-9], not \d: \d also matches Arabic-Indic, fullwidth and every other Unicode digit.
_TIMESTAMP = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$")


def utc_now() -> datetime:
    return datetime.now(UTC)


def format_timestamp(moment: datetime) -> str:
    """ISO-8601 UTC with milliseconds and a `Z`, the contract's `occurred_at` format."""
    if moment.tzinfo is None:
        raise ValueError("timestamps must be timezone-aware")
    utc = moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def parse_timestamp(text: str) -> datetime:
    """Inverse of `format_timestamp`; raises ValueError on any other shape."""
    if not _TIMESTAMP.fullmatch(text):
        raise ValueError("timestamp must look like 2026-11-29T12:00:00.123Z")
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%f%z").astimezone(UTC)
