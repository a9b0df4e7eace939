"""The `outbox` command's own arguments (hardening catalogue findings): what Python would read, overflow on or
pass to botocore is a usage error (exit 2) with a reason, before any AWS call; never a traceback."""

from __future__ import annotations

import contextlib
import io
from datetime import timedelta

import pytest

from outbox_cli.main import build_parser, main
from outbox_ops.status import StatusThresholds

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
    pytest.param(["status", "--takeover-after"], id="takeover-after"),
    pytest.param(["status", "--degraded-after"], id="degraded-after"),
    pytest.param(["status", "--scan-for"], id="scan-for"),
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
    assert "a duration must be longer than 0" in usage_error(["status", "--scan-for", "000s", *WHERE])


def test_status_reads_the_table_for_the_scan_for_it_is_given_or_the_default() -> None:
    # Given / When
    given = build_parser().parse_args(["status", "--scan-for", "2m", *WHERE])
    default = build_parser().parse_args(["status", *WHERE])

    # Then
    assert (given.scan_for, default.scan_for) == (timedelta(minutes=2), StatusThresholds().scan_for)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("us-east-1", "is not a list of two regions or more"),
        ("us-east-1,us-east-1", "is not a list of two regions or more"),
        ("us-east-1,", "is not a list of two regions or more"),
        ("us-east-1,US West", "is not a region's name"),
    ],
)
def test_regions_that_are_not_two_distinct_region_names_are_a_usage_error(text: str, said: str) -> None:
    # Given / When / Then
    assert said in usage_error(["status", "--regions", text, *WHERE])


def test_status_takes_the_regions_and_the_takeover_time_it_is_given() -> None:
    # Given / When
    given = build_parser().parse_args(
        ["status", "--regions", "us-east-1, us-west-2", "--takeover-after", "15m", *WHERE]
    )
    default = build_parser().parse_args(["status", *WHERE])

    # Then the regions are normalized, home first; without them, the stack's outputs decide
    assert (given.regions, given.takeover_after) == ("us-east-1,us-west-2", timedelta(minutes=15))
    assert (default.regions, default.takeover_after) == (None, None)


def test_audit_takes_an_aggregate_and_shows_payloads_only_when_asked() -> None:
    # Given / When
    narrowed = build_parser().parse_args(["audit", "--aggregate", "Order#42", "--show-payload", *WHERE])
    everything = build_parser().parse_args(["audit", *WHERE])

    # Then
    assert (narrowed.aggregate, narrowed.show_payload) == ("Order#42", True)
    assert (everything.aggregate, everything.show_payload) == (None, False)


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        pytest.param(
            ["purge-published", "--older-than", "30d"],
            "invalid choice: 'purge-published'",
            id="purge-published",
        ),
        pytest.param(["failed", "reindex"], "invalid choice: 'reindex'", id="failed-reindex"),
        pytest.param(
            ["skip", "--missing", "Order#1", "2", "--reason", "r"],
            "unrecognized arguments: --missing",
            id="skip-missing",
        ),
    ],
)
def test_the_commands_the_table_no_longer_needs_are_usage_errors(argv: list[str], says: str) -> None:
    # Given / When / Then: refused before any AWS call, not taken for something else
    assert says in usage_error([*argv, *WHERE])


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["status", "--table", "outbox"], id="status"),
        pytest.param(["failed", "list", "--table", "outbox"], id="failed-list"),
        pytest.param(["audit", "--table", "outbox"], id="audit"),
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
