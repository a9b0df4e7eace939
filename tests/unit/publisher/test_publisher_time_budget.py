"""The time kept free at the end of an invocation covers every call that can follow the last publish: the
margin is tied here to the clients' real timeouts and attempt budgets, not to the constants that name them."""

from __future__ import annotations

from typing import Any

import pytest

from outbox.aws import invocation_client
from outbox_publisher.adapters import publishing_client
from outbox_publisher.dynamodb_rows import UPDATE_CALL_MS
from outbox_publisher.retry import DEFAULT_SAFETY_MARGIN_MS


def longest_call_ms(client: Any) -> int:
    """The longest one call of this client can take: its attempts times (connect + read timeout)."""
    config = client.meta.config
    attempts = config.retries["total_max_attempts"]
    return int(attempts * (config.connect_timeout + config.read_timeout) * 1000)


@pytest.mark.parametrize("service", ["sns", "events"])
def test_a_publish_call_makes_one_attempt(service: str) -> None:
    # Given the client the engine publishes with
    # Then botocore never retries behind the engine's back (the engine retries, within the deadline)
    assert publishing_client(service).meta.config.retries["total_max_attempts"] == 1


@pytest.mark.parametrize("service", ["sqs", "dynamodb"])
def test_calls_after_the_last_publish_each_fit_one_marking_slot(service: str) -> None:
    # Given the clients of the poison queue, the order gate's reads, claims and row updates
    client = invocation_client(service)

    # Then each call, all its attempts included, ends inside the time kept for one row update
    assert client.meta.config.retries["total_max_attempts"] == 1
    assert longest_call_ms(client) < UPDATE_CALL_MS


def test_the_safety_margin_outlasts_the_longest_call_then_one_row_update() -> None:
    # Given every client a run uses
    longest = max(
        longest_call_ms(publishing_client("sns")),
        longest_call_ms(publishing_client("events")),
        longest_call_ms(invocation_client("sqs")),
        longest_call_ms(invocation_client("dynamodb")),
    )

    # Then a call started just before the margin, followed by one row update, ends before the timeout
    assert longest + UPDATE_CALL_MS <= DEFAULT_SAFETY_MARGIN_MS
