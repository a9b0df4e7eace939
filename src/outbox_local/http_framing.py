"""The rules both local servers (the HTTP API, the moto endpoint) share: how a request's `Content-Length` is
read, and how soon a server's loop notices it was asked to stop."""

from __future__ import annotations

import re

_CONTENT_LENGTH = re.compile(r"[0-9]{1,19}")

# `shutdown()` waits until the serving loop next checks; socketserver's default, 0.5 s, would add up to a
# second to every stop of a runtime (it runs both servers): 0.9 s against 0.1 s measured.
SHUTDOWN_POLL_S = 0.05


def content_length(value: str) -> int | None:
    """The body's length a `Content-Length` value gives, or None if it gives none: ASCII digits only
    (`isdigit()` takes every script's), no more than a 64-bit length has (`int()` would refuse past 4,300
    digits with a ValueError, and no such length frames a request)."""
    return int(value) if _CONTENT_LENGTH.fullmatch(value) else None
