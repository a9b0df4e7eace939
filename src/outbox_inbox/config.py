"""A consumer function's configuration, read from its environment once, at start-up."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import Final, TypeVar

from outbox.config import positive_duration, require
from outbox.errors import ConfigurationError
from outbox_inbox.consumer import ConsumerSettings
from outbox_inbox.inbox import (
    DEFAULT_DEDUPE_WINDOW_S,
    DEFAULT_MAX_GAP_WAIT_S,
    GapTimeout,
    InboxSettings,
    Ordering,
)

TABLE_NAME: Final = "INBOX_TABLE_NAME"
CONSUMER: Final = "INBOX_CONSUMER"
ORDERING: Final = "INBOX_ORDERING"
DEDUPE_WINDOW_SECONDS: Final = "INBOX_DEDUPE_WINDOW_SECONDS"
MAX_GAP_WAIT_SECONDS: Final = "INBOX_MAX_GAP_WAIT_SECONDS"
ON_GAP_TIMEOUT: Final = "INBOX_ON_GAP_TIMEOUT"
DEAD_LETTER_QUEUE_URL: Final = "INBOX_DEAD_LETTER_QUEUE_URL"

_Choice = TypeVar("_Choice", bound=StrEnum)


@dataclass(frozen=True, slots=True)
class ConsumerConfig:
    inbox: InboxSettings
    consumer: ConsumerSettings
    dead_letter_queue_url: str

    @classmethod
    def from_environment(cls, env: Mapping[str, str]) -> ConsumerConfig:
        return cls(
            inbox=InboxSettings(
                table_name=require(env, TABLE_NAME),
                consumer=require(env, CONSUMER),
                ordering=_choice(env, ORDERING, Ordering, Ordering.STRICT),
                dedupe_window_s=_seconds(env, DEDUPE_WINDOW_SECONDS, DEFAULT_DEDUPE_WINDOW_S),
            ),
            consumer=ConsumerSettings(
                max_gap_wait_s=_seconds(env, MAX_GAP_WAIT_SECONDS, DEFAULT_MAX_GAP_WAIT_S),
                on_gap_timeout=_choice(env, ON_GAP_TIMEOUT, GapTimeout, GapTimeout.DEAD_LETTER),
            ),
            dead_letter_queue_url=require(env, DEAD_LETTER_QUEUE_URL),
        )


def _seconds(env: Mapping[str, str], name: str, default: int) -> int:
    second = timedelta(seconds=1)
    return positive_duration(env, name, unit=second, default=default) // second


def _choice(env: Mapping[str, str], name: str, kind: type[_Choice], default: _Choice) -> _Choice:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        return kind(raw)
    except ValueError:
        allowed = ", ".join(member.value for member in kind)
        raise ConfigurationError(f"{name} must be one of {allowed}, got {raw!r}") from None
