"""Orders on moto: the real DynamoDB adapter, an injected clock and ids, and a clean handler per test."""

from __future__ import annotations

import io
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from orders.event_schemas import load_schemas
from orders.repository import DynamoDBOrderRepository
from orders.service import OrderService
from orders_api import handler as api
from outbox.aws import client as cached_client
from outbox.schemas import SchemaRegistry
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


@pytest.fixture(scope="session")
def order_schemas() -> SchemaRegistry:
    """The sample's event schemas, as the Orders API loads them: every test's events are checked by them."""
    return load_schemas()


@pytest.fixture
def repository(dynamodb: Any, tables: Tables, order_schemas: SchemaRegistry) -> DynamoDBOrderRepository:
    return DynamoDBOrderRepository(
        dynamodb, orders_table=tables.orders, outbox_table=tables.outbox, schemas=order_schemas
    )


@pytest.fixture
def service(repository: DynamoDBOrderRepository, clock: FakeClock) -> OrderService:
    return OrderService(repository, clock=clock, new_id=SequentialIds())


@pytest.fixture
def function_log() -> Iterator[Callable[[], str]]:
    """The Orders API's log lines as Lambda would write them: Powertools' JSON, encoded to UTF-8 (a line
    that cannot be encoded is lost, as on a real stdout)."""
    buffer = io.BytesIO()
    stream = io.TextIOWrapper(buffer, encoding="utf-8", errors="strict", write_through=True)
    handler = logging.StreamHandler(stream)
    handler.setFormatter(api.logger.registered_formatter)
    api.logger.addHandler(handler)
    try:
        yield lambda: buffer.getvalue().decode()
    finally:
        api.logger.handlers.remove(handler)
