"""What the `outbox` command says when it cannot go on: a missing subcommand or argument named as the usage
line names it (never argparse's internal `dest`), and a call that got no answer named by its local cause."""

from __future__ import annotations

import contextlib
import io

import pytest
from botocore.exceptions import (
    BotoCoreError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
    ReadTimeoutError,
)

from outbox_cli import rendering
from outbox_cli.main import main

USAGE_CASES = [
    ([], "the following arguments are required: {local,demo,trace,status,failed,redrive,skip,audit,schemas}"),
    (["schemas"], "the following arguments are required: {check}"),
    (["failed"], "the following arguments are required: {list,show}"),
    (["local"], "the following arguments are required: {up,env,fault,faults,mappings,region,regions}"),
    (["failed", "show"], "the following arguments are required: EVENT_ID"),
    (["skip", "--reason", "r"], "the following arguments are required: EVENT_ID"),
]


@pytest.mark.parametrize(
    ("argv", "says"), USAGE_CASES, ids=[" ".join(argv) or "bare" for argv, _ in USAGE_CASES]
)
def test_a_missing_command_or_argument_is_named_as_the_usage_line_names_it(
    argv: list[str], says: str
) -> None:
    # When `outbox` runs without what it needs
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exit_:
        main(argv)

    # Then it is a usage error (exit 2) naming what to add, and no internal name leaks
    assert exit_.value.code == 2
    last = err.getvalue().splitlines()[-1]
    assert last.endswith(f"error: {says}")
    assert "_command" not in err.getvalue()
    assert "event_id" not in err.getvalue()


@pytest.mark.parametrize(
    ("error", "says"),
    [
        (
            EndpointConnectionError(endpoint_url="http://localhost:4566/"),
            "nothing answers at http://localhost:4566/ (EndpointConnectionError): the local runtime is not "
            "running there; start it with `outbox local up`, or pass the --endpoint-url it prints",
        ),
        (
            ConnectTimeoutError(endpoint_url="http://[::1]:4566/"),
            "nothing answers at http://[::1]:4566/ (ConnectTimeoutError): the local runtime is not running "
            "there; start it with `outbox local up`, or pass the --endpoint-url it prints",
        ),
        (
            EndpointConnectionError(endpoint_url="https://dynamodb.eu-west-9.amazonaws.com/"),
            "nothing answers at https://dynamodb.eu-west-9.amazonaws.com/ (EndpointConnectionError): check "
            "--endpoint-url, --region and the network",
        ),
        (
            NoRegionError(),
            "no AWS region is configured (AWS was not called): pass --region, or set AWS_REGION",
        ),
        (
            NoCredentialsError(),
            "no AWS credentials found (AWS was not called): configure them (aws configure, AWS_PROFILE), or "
            "pass --profile",
        ),
        (
            ReadTimeoutError(endpoint_url="http://127.0.0.1:4566/"),
            'AWS did not answer: Read timeout on endpoint URL: "http://127.0.0.1:4566/"',
        ),
    ],
    ids=["localhost", "ipv6-loopback", "aws", "no-region", "no-credentials", "read-timeout"],
)
def test_a_call_without_an_answer_is_named_by_its_local_cause(error: BotoCoreError, says: str) -> None:
    # When a call never got an answer, Then the line says why, and what to do, in the operator's terms
    assert rendering.unanswered(error) == says
