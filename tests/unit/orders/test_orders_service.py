"""OrderService against an in-memory repository: the domain rules without DynamoDB."""

from __future__ import annotations

import copy
from datetime import timedelta

import pytest

from orders.commands import PlaceOrder, TransitionOrder
from orders.errors import ConcurrentModificationError, IdempotencyConflictError, OrderNotFoundError
from orders.model import Command, Order, OrderStatus
from orders.service import IDEMPOTENCY_TTL, IdempotencyRecord, OrderChange, OrderService
from outbox.model import OutboxEvent
from tests.support.clock import FakeClock
from tests.support.orders import SequentialIds, place_body


class InMemoryOrders:
    """The repository port with DynamoDB's conditions: version check, one slot per seq, live keys."""

    def __init__(self) -> None:
        self.orders: dict[str, Order] = {}
        self.events: dict[tuple[str, int], OutboxEvent] = {}
        self.keys: dict[str, IdempotencyRecord] = {}
        self.hide_keys = False  # simulate a duplicate racing between check and write

    def get(self, order_id: str) -> Order | None:
        return self.orders.get(order_id)

    def find_idempotency(self, key: str) -> IdempotencyRecord | None:
        return None if self.hide_keys else self.keys.get(key)

    def commit(self, change: OrderChange) -> IdempotencyRecord | None:
        record = change.idempotency
        if record is not None and record.key in self.keys and self.keys[record.key].is_live(change.at):
            return self.keys[record.key]
        stored = self.orders.get(change.order.order_id)
        if (stored.version if stored else None) != change.expected_version:
            raise ConcurrentModificationError()
        slot = (change.event.aggregate_key, change.event.seq)
        if slot in self.events:
            raise ConcurrentModificationError()
        self.orders[change.order.order_id] = change.order
        self.events[slot] = change.event
        if record is not None:
            self.keys[record.key] = record
        return None

    def state(self) -> tuple[object, ...]:
        return copy.deepcopy((self.orders, self.events, self.keys))


@pytest.fixture
def store() -> InMemoryOrders:
    return InMemoryOrders()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def service(store: InMemoryOrders, clock: FakeClock) -> OrderService:
    return OrderService(store, clock=clock, new_id=SequentialIds())


def test_place_emits_one_order_placed_event_at_seq_1(service: OrderService, store: InMemoryOrders) -> None:
    # Given / When an order is placed with a correlation id
    result = service.place(PlaceOrder.from_json(place_body()), correlation_id="req-1")
    # Then the ids come from the injected factory and the event continues the order's sequence
    assert result.order.order_id == "00000000-0000-0000-0000-000000000001"
    [event] = store.events.values()
    assert (event.event_id, event.seq, event.event_type) == (result.event_id, 1, "OrderPlaced")
    assert (event.occurred_at, event.correlation_id) == ("2026-11-29T12:00:00.000Z", "req-1")


def test_transitions_emit_status_change_events(service: OrderService, store: InMemoryOrders) -> None:
    # Given a placed order
    order_id = service.place(PlaceOrder.from_json(place_body())).order.order_id
    # When it is confirmed
    result = service.confirm(TransitionOrder(Command.CONFIRM, order_id))
    # Then a minimal OrderConfirmed event at seq 2 carries the status change
    event = store.events[(f"Order#{order_id}", 2)]
    assert event.event_id == result.event_id
    assert event.payload == {
        "order_id": order_id,
        "previous_status": "PLACED",
        "status": "CONFIRMED",
        "version": 2,
    }


def test_get_of_an_unknown_order_is_not_found(service: OrderService) -> None:
    # Given / When / Then
    with pytest.raises(OrderNotFoundError):
        service.get("nope")


def test_replay_within_the_window_returns_the_original(
    service: OrderService, store: InMemoryOrders, clock: FakeClock
) -> None:
    # Given an order placed with key "k", and almost the whole window gone by
    original = service.place(PlaceOrder.from_json(place_body()), idempotency_key="k")
    before = store.state()
    clock.advance(IDEMPOTENCY_TTL - timedelta(seconds=1))
    # When the request is replayed
    replay = service.place(PlaceOrder.from_json(place_body()), idempotency_key="k")
    # Then the original comes back and nothing is written
    assert replay.replayed
    assert replay.event_id == original.event_id
    assert store.state() == before


def test_reused_key_for_another_request_conflicts(service: OrderService, store: InMemoryOrders) -> None:
    # Given key "k" used once
    service.place(PlaceOrder.from_json(place_body()), idempotency_key="k")
    before = store.state()
    # When / Then a different body with the same key is refused and writes nothing
    with pytest.raises(IdempotencyConflictError):
        service.place(PlaceOrder.from_json(place_body(currency="USD")), idempotency_key="k")
    assert store.state() == before


def test_a_duplicate_that_raced_past_the_check_is_answered_from_the_commit(
    service: OrderService, store: InMemoryOrders
) -> None:
    # Given key "k" used, and a duplicate that could not see the record when it checked
    original = service.place(PlaceOrder.from_json(place_body()), idempotency_key="k")
    store.hide_keys = True
    # When the duplicate commits
    replay = service.place(PlaceOrder.from_json(place_body()), idempotency_key="k")
    # Then the commit's answer (the stored record) turns it into a replay; one order exists
    assert replay.replayed
    assert replay.event_id == original.event_id
    assert len(store.orders) == 1


def test_a_confirm_request_cannot_be_sent_to_cancel(service: OrderService) -> None:
    # Given / When / Then: a mismatched command is a programming error, not a client error
    with pytest.raises(ValueError, match="expected a cancel request"):
        service.cancel(TransitionOrder(Command.CONFIRM, "o-1"))


def test_the_cancel_payload_names_the_status_it_left(service: OrderService, store: InMemoryOrders) -> None:
    # Given a placed order / When it is cancelled directly
    order_id = service.place(PlaceOrder.from_json(place_body())).order.order_id
    result = service.cancel(TransitionOrder(Command.CANCEL, order_id))
    # Then the event says PLACED -> CANCELLED
    assert result.order.status is OrderStatus.CANCELLED
    assert store.events[(f"Order#{order_id}", 2)].payload["previous_status"] == "PLACED"
