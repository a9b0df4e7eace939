"""The process's clients: one boto3 session, one client per service and kind, each with bounded waits."""

from __future__ import annotations

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
