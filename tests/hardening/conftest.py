"""The bad-input catalogue: its Hypothesis profiles (tests/hardening/profiles.py, loaded on import, before any
test module), and its tally (tests/hardening/tally.py), written as each test process ends."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from outbox_local.moto_transactions import atomic_transactions
from tests.hardening import profiles, tally  # noqa: F401 - profiles: registered and loaded on import
from tests.hardening.orders_world import OrdersTables, orders_service
from tests.hardening.publishing import Delivery, deployed_publisher
from tests.support.aws import REGION, Tables, create_tables
from tests.support.orders import create


def pytest_sessionfinish(session: pytest.Session) -> None:
    tally.write_at_exit(os.environ.get("PYTEST_XDIST_WORKER", "main"))


# One moto world per test module, not per test: building boto3 clients and tables costs more than most inputs.
# Every input puts the tables back as it found them (tests.hardening.checks.restore), so tests can share it.


@pytest.fixture(scope="module")
def aws() -> Iterator[None]:
    """moto, with TransactWriteItems as DynamoDB runs it (the local runtime's correction): all conditions
    first, then every write or none, and no copy of the tables per call."""
    with mock_aws(), atomic_transactions():
        yield


@pytest.fixture(scope="module")
def dynamodb(aws: None) -> Any:
    return boto3.client("dynamodb", region_name=REGION)


@pytest.fixture(scope="module")
def tables(dynamodb: Any) -> Tables:
    return create_tables(dynamodb)


@pytest.fixture(scope="module")
def delivery(tables: Tables, dynamodb: Any) -> Iterator[Delivery]:
    """The publisher's deployed handler on this module's moto world (tests/hardening/publishing.py)."""
    with deployed_publisher(tables, dynamodb) as publisher:
        yield publisher


@pytest.fixture(scope="module")
def orders_api(dynamodb: Any, tables: Tables) -> Iterator[OrdersTables]:
    """The Orders API handler on this module's moto tables (tests/hardening/orders_world.py)."""
    with orders_service(dynamodb, tables):
        yield OrdersTables(dynamodb, tables)


@pytest.fixture(scope="module")
def order_id(orders_api: OrdersTables) -> str:
    """An order placed before the inputs arrive, so confirm, cancel and read reach a real one (each input puts
    it back as it was)."""
    return str(create()["order_id"])
