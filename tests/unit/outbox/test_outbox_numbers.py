"""Whole numbers and durations read from text (outbox.numbers), and the settings read with them
(outbox.config): ASCII digits only, bounded, every refusal typed."""

from __future__ import annotations

from datetime import timedelta

import pytest

from outbox.config import MAX_COUNT, positive_duration, positive_int
from outbox.errors import ConfigurationError, InvalidNumberError
from outbox.numbers import MAX_DURATION, positive_whole_number
from outbox.numbers import positive_duration as duration_of

DAY = timedelta(days=1)
SECOND = timedelta(seconds=1)
# Python's int() and \d read all of these as numbers: none is one here.
NOT_ASCII_WHOLE_NUMBERS = [
    pytest.param("\u0663\u0660", id="arabic-indic"),
    pytest.param("\uff13\uff10", id="fullwidth"),
    pytest.param("\u00b2", id="superscript"),
    pytest.param("1_000", id="underscores"),
    pytest.param("+60", id="plus"),
    pytest.param("-1", id="negative"),
    pytest.param("6 0", id="inner-space"),
    pytest.param("0x3c", id="hex"),
    pytest.param("1.5", id="fraction"),
    pytest.param("1e3", id="exponent"),
    pytest.param("", id="empty"),
]


@pytest.mark.parametrize("text", NOT_ASCII_WHOLE_NUMBERS)
def test_non_ascii_digits_and_other_spellings_are_not_whole_numbers(text: str) -> None:
    # Given / When / Then
    with pytest.raises(InvalidNumberError, match="digits 0-9"):
        positive_whole_number(text, maximum=10**6)


def test_a_5000_digit_number_is_too_large_not_a_value_error_of_int() -> None:
    # Given more digits than int() reads / When / Then the bound refuses it before int() does
    with pytest.raises(InvalidNumberError, match="must be at most 100"):
        positive_whole_number("9" * 5000, maximum=100)


def test_whole_numbers_are_read_up_to_their_maximum_leading_zeros_included() -> None:
    # Given / When / Then
    assert positive_whole_number("100", maximum=100) == 100
    assert positive_whole_number("0000100", maximum=100) == 100
    with pytest.raises(InvalidNumberError, match="must be at most 100"):
        positive_whole_number("101", maximum=100)
    with pytest.raises(InvalidNumberError, match="must be positive, got 0"):
        positive_whole_number("000", maximum=100)


def test_a_duration_of_more_days_than_timedelta_holds_is_refused_not_an_overflow() -> None:
    # Given / When / Then: 10^12 days overflow timedelta; 36,500 days is the longest duration taken
    with pytest.raises(InvalidNumberError, match=f"must be at most {MAX_DURATION.days}"):
        duration_of("1" + "0" * 12, DAY)
    assert duration_of(str(MAX_DURATION.days), DAY) == MAX_DURATION
    assert duration_of(str(MAX_DURATION // SECOND), SECOND) == MAX_DURATION


@pytest.mark.parametrize("raw", ["9" * 5000, "1" + "0" * 12, "99999999999999999999"])
def test_a_huge_duration_setting_is_a_configuration_error_naming_the_variable(raw: str) -> None:
    # Given / When / Then
    with pytest.raises(ConfigurationError, match=r"^D must be at most") as error:
        positive_duration({"D": raw}, "D", unit=DAY, default=7)
    assert raw not in str(error.value)


@pytest.mark.parametrize("text", NOT_ASCII_WHOLE_NUMBERS[:-1])
def test_non_ascii_digits_in_a_setting_are_a_configuration_error(text: str) -> None:
    # Given / When / Then (blank means unset: the default)
    for read in (
        lambda: positive_int({"N": text}, "N", default=5),
        lambda: positive_duration({"N": text}, "N", unit=SECOND, default=5),
    ):
        with pytest.raises(
            ConfigurationError, match=r"^N must be a whole number written with the digits 0-9$"
        ):
            read()


def test_settings_default_when_unset_and_counts_are_bounded() -> None:
    # Given / When / Then
    assert positive_duration({}, "D", unit=DAY, default=7) == timedelta(days=7)
    assert positive_duration({"D": " 30 "}, "D", unit=SECOND, default=7) == timedelta(seconds=30)
    assert positive_int({"N": str(MAX_COUNT)}, "N", default=5) == MAX_COUNT
    with pytest.raises(ConfigurationError, match=f"N must be at most {MAX_COUNT}"):
        positive_int({"N": str(MAX_COUNT + 1)}, "N", default=5)
