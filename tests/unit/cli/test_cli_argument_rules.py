"""Every name, id, text, number and endpoint the `outbox` command takes (outbox_cli.arguments): a value
outside its rule is a usage error (exit 2) naming the argument, before any call to AWS or to the local
runtime; a value inside it is taken as given."""

from __future__ import annotations

import argparse
import contextlib
import io
from pathlib import Path
from typing import Any, NoReturn

import pytest
from botocore.parsers import ResponseParserError

from outbox_cli import arguments, local_controls, operations
from outbox_cli.main import build_parser, main

WHERE = ["--table", "outbox", "--region", "us-east-1"]
EVENT_ID = "00000000-0000-4000-8000-000000000001"


@pytest.fixture(autouse=True)
def no_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any call to AWS (operations) or to the local runtime's controls fails the test."""

    def called(*_args: Any, **_kwargs: Any) -> NoReturn:
        raise AssertionError("called before the arguments were refused")

    monkeypatch.setattr(operations, "_connect", called)
    monkeypatch.setattr(local_controls, "call", called)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)


def refused(argv: list[str]) -> str:
    """Runs `outbox ARGV`, which must exit 2 without a traceback; returns what it said."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else -1
    assert code == 2, (argv, err.getvalue())
    assert "Traceback" not in err.getvalue()
    return err.getvalue()


# (the arguments before the value, the flag argparse names, the value, what it says)
CASES = [
    # The hardening catalogue's finding: a control character in a stack name reached DescribeStacks, whose
    # answer botocore could not parse (ResponseParserError).
    (["skip", EVENT_ID, "--reason", "r", "--stack"], "--stack", "\x08", "CloudFormation stack name"),
    (["status", "--stack"], "--stack", "", "CloudFormation stack name"),
    (["status", "--stack"], "--stack", "1-stack", "CloudFormation stack name"),
    (["status", "--stack"], "--stack", "a" * 129, "CloudFormation stack name"),
    (["status", "--stack"], "--stack", "Orders_Outbox", "CloudFormation stack name"),
    (["status", "--outbox"], "--outbox", "Refunds-1", "is not an outputs prefix"),
    (["status", "--outbox"], "--outbox", "R" * 201, "is not an outputs prefix"),
    (["status", "--stack"], "--stack", "\uff2f\uff52\uff44\uff45\uff52\uff53", "CloudFormation stack name"),
    (["status", "--table"], "--table", "ab", "DynamoDB table name"),
    (["status", "--table"], "--table", "a b", "DynamoDB table name"),
    (["status", "--table"], "--table", "t" * 256, "DynamoDB table name"),
    (["status", "--table"], "--table", "tab\x00le", "DynamoDB table name"),
    (["skip", EVENT_ID, "--reason"], "--reason", "", "a reason is required"),
    (["redrive", "--all", "--reason"], "--reason", "   ", "a reason is required"),
    (["skip", EVENT_ID, "--reason"], "--reason", "two\nlines", "printable characters"),
    (["skip", EVENT_ID, "--reason"], "--reason", "\u202eevil", "printable characters"),
    (["skip", EVENT_ID, "--reason"], "--reason", "r" * 1025, "printable characters"),
    (["skip"], "EVENT_ID", "\x00", "without NUL"),
    (["failed", "show"], "EVENT_ID", "", "without NUL"),
    (["redrive", "--reason", "r", "--event-id"], "--event-id", "\x00", "without NUL"),
    (["audit", "--aggregate"], "--aggregate", "Order#\x00", "without NUL"),
    (["audit", "--aggregate"], "--aggregate", "O" * 1025, "without NUL"),
    (["status", "--table"], "--table", "arn:aws:dynamodb:us-east-1:1:table/Outbox", "DynamoDB table name"),
    (["failed", "list", "--event-type"], "--event-type", "", "printable characters"),
    (["failed", "list", "--error-contains"], "--error-contains", "\x1b[31m", "printable characters"),
    (["status", "--profile"], "--profile", "\x00", "printable characters"),
    (["status", "--region"], "--region", "not a region!", "is not a region's name"),
    (["status", "--region"], "--region", "", "a region must be named"),
    (["status", "--endpoint-url"], "--endpoint-url", "not a url", "is not a URL"),
    (["status", "--endpoint-url"], "--endpoint-url", "ftp://127.0.0.1", "is not a URL"),
    (["status", "--endpoint-url"], "--endpoint-url", "http://", "is not a URL"),
    (["status", "--endpoint-url"], "--endpoint-url", "http://127.0.0.1:99999", "is not a URL"),
    (["status", "--endpoint-url"], "--endpoint-url", "http://127.0.0.1:\uff18\uff10", "is not a URL"),
    (["status", "--poison-queue-url"], "--poison-queue-url", "not a url", "is not a URL"),
    (["status", "--on-failure-queue-url"], "--on-failure-queue-url", "https://sqs/1/a b", "is not a URL"),
    (["status", "--poison-queue-url"], "--poison-queue-url", "https://sqs/1/", "is not a queue URL"),
    (["status", "--publisher-function"], "--publisher-function", "a b", "Lambda function"),
    (["status", "--sweeper-function"], "--sweeper-function", "f" * 65, "Lambda function"),
    (["local", "env", "--endpoint-url"], "--endpoint-url", "127.0.0.1:4566", "is not a URL"),
    (["local", "faults", "--endpoint-url"], "--endpoint-url", "", "is not a URL"),
    (["local", "mappings", "--endpoint-url"], "--endpoint-url", "http://h\x00", "is not a URL"),
    (["local", "up", "--host"], "--host", "a host", "is not a host name"),
    (["local", "up", "--template"], "--template", "", "is not a file's path"),
    (["demo", "--template"], "--template", "cdk.out/\x00", "is not a file's path"),
    # `local fault`: the catalogue's findings (a full-width digit, an exponent, a status no HTTP has)
    (["local", "fault", "sns", "--times"], "--times", "\uff13", "whole number from 1 to 2147483647"),
    (["local", "fault", "sns", "--times"], "--times", "1e23", "whole number from 1 to 2147483647"),
    (["local", "fault", "sns", "--times"], "--times", "0", "whole number from 1 to 2147483647"),
    (["local", "fault", "sns", "--times"], "--times", "-1", "whole number from 1 to 2147483647"),
    (["local", "fault", "sns", "--times"], "--times", "2147483648", "whole number from 1 to 2147483647"),
    (["local", "fault", "sns", "--times"], "--times", "9" * 5000, "whole number from 1 to 2147483647"),
    (["local", "fault", "sns", "--status"], "--status", "99999", "whole number from 400 to 599"),
    (["local", "fault", "sns", "--status"], "--status", "200", "whole number from 400 to 599"),
    (["local", "fault", "sns", "--status"], "--status", "\uff15\uff10\uff10", "whole number from 400 to 599"),
    (["local", "fault", "sns", "--status"], "--status", "5e2", "whole number from 400 to 599"),
    (["local", "fault", "sns", "--for"], "--for", "1e23s", "is not a duration"),
    (["local", "fault", "sns", "--throttle"], "--throttle", "99999999999d", "a duration must be at most"),
    (["local", "fault", "sns", "--error"], "--error", "Internal Error", "is not an AWS error code"),
    (["local", "fault"], "service", "SNS!", "is not a service's signing name"),
    (["local", "fault"], "service", "", "is not a service's signing name"),
    (["local", "fault", "sns"], "operation", "Publish\x00Batch", "is not an operation's name"),
]


@pytest.mark.parametrize(
    ("before", "flag", "value", "says"),
    CASES,
    ids=[f"{before[0]}-{flag}-{value[:12]!r}" for before, flag, value, _ in CASES],
)
def test_a_value_outside_its_rule_is_a_usage_error_naming_the_argument_before_any_call(
    before: list[str], flag: str, value: str, says: str
) -> None:
    # Given an argument outside its rule (everything else well-formed)
    where = WHERE if before[0] in {"status", "failed", "redrive", "skip", "audit"} else []
    # When / Then exit 2 before any call, naming the argument and the rule
    said = refused([*before, value, *where])
    assert f"argument {flag}" in said, said
    assert says in said, said


def test_the_default_endpoint_of_the_local_controls_is_checked_too(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given AWS_ENDPOINT_URL (the default of --endpoint-url) that is no URL / When / Then
    monkeypatch.setenv("AWS_ENDPOINT_URL", "not a url")
    parser = build_parser()  # reads the environment for the default
    with contextlib.redirect_stderr(io.StringIO()) as err, pytest.raises(SystemExit) as exit_:
        parser.parse_args(["local", "faults"])
    assert (exit_.value.code, "argument --endpoint-url" in err.getvalue()) == (2, True)


def test_values_inside_their_rules_are_taken_as_given() -> None:
    # Given names and texts at the edges of their rules / When
    parsed = build_parser().parse_args(
        [
            "redrive",
            "--event-id",
            "legacy id (another writer's)",
            "--reason",
            "r" * 1024,
            "--stack",
            "A" + "-" * 127,
            "--table",
            "a.b",
            "--region",
            "eu-west-1",
            "--endpoint-url",
            "http://[::1]:4566/",
            "--poison-queue-url",
            "https://sqs.us-east-1.amazonaws.com/123456789012/poison.fifo",
            "--publisher-function",
            "arn:aws:lambda:us-east-1:123456789012:function:publisher:$LATEST",
            "--sweeper-function",
            "sweeper",
            "--profile",
            "prod eu",
        ]
    )
    # Then
    assert (parsed.event_id, parsed.stack, parsed.table, parsed.endpoint_url) == (
        ["legacy id (another writer's)"],
        "A" + "-" * 127,
        "a.b",
        "http://[::1]:4566/",
    )


@pytest.mark.parametrize(
    ("argv", "attribute", "value"),
    [
        # an aggregate id may hold any character the writer accepts: a no-break space, a joiner, a tab
        (["audit", "--aggregate"], "aggregate", "Order#a\u00a0b\u200dc\td"),
        (["redrive", "--reason", "r", "--aggregate"], "aggregate", "Order#\u00ad42"),
        (
            [
                "skip",
                "--reason",
                "r",
                "--",
            ],
            "event_id",
            "id\nfrom another writer",
        ),
        # names or ARNs, as the APIs the commands call take them
        (["status", "--table"], "table", "arn:aws:dynamodb:us-east-1:123456789012:table/Outbox"),
        (["status", "--table"], "table", "arn:aws-us-gov:dynamodb:us-gov-west-1:123456789012:table/a.b"),
        (
            ["status", "--stack"],
            "stack",
            "arn:aws:cloudformation:us-east-1:123456789012:stack/OutboxStack/5b8f-11ec-9a6c-0a1b2c3d4e5f",
        ),
        (["status", "--publisher-function"], "publisher_function", "123456789012:function:publisher"),
    ],
)
def test_identifiers_and_arns_the_aws_apis_take_are_taken_as_given(
    argv: list[str], attribute: str, value: str
) -> None:
    # Given a value another writer or AWS may use / When it is passed / Then it is taken as given
    assert getattr(build_parser().parse_args([*argv, value]), attribute) == value


def test_local_fault_takes_its_bounds_and_defaults() -> None:
    # Given / When
    lowest = build_parser().parse_args(["local", "fault", "sns", "--times", "1", "--status", "400"])
    highest = build_parser().parse_args(
        ["local", "fault", "dynamodb-streams", "GetRecords", "--times", "2147483647", "--status", "599"]
    )
    plain = build_parser().parse_args(["local", "fault", "events", "--error", "AWS.SimpleQueueService.X"])
    # Then
    assert (lowest.times, lowest.status, lowest.operation) == (1, 400, "*")
    assert (highest.times, highest.status, highest.operation) == (2147483647, 599, "GetRecords")
    assert (plain.times, plain.status, plain.error) == (None, None, "AWS.SimpleQueueService.X")


def test_local_up_takes_a_host_and_a_template() -> None:
    parsed = build_parser().parse_args(["local", "up", "--host", "::1", "--template", "t.json"])
    assert (parsed.host, parsed.template) == ("::1", Path("t.json"))


@pytest.mark.parametrize("value", ["", "9" * 5000, "\u0661", "+1", " 1", "1.0"])
def test_whole_number_refuses_what_int_would_read_or_overflow_on(value: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="is not a whole number from 2 to 9"):
        arguments.whole_number(2, 9)(value)


def test_an_answer_botocore_cannot_read_is_a_failure_with_its_reason_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given an endpoint whose answer botocore cannot parse (ResponseParserError is no BotoCoreError)
    def unreadable(*_args: Any) -> NoReturn:
        raise ResponseParserError("Unable to parse response (not well-formed)")

    monkeypatch.setattr(operations, "_connect", unreadable)
    err = io.StringIO()
    # When
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["status", *WHERE])
    # Then exit 1, one line saying so
    assert (code, err.getvalue()) == (
        1,
        "outbox: AWS's answer could not be read: Unable to parse response (not well-formed)\n",
    )
