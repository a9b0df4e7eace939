"""Reading configuration from the environment, once, at start-up.

Each function parses its own typed configuration object with these helpers; domain code never
reads `os.environ`. A missing resource name is an error, never a silent default. Numbers and durations are
read by `outbox.numbers` (ASCII digits, bounded); each refusal is a ConfigurationError naming the variable.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Final, TypeVar

from outbox.errors import ConfigurationError, InvalidNumberError
from outbox.numbers import positive_duration as _duration
from outbox.numbers import positive_whole_number

MAX_COUNT: Final = 2**31 - 1
"""The largest count a setting takes (rows, attempts): the largest Integer AWS APIs take, far past any use."""

_Value = TypeVar("_Value")


def require(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "").strip()
    if not value:
        raise ConfigurationError(f"environment variable {name} is required")
    return value


def optional(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name, "").strip()
    return value or None


def positive_int(env: Mapping[str, str], name: str, *, default: int) -> int:
    """A count: a whole number from 1 to MAX_COUNT, or `default` when unset."""
    return _setting(env, name, lambda raw: positive_whole_number(raw, maximum=MAX_COUNT), default)


def positive_duration(env: Mapping[str, str], name: str, *, unit: timedelta, default: int) -> timedelta:
    """A duration: whole `unit`s (the variable's name says which), at most outbox.numbers.MAX_DURATION;
    `default` units when unset."""
    return _setting(env, name, lambda raw: _duration(raw, unit), default * unit)


def _setting(env: Mapping[str, str], name: str, parse: Callable[[str], _Value], default: _Value) -> _Value:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        return parse(raw)
    except InvalidNumberError as error:
        raise ConfigurationError(f"{name} {error}") from None
