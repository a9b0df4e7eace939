"""Timestamps in the contract's format, and configuration read once from the environment."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from outbox.clock import format_timestamp, parse_timestamp
from outbox.config import optional, positive_int, require
from outbox.errors import ConfigurationError


def test_timestamps_are_utc_with_milliseconds_and_round_trip() -> None:
    # Given a moment in another zone
    moment = datetime(2026, 11, 29, 13, 0, 0, 123456, tzinfo=timezone(timedelta(hours=1)))
    # When / Then it is written in UTC with milliseconds and read back to the millisecond
    text = format_timestamp(moment)
    assert text == "2026-11-29T12:00:00.123Z"
    assert parse_timestamp(text) == datetime(2026, 11, 29, 12, 0, 0, 123000, tzinfo=UTC)


@pytest.mark.parametrize(
    "text", ["2026-11-29T12:00:00Z", "2026-11-29 12:00:00.123Z", "2026-11-29T12:00:00.123Z\n"]
)
def test_other_timestamp_shapes_are_refused(text: str) -> None:
    # Given / When / Then
    with pytest.raises(ValueError, match="timestamp must look like"):
        parse_timestamp(text)


def test_naive_datetimes_are_refused() -> None:
    # Given / When / Then
    with pytest.raises(ValueError, match="timezone-aware"):
        format_timestamp(datetime(2026, 1, 1))


def test_required_settings_never_default_silently() -> None:
    # Given / When / Then
    assert require({"T": " orders "}, "T") == "orders"
    for env in ({}, {"T": "  "}):
        with pytest.raises(ConfigurationError, match="T is required"):
            require(env, "T")
    assert optional({}, "T") is None


@pytest.mark.parametrize(("raw", "ok"), [("", 5), ("7", 7), ("0", None), ("-1", None), ("x", None)])
def test_positive_int_settings(raw: str, ok: int | None) -> None:
    # Given / When / Then
    if ok is None:
        with pytest.raises(ConfigurationError):
            positive_int({"N": raw}, "N", default=5)
    else:
        assert positive_int({"N": raw}, "N", default=5) == ok
