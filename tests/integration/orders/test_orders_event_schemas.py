"""The sample's event schemas accept every payload the Orders service builds, and a refusal writes nothing.

The API's own validation (400) is the first line: a schema refusal behind it would be a bug in the sample.
So each test here drives the real service and repository (with the schemas the API loads) over the edges of
what the API accepts: every minor-unit exponent, the largest and smallest amounts, the longest ids, the most
lines, every transition. Every other orders test runs through the same schemas (conftest's repository).
"""

from __future__ import annotations

from typing import Any

import pytest

from orders.commands import PlaceOrder, TransitionOrder
from orders.event_schemas import SCHEMA_DIRECTORY
from orders.model import MAX_LINES, MAX_QUANTITY, Command
from orders.service import EVENT_TYPES, SCHEMA_VERSION, OrderService
from outbox.errors import SchemaViolationError
from outbox.model import OutboxEvent
from outbox.schemas import SchemaKey, SchemaRegistry, read_schema_files
from tests.support.aws import Tables
from tests.support.orders import outbox_rows, snapshot


def lines(count: int, unit_price: str, quantity: int) -> list[dict[str, Any]]:
    return [{"sku": f"S.k_u-{n}", "quantity": quantity, "unit_price": unit_price} for n in range(count)]


EDGES = [
    {"customer_id": "c", "currency": "JPY", "items": lines(1, "1", 1)},
    {"customer_id": "c" * 64, "currency": "USD", "items": lines(MAX_LINES, "1000000", MAX_QUANTITY)},
    {"customer_id": "a.b_c:d-e", "currency": "KWD", "items": lines(3, "0.001", 7)},
    {"customer_id": "Z9", "currency": "CLF", "items": lines(2, "999999.9999", MAX_QUANTITY)},
    {
        "customer_id": "x",
        "currency": "EUR",
        "items": [{"sku": "A" * 64, "quantity": 1, "unit_price": "0.01"}],
    },
]


def test_the_sample_has_one_schema_per_event_it_emits() -> None:
    # Then every event type the service emits, at its version, has its file, and no file is left over
    emitted = {SchemaKey(event_type, SCHEMA_VERSION) for event_type in EVENT_TYPES.values()}
    assert set(read_schema_files(SCHEMA_DIRECTORY)) == emitted


@pytest.mark.parametrize("body", EDGES, ids=[str(body["currency"]) for body in EDGES])
def test_every_payload_at_the_edges_of_the_api_passes_its_schema(
    service: OrderService, dynamodb: Any, tables: Tables, body: dict[str, Any]
) -> None:
    # Given an order at the edge of what the API accepts, confirmed, and another cancelled straight away
    confirmed = service.place(PlaceOrder.from_json(body)).order.order_id
    service.confirm(TransitionOrder.from_json(Command.CONFIRM, confirmed, {}))
    service.cancel(TransitionOrder.from_json(Command.CANCEL, confirmed, {}))
    cancelled = service.place(PlaceOrder.from_json(body)).order.order_id
    service.cancel(TransitionOrder.from_json(Command.CANCEL, cancelled, {}))
    # Then every event was written: the schemas refused none of them
    types = [row["event_type"]["S"] for row in outbox_rows(dynamodb, tables, confirmed)]
    assert types == ["OrderPlaced", "OrderConfirmed", "OrderCancelled"]
    assert [row["event_type"]["S"] for row in outbox_rows(dynamodb, tables, cancelled)] == [
        "OrderPlaced",
        "OrderCancelled",
    ]


def test_a_payload_its_schema_refuses_writes_nothing(
    service: OrderService,
    dynamodb: Any,
    tables: Tables,
    order_schemas: SchemaRegistry,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a service whose payload builder has a bug: the total goes out as a number, not a decimal string
    before = snapshot(dynamodb, tables)
    real_new = OutboxEvent.new

    def buggy_new(**fields: Any) -> OutboxEvent:
        fields["payload"] = {**fields["payload"], "total": 19.98}
        return real_new(**fields)

    monkeypatch.setattr(OutboxEvent, "new", staticmethod(buggy_new))
    # When an order is placed
    with pytest.raises(SchemaViolationError) as refused:
        service.place(PlaceOrder.from_json(EDGES[0]))
    # Then the typed error names the event, its version, the path and the rule, and not the value
    assert str(refused.value) == "OrderPlaced v1 payload does not match its schema at $.total (type)"
    assert "19.98" not in str(refused.value)
    # and neither the order, nor its idempotency record, nor its outbox row was written
    assert snapshot(dynamodb, tables) == before
