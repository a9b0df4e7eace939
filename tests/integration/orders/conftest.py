"""Orders on moto: the real DynamoDB adapter, an injected clock and ids, and a clean handler per test."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from orders.repository import DynamoDBOrderRepository
from orders.service import OrderService
from orders_api import handler as api
from outbox.aws import client as cached_client
from tests.support.aws import Tables
from tests.support.clock import FakeClock
from tests.support.orders import SequentialIds


@pytest.fixture(autouse=True)
def fresh_handler_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The handler caches its service and boto3 client per process: each test starts cold.

    A client cached by an earlier test would point at that test's (finished) moto backend.
    """
    monkeypatch.setenv("ORDERS_TABLE_NAME", "orders")
    monkeypatch.setenv("OUTBOX_TABLE_NAME", "outbox")
    api.set_service(None)
    cached_client.cache_clear()
    yield
    api.set_service(None)
    cached_client.cache_clear()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def repository(dynamodb: Any, tables: Tables) -> DynamoDBOrderRepository:
    return DynamoDBOrderRepository(dynamodb, orders_table=tables.orders, outbox_table=tables.outbox)


@pytest.fixture
def service(repository: DynamoDBOrderRepository, clock: FakeClock) -> OrderService:
    return OrderService(repository, clock=clock, new_id=SequentialIds())
