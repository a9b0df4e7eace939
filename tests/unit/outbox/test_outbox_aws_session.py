"""The process's clients: one boto3 session, one client per service and kind, each with bounded waits."""

from __future__ import annotations

import json
from pathlib import Path

import botocore.exceptions
import botocore.loaders
import pytest

from outbox.aws import INVOCATION_CALL_S, client, invocation_client, session


@pytest.mark.parametrize("make", [client, invocation_client])
def test_a_client_is_built_once_per_process(make: object) -> None:
    assert callable(make)
    assert make("sns") is make("sns")
    assert make("sns") is not make("sqs")


def test_every_client_comes_from_the_one_session() -> None:
    assert session() is session()
    assert client("dynamodb").meta.region_name == session().region_name


def test_a_client_retries_with_bounded_waits() -> None:
    config = client("dynamodb").meta.config
    assert (config.connect_timeout, config.read_timeout) == (3, 10)
    # botocore's `max_attempts` counts retries: three after the first attempt
    assert (config.retries["mode"], config.retries["total_max_attempts"]) == ("standard", 4)


def test_an_invocation_client_makes_one_attempt_within_the_call_budget() -> None:
    config = invocation_client("dynamodb").meta.config
    assert config.retries == {"mode": "standard", "total_max_attempts": 1}
    assert config.connect_timeout + config.read_timeout == INVOCATION_CALL_S


def test_the_session_knows_the_services_botocore_ships_and_refuses_others_with_botocore_s_error() -> None:
    # Given the session's model loader, which looks for one service's directory instead of listing them all
    loader = session()._session.get_component("data_loader")
    known = loader.list_available_services("service-2")

    # Then a shipped service is among them, a name that is no directory's is not, and read whole it is
    # botocore's own list
    assert "dynamodb" in known
    assert "sqs" in known
    assert all(name not in known for name in ("nosuchservice", "", ".", "..", "dynamodb/2012-08-10", 3))
    assert list(known) == botocore.loaders.Loader().list_available_services("service-2")
    assert len(known) > 300
    # and a client of an unknown service fails as botocore says
    with pytest.raises(botocore.exceptions.UnknownServiceError, match="nosuchservice"):
        session().client("nosuchservice", region_name="us-east-1")


def test_aws_data_path_directories_are_searched_first(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Given AWS_DATA_PATH naming a directory holding a model of a service of its own
    model = tmp_path / "madeup" / "2020-01-01" / "service-2.json"
    model.parent.mkdir(parents=True)
    real = botocore.loaders.Loader().load_service_model("sqs", "service-2")
    model.write_text(json.dumps({**real, "metadata": {**real["metadata"], "endpointPrefix": "madeup"}}))
    monkeypatch.setenv("AWS_DATA_PATH", str(tmp_path))
    session.cache_clear()
    try:
        # When the session loads its model / Then it is found there
        loader = session()._session.get_component("data_loader")
        assert "madeup" in loader.list_available_services("service-2")
        assert loader.load_service_model("madeup", "service-2")["metadata"]["endpointPrefix"] == "madeup"
    finally:
        session.cache_clear()
