"""`outbox local fault`, `faults` and `mappings` against a running `outbox local up` (its own process, as a
developer runs it): a fault armed from the CLI fails real AWS calls, expires or is cleared; the mappings'
state is read back."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.support.local_templates import REPOSITORY, local_up, template, write_template


@pytest.fixture
def running(tmp_path: Path) -> Iterator[str]:
    """`outbox local up` on free ports; yields its AWS endpoint once it is ready."""
    with local_up(write_template(tmp_path, template())) as started:
        yield started.endpoint
        started.process.send_signal(signal.SIGINT)
        started.process.wait(timeout=30)


def cli(endpoint: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - our own CLI
        [sys.executable, "-m", "outbox_cli.main", "local", *argv, "--endpoint-url", endpoint],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPOSITORY,
    )


def sns(endpoint: str) -> object:
    return boto3.client(
        "sns",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"total_max_attempts": 1}),
    )


def test_a_fault_armed_from_the_cli_fails_real_calls_until_cleared(running: str) -> None:
    # Given a running runtime and a throttle armed on SNS from the CLI
    armed = cli(running, "fault", "sns", "--throttle", "5m")
    assert armed.returncode == 0, armed.stderr
    client = sns(running)
    # When an SNS call is made, Then it is throttled as AWS throttles (a real error response)
    with pytest.raises(ClientError) as error:
        client.list_topics()  # type: ignore[attr-defined]
    assert error.value.response["Error"]["Code"] == "Throttling"
    # And `outbox local faults` shows the rule, with the request it failed
    [fault] = json.loads(cli(running, "faults", "--json").stdout)
    assert (fault["service"], fault["operation"], fault["injected"], fault["active"]) == ("sns", "*", 1, True)
    # When the faults are cleared, Then SNS answers again
    assert cli(running, "faults", "--clear").returncode == 0
    assert "Topics" in client.list_topics()  # type: ignore[attr-defined]


def test_a_fault_limited_to_a_number_of_requests_then_lets_them_through(running: str) -> None:
    assert (
        cli(running, "fault", "sns", "ListTopics", "--error", "InternalError", "--times", "1").returncode == 0
    )
    client = sns(running)
    with pytest.raises(ClientError):
        client.list_topics()  # type: ignore[attr-defined]
    assert "Topics" in client.list_topics()  # type: ignore[attr-defined]


def test_mappings_shows_each_mappings_state(running: str) -> None:
    # When `outbox local mappings` asks the running runtime
    result = cli(running, "mappings", "--json")
    # Then each mapping of the template is there with its counters and iterator age
    assert result.returncode == 0, result.stderr
    [mapping] = json.loads(result.stdout)
    assert mapping["kind"] == "stream"
    assert {"backlog", "iterator_age_s", "invocations", "failed_invocations", "discarded_records"} <= set(
        mapping
    )
    table = cli(running, "mappings")
    assert mapping["name"] in table.stdout


def test_the_commands_say_in_one_line_when_no_runtime_runs() -> None:
    result = cli("http://127.0.0.1:9", "faults")
    assert result.returncode == 1
    assert "is `outbox local up` running?" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
