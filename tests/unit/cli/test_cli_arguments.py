"""The `outbox` command's own arguments (hardening catalogue findings): what Python would read, overflow on or
pass to botocore is a usage error (exit 2) with a reason, before any AWS call; never a traceback."""

from __future__ import annotations

import contextlib
import io

import pytest

from outbox.limits import MAX_WHOLE_NUMBER
from outbox_cli.main import build_parser, main

WHERE = ["--table", "outbox", "--region", "us-east-1"]


def usage_error(argv: list[str]) -> str:
    """Runs `outbox ARGV`, which must exit 2 without a traceback; returns what it said."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as exit_:  # argparse refusing an argument
            code = exit_.code if isinstance(exit_.code, int) else -1
    assert code == 2, (argv, err.getvalue())
    assert "Traceback" not in err.getvalue()
    return err.getvalue()


DURATION_FLAGS = [
    pytest.param(["status", "--stuck-after"], id="stuck-after"),
    pytest.param(["status", "--degraded-after"], id="degraded-after"),
    pytest.param(["purge-published", "--older-than"], id="older-than"),
]


@pytest.mark.parametrize("flag", DURATION_FLAGS)
@pytest.mark.parametrize(
    ("text", "says"),
    [
        pytest.param("99999999999d", "at most 36500d", id="past-timedelta"),
        pytest.param("9" * 5000 + "s", "at most 3153600000s", id="5000-digits"),
        pytest.param("36501d", "at most 36500d", id="a-day-too-long"),
    ],
)
def test_a_duration_longer_than_timedelta_holds_is_a_usage_error_not_an_overflow(
    flag: list[str], text: str, says: str
) -> None:
    # Given / When / Then
    assert f"a duration must be {says}" in usage_error([*flag, text, *WHERE])


@pytest.mark.parametrize("flag", DURATION_FLAGS)
@pytest.mark.parametrize("text", ["\u0661\u0665m", "\uff11\uff15m", "1_5m", "\u00b2m"])
def test_non_ascii_digits_in_a_duration_are_a_usage_error(flag: list[str], text: str) -> None:
    # Given / When / Then
    assert "is not a duration like 90s, 15m, 12h or 30d" in usage_error([*flag, text, *WHERE])


def test_a_zero_duration_keeps_its_words() -> None:
    # Given / When / Then
    assert "a duration must be longer than 0" in usage_error(
        ["purge-published", "--older-than", "000d", *WHERE]
    )


@pytest.mark.parametrize(
    ("seq", "says"),
    [
        pytest.param("9" * 5000, f"it must be at most {MAX_WHOLE_NUMBER}", id="5000-digits"),
        pytest.param("\u0662", "it must be a whole number written with the digits 0-9", id="arabic-indic"),
        pytest.param("\uff12", "it must be a whole number written with the digits 0-9", id="fullwidth"),
        pytest.param("\u00b2", "it must be a whole number written with the digits 0-9", id="superscript"),
        pytest.param("1_000", "it must be a whole number written with the digits 0-9", id="underscores"),
        pytest.param("0", "it must be positive, got 0", id="zero"),
    ],
)
def test_a_seq_int_cannot_read_or_not_in_ascii_digits_is_a_usage_error(seq: str, says: str) -> None:
    # Given / When / Then
    said = usage_error(["skip", "--missing", "Order#1", seq, "--reason", "r", *WHERE])
    assert said == f"outbox: SEQ must be a whole number >= 1: {says}\n"


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["status", "--table", "outbox"], id="status"),
        pytest.param(["failed", "list", "--table", "outbox"], id="failed-list"),
        pytest.param(["local", "env"], id="local-env"),
    ],
)
@pytest.mark.parametrize("region", ["", "  "])
def test_an_empty_region_is_a_usage_error_not_a_botocore_value_error(argv: list[str], region: str) -> None:
    # Given / When / Then
    assert "a region must be named, e.g. us-east-1" in usage_error([*argv, "--region", region])


LOCAL_COMMANDS = [pytest.param(["local", "up"], id="local-up"), pytest.param(["demo"], id="demo")]


@pytest.mark.parametrize("command", LOCAL_COMMANDS)
@pytest.mark.parametrize("flag", ["--aws-port", "--api-port"])
@pytest.mark.parametrize(
    "text",
    ["65536", "99999", "-1", "\u0668\u0660\u0668\u0660", "\uff18\uff10\uff18\uff10", "80.0", "", "1e3"],
)
def test_a_port_outside_0_to_65535_or_not_in_ascii_digits_is_a_usage_error(
    command: list[str], flag: str, text: str
) -> None:
    assert "is not a port: 0 (any free port) to 65535" in usage_error([*command, flag, text])


@pytest.mark.parametrize("command", LOCAL_COMMANDS)
@pytest.mark.parametrize(
    "text", ["0", "0.0", "inf", "nan", "1e3", "-2", "3601", "\u0661\u0662", "1_000", " 2"]
)
def test_a_schedule_speedup_not_a_positive_ascii_number_up_to_3600_is_a_usage_error(
    command: list[str], text: str
) -> None:
    assert "is not a speed-up: a number above 0 and at most 3600" in usage_error(
        [*command, "--schedule-speedup", text]
    )


@pytest.mark.parametrize("text", ["0", "65", "\u0664", "1e2", "4.0", "9" * 5000])
def test_max_environments_not_1_to_64_in_ascii_digits_is_a_usage_error(text: str) -> None:
    said = usage_error(["local", "up", "--max-environments", text])
    assert "--max-environments" in said


def test_the_local_flags_take_what_they_name() -> None:
    arguments = build_parser().parse_args(
        [
            "local",
            "up",
            "--aws-port",
            "0",
            "--api-port",
            "65535",
            "--schedule-speedup",
            "12.5",
            "--max-environments",
            "64",
        ]
    )
    assert (
        arguments.aws_port,
        arguments.api_port,
        arguments.schedule_speedup,
        arguments.max_environments,
    ) == (
        0,
        65535,
        12.5,
        64,
    )
