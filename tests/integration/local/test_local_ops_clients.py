"""The operations' AWS session given a loopback `--endpoint-url` (outbox_ops.clients): the local runtime's
region and test credentials when nothing is configured, what is configured when something is, and nothing
changed for an endpoint that is not this machine's."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from outbox_cli.main import main
from outbox_local.runtime import LocalRuntime
from outbox_ops.clients import LocalRuntimeNotAnsweringError, OpsClients, is_loopback
from tests.support.aws import moto_server
from tests.support.local_templates import options, queue_template, write_template

STACK = "ItemsStack"


@pytest.fixture
def nothing_configured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh shell's AWS configuration: no AWS_* variable, no config or credentials file, no instance role
    reachable (the metadata endpoint is this machine's closed port, so the chain ends at once)."""
    for name in [name for name in os.environ if name.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://127.0.0.1:9")


@pytest.fixture
def eu_runtime(tmp_path: Path) -> Iterator[LocalRuntime]:
    """The local runtime running in eu-west-1 (not moto's default region)."""
    with LocalRuntime(
        options(write_template(tmp_path, queue_template()), region="eu-west-1", stack_name=STACK)
    ) as runtime:
        yield runtime


def closed_port_endpoint() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.mark.usefixtures("nothing_configured")
def test_a_loopback_endpoint_with_nothing_configured_takes_the_runtimes_region_and_test_credentials(
    eu_runtime: LocalRuntime,
) -> None:
    # When the operations connect to the runtime's endpoint with no region and no credentials anywhere
    clients = OpsClients.connect(endpoint_url=eu_runtime.endpoint_url)

    # Then they use the region the runtime runs in and the credentials it accepts, and find its stack
    assert clients.session.region_name == "eu-west-1"
    assert clients.session.get_credentials().access_key == "testing"
    (stack,) = clients.cloudformation.describe_stacks(StackName=STACK)["Stacks"]
    assert stack["StackName"] == STACK


@pytest.mark.usefixtures("nothing_configured")
def test_configured_credentials_and_region_are_used_as_they_are(
    eu_runtime: LocalRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given credentials and a region configured (as a developer's shell may have them)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIACONFIGURED")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "configured-secret")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")

    # When the operations connect to the loopback endpoint, Then nothing configured is replaced
    clients = OpsClients.connect(endpoint_url=eu_runtime.endpoint_url)
    assert clients.session.region_name == "us-west-2"
    assert clients.session.get_credentials().access_key == "AKIACONFIGURED"
    # and an explicit --region wins over the runtime's too
    assert OpsClients.connect(
        region="ap-south-1", endpoint_url=eu_runtime.endpoint_url
    ).session.region_name == ("ap-south-1")


@pytest.mark.usefixtures("nothing_configured")
def test_configured_credentials_are_kept_while_the_missing_region_is_the_runtimes(
    eu_runtime: LocalRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIACONFIGURED")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "configured-secret")
    clients = OpsClients.connect(endpoint_url=eu_runtime.endpoint_url)
    assert clients.session.region_name == "eu-west-1"
    assert clients.session.get_credentials().access_key == "AKIACONFIGURED"


@pytest.mark.usefixtures("nothing_configured")
def test_an_endpoint_that_is_not_this_machines_changes_nothing() -> None:
    # Given a real endpoint and nothing configured
    clients = OpsClients.connect(endpoint_url="https://dynamodb.eu-west-1.amazonaws.com")

    # Then the session has no region and no credentials, as boto3 found them: botocore's own errors follow
    assert clients.session.region_name is None
    assert clients.session.get_credentials() is None
    # and no endpoint at all (AWS, the default chain) changes nothing either
    assert OpsClients.connect().session.region_name is None


@pytest.mark.usefixtures("nothing_configured")
def test_a_loopback_endpoint_that_does_not_say_its_region_gets_motos_default() -> None:
    # Given a bare moto server (not the local runtime: no /_outbox/ controls)
    with moto_server() as endpoint:
        # Then the session takes moto's default region and the test credentials
        clients = OpsClients.connect(endpoint_url=endpoint)
        assert clients.session.region_name == "us-east-1"
        assert clients.session.get_credentials().access_key == "testing"


@pytest.mark.usefixtures("nothing_configured")
def test_a_loopback_endpoint_where_nothing_listens_names_the_local_cause(
    capsys: pytest.CaptureFixture[str],
) -> None:
    endpoint = closed_port_endpoint()
    with pytest.raises(LocalRuntimeNotAnsweringError, match="no local runtime answers at"):
        OpsClients.connect(endpoint_url=endpoint)

    # and `outbox status` says so, with the way out, and not that AWS did not answer
    assert main(["status", "--endpoint-url", endpoint]) == 1
    error = capsys.readouterr().err
    assert f"no local runtime answers at {endpoint}" in error
    assert "outbox local up" in error
    assert "AWS did not answer" not in error


def test_loopback_addresses_are_this_machines_only() -> None:
    for local in ("http://127.0.0.1:4566", "http://localhost:4566", "http://127.0.0.2", "http://[::1]:4566"):
        assert is_loopback(local), local
    for remote in (
        "https://dynamodb.us-east-1.amazonaws.com",
        "http://10.0.0.5:4566",
        "http://localstack:4566",
    ):
        assert not is_loopback(remote), remote


def test_nothing_listening_is_the_local_cause_even_with_everything_configured(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a region and credentials configured, and a loopback endpoint where nothing listens
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIACONFIGURED")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "configured-secret")
    endpoint = closed_port_endpoint()

    # When `outbox status` runs there, Then it says no local runtime answers, not that AWS did not
    assert main(["status", "--endpoint-url", endpoint, "--region", "us-east-1"]) == 1
    error = capsys.readouterr().err
    assert f"no local runtime answers at {endpoint}" in error
    assert "AWS did not answer" not in error


@pytest.mark.usefixtures("nothing_configured")
def test_a_loopback_aws_endpoint_url_is_the_local_runtime_as_the_flag_is(
    eu_runtime: LocalRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the runtime's endpoint exported as AWS_ENDPOINT_URL, and no region or credentials anywhere
    monkeypatch.setenv("AWS_ENDPOINT_URL", eu_runtime.endpoint_url)

    # When the operations connect without --endpoint-url
    clients = OpsClients.connect()

    # Then they take the runtime's region and test credentials, as with the flag
    assert clients.session.region_name == "eu-west-1"
    assert clients.session.get_credentials().access_key == "testing"

    # And where nothing listens at the exported address, the cause named is the local runtime
    monkeypatch.setenv("AWS_ENDPOINT_URL", closed_port_endpoint())
    with pytest.raises(LocalRuntimeNotAnsweringError, match="no local runtime answers at"):
        OpsClients.connect()
