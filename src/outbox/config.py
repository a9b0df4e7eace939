"""Reading configuration from the environment, once, at start-up.

Each function parses its own typed configuration object with these helpers; domain code never
reads `os.environ`. A missing resource name is an error, never a silent default.
"""

from __future__ import annotations

from collections.abc import Mapping

from outbox.errors import ConfigurationError


def require(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "").strip()
    if not value:
        raise ConfigurationError(f"environment variable {name} is required")
    return value


def optional(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name, "").strip()
    return value or None


def positive_int(env: Mapping[str, str], name: str, *, default: int) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigurationError(f"{name} must be a whole number, got {raw!r}") from None
    if value <= 0:
        raise ConfigurationError(f"{name} must be positive, got {value}")
    return value
