"""A pytest plugin for your own tests of code that writes or publishes outbox events on moto.

The library runs on moto as it is (the repository's tests/plain_moto prove it), but one difference can trip
an outbox test: moto 5.2's TransactWriteItems applies actions as it checks them and, when a later one fails,
puts back a copy of each table, so a test following the outbox table's stream reads a *phantom* INSERT of the
cancelled event and nothing written after it. The fixture here is moto with that corrected
(outbox_local.moto_transactions; docs/local.md, "Where moto differs from AWS").

Enable it with one line in your conftest.py, then ask for the fixture instead of `mock_aws`:

    pytest_plugins = ["outbox_local.pytest_plugin"]

    def test_a_rejected_order_announces_nothing(outbox_moto: None) -> None: ...
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from moto import mock_aws

from outbox_local.moto_sns_sizes import topic_message_sizes
from outbox_local.moto_transactions import atomic_transactions


@pytest.fixture
def outbox_moto() -> Iterator[None]:
    """moto (`mock_aws`) with TransactWriteItems as DynamoDB does it: a cancelled transaction writes and
    streams nothing; and SNS topics that take messages up to their MaximumMessageSize
    (outbox_local.moto_sns_sizes)."""
    with mock_aws(), atomic_transactions(), topic_message_sizes():
        yield
