"""The one rule both local servers (the HTTP API, the moto endpoint's keep-alive handler) read a request's
`Content-Length` by."""

from __future__ import annotations

import re

_CONTENT_LENGTH = re.compile(r"[0-9]{1,19}")


def content_length(value: str) -> int | None:
    """The body's length a `Content-Length` value gives, or None if it gives none: ASCII digits only
    (`isdigit()` takes every script's), no more than a 64-bit length has (`int()` would refuse past 4,300
    digits with a ValueError, and no such length frames a request)."""
    return int(value) if _CONTENT_LENGTH.fullmatch(value) else None
