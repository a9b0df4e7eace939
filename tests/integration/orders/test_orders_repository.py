"""The write path on moto: one transaction per command, all or nothing, idempotent beyond 10 minutes."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from orders.commands import PlaceOrder, TransitionOrder
from orders.errors import (
    ConcurrentModificationError,
    IdempotencyConflictError,
    InvalidTransitionError,
    OrderNotFoundError,
)
from orders.model import Command, Order, OrderStatus
from orders.repository import DynamoDBOrderRepository, order_key
from orders.service import IDEMPOTENCY_TTL, IdempotencyRecord, OrderChange, OrderService
from outbox.model import LEGACY_ATTRIBUTES, TTL_ATTRIBUTE, OutboxEvent
from tests.support.aws import Tables
from tests.support.clock import FakeClock
from tests.support.orders import SequentialIds, outbox_rows, place_body, snapshot


def place(service: OrderService, key: str | None = None, **overrides: Any) -> Any:
    return service.place(PlaceOrder.from_json(place_body(**overrides)), idempotency_key=key)


def confirm(service: OrderService, order_id: str, key: str | None = None) -> Any:
    return service.confirm(TransitionOrder(Command.CONFIRM, order_id), idempotency_key=key)


def cancel(service: OrderService, order_id: str, key: str | None = None) -> Any:
    return service.cancel(TransitionOrder(Command.CANCEL, order_id), idempotency_key=key)


def stored_order(dynamodb: Any, tables: Tables, order_id: str) -> dict[str, Any]:
    item: dict[str, Any] = dynamodb.get_item(TableName=tables.orders, Key=order_key(order_id))["Item"]
    return item


# --- A committed order always has its outbox row --------------------------------------------------


def test_placing_an_order_writes_the_order_and_its_outbox_row_together(
    service: OrderService, dynamodb: Any, tables: Tables
) -> None:
    # Given an empty store
    # When an order is placed
    result = service.place(PlaceOrder.from_json(place_body()), correlation_id="req-42")

    # Then the order is stored at version 1 ...
    item = stored_order(dynamodb, tables, result.order.order_id)
    assert item["status"] == {"S": "PLACED"}
    assert item["version"] == {"N": "1"}
    assert item["total"] == {"S": "19.98"}
    # ... and exactly one PENDING OrderPlaced row announces it, with the returned event_id
    [row] = outbox_rows(dynamodb, tables, result.order.order_id)
    event = OutboxEvent.from_item(row)
    assert event.event_id == result.event_id
    assert (event.event_type, event.seq, event.schema_version) == ("OrderPlaced", 1, 1)
    assert event.correlation_id == "req-42"
    assert event.payload == {
        "order_id": result.order.order_id,
        "customer_id": "c-1",
        "currency": "EUR",
        "total": "19.98",
        "lines": [{"sku": "SKU-1", "quantity": 2, "unit_price": "9.99"}],
    }
    # ... holding the contract's attributes only: no index attribute, no TTL (it must not expire unpublished)
    assert set(row) == {
        "aggregate_key",
        "seq",
        "event_id",
        "event_type",
        "schema_version",
        "aggregate_type",
        "aggregate_id",
        "payload",
        "occurred_at",
        "correlation_id",
        "status",
        "attempts",
    }
    assert not set(row) & {*LEGACY_ATTRIBUTES, TTL_ATTRIBUTE}


def test_seq_has_no_gaps_across_place_confirm_cancel(
    service: OrderService, dynamodb: Any, tables: Tables
) -> None:
    # Given a placed order
    placed = place(service)
    order_id = placed.order.order_id

    # When it is confirmed, then cancelled
    confirmed = confirm(service, order_id)
    cancelled = cancel(service, order_id)

    # Then its outbox holds seq 1, 2, 3 with one event per command, in order
    rows = sorted(outbox_rows(dynamodb, tables, order_id), key=lambda row: int(row["seq"]["N"]))
    events = [OutboxEvent.from_item(row) for row in rows]
    assert [e.seq for e in events] == [1, 2, 3]
    assert [e.event_type for e in events] == ["OrderPlaced", "OrderConfirmed", "OrderCancelled"]
    assert [e.event_id for e in events] == [placed.event_id, confirmed.event_id, cancelled.event_id]
    assert events[2].payload == {
        "order_id": order_id,
        "previous_status": "CONFIRMED",
        "status": "CANCELLED",
        "version": 3,
    }
    # And the order's version and last_seq moved with them
    item = stored_order(dynamodb, tables, order_id)
    assert (item["status"], item["version"], item["last_seq"]) == ({"S": "CANCELLED"}, {"N": "3"}, {"N": "3"})


@pytest.mark.parametrize(
    ("first", "second"),
    [(Command.CANCEL, Command.CONFIRM), (Command.CANCEL, Command.CANCEL), (Command.CONFIRM, Command.CONFIRM)],
)
def test_invalid_transition_is_typed_and_writes_nothing(
    service: OrderService, dynamodb: Any, tables: Tables, first: Command, second: Command
) -> None:
    # Given an order that already went through `first`
    order_id = place(service).order.order_id
    service.transition(TransitionOrder(first, order_id))
    before = snapshot(dynamodb, tables)

    # When `second` is not allowed from there
    with pytest.raises(InvalidTransitionError):
        service.transition(TransitionOrder(second, order_id))

    # Then neither table changed
    assert snapshot(dynamodb, tables) == before


def test_unknown_order_is_not_found_and_writes_nothing(
    service: OrderService, dynamodb: Any, tables: Tables
) -> None:
    # Given an empty store
    before = snapshot(dynamodb, tables)
    # When confirming an order that does not exist
    with pytest.raises(OrderNotFoundError):
        confirm(service, "no-such-order")
    # Then nothing was written
    assert snapshot(dynamodb, tables) == before


# --- A failure in ANY action of the transaction writes nothing --------------------------------


def confirm_change(repository: DynamoDBOrderRepository, order_id: str, key: str) -> OrderChange:
    """The exact OrderChange a confirm would commit, captured instead of committed."""
    captured: list[OrderChange] = []

    class Capture:
        def get(self, order_id: str) -> Order | None:
            return repository.get(order_id)

        def find_idempotency(self, key: str) -> IdempotencyRecord | None:
            return None

        def commit(self, change: OrderChange) -> IdempotencyRecord | None:
            captured.append(change)
            return None

    OrderService(Capture(), clock=FakeClock(), new_id=SequentialIds()).confirm(
        TransitionOrder(Command.CONFIRM, order_id), idempotency_key=key
    )
    [change] = captured
    return change


def test_failed_idempotency_condition_writes_nothing(
    service: OrderService, repository: DynamoDBOrderRepository, dynamodb: Any, tables: Tables
) -> None:
    # Given key "k" already used for one order (action 0's condition will fail)
    place(service, key="k")
    before = snapshot(dynamodb, tables)

    # When a different request with the same key reaches the transaction (pre-check bypassed)
    taken_service = OrderService(_HidesIdempotency(repository), clock=FakeClock(), new_id=SequentialIds())
    with pytest.raises(IdempotencyConflictError):
        place(taken_service, key="k", customer_id="c-2")

    # Then the order and outbox rows of the second request were not written
    assert snapshot(dynamodb, tables) == before


def test_failed_order_version_condition_writes_nothing(
    service: OrderService, repository: DynamoDBOrderRepository, dynamodb: Any, tables: Tables
) -> None:
    # Given a placed order and a confirm computed from its version 1, with an idempotency key
    order_id = place(service).order.order_id
    change = confirm_change(repository, order_id, "k-confirm")
    # ... whose seq slot is still free, but whose version is now stale (bumped behind its back)
    item = stored_order(dynamodb, tables, order_id)
    item["version"] = {"N": "7"}
    dynamodb.put_item(TableName=tables.orders, Item=item)
    before = snapshot(dynamodb, tables)

    # When that change is committed
    with pytest.raises(ConcurrentModificationError):
        repository.commit(change)

    # Then neither the idempotency record, the order nor the outbox row was written
    assert snapshot(dynamodb, tables) == before


def test_failed_outbox_condition_writes_nothing(
    service: OrderService, repository: DynamoDBOrderRepository, dynamodb: Any, tables: Tables
) -> None:
    # Given a confirm computed from version 1, and a foreign row already occupying seq 2
    order_id = place(service).order.order_id
    change = confirm_change(repository, order_id, "k-confirm")
    squatter = replace(change.event, event_id="00000000-0000-4000-8000-00000000beef")
    dynamodb.put_item(TableName=tables.outbox, Item=squatter.to_item())
    before = snapshot(dynamodb, tables)

    # When the change is committed
    with pytest.raises(ConcurrentModificationError):
        repository.commit(change)

    # Then the order stays at version 1 and no idempotency record exists
    assert snapshot(dynamodb, tables) == before
    assert stored_order(dynamodb, tables, order_id)["version"] == {"N": "1"}


def test_transaction_puts_the_idempotency_record_first(
    service: OrderService, repository: DynamoDBOrderRepository
) -> None:
    # Given a confirm with an idempotency key
    order_id = place(service).order.order_id
    change = confirm_change(repository, order_id, "k")
    # When its transaction is built
    transaction = repository.transaction_for(change)
    # Then it is one call of three actions, the record first (its failure wins: replay, not conflict)
    assert transaction.labels == ("idempotency record", "order", "outbox OrderConfirmed seq 2")


# --- Concurrent writers on one order: exactly one wins ------------------------------------------


class _StaleReads:
    """Reads return a snapshot taken earlier: a writer that read before another one committed."""

    def __init__(self, inner: DynamoDBOrderRepository, stale: Order) -> None:
        self._inner = inner
        self._stale = stale

    def get(self, order_id: str) -> Order | None:
        return self._stale

    def find_idempotency(self, key: str) -> IdempotencyRecord | None:
        return self._inner.find_idempotency(key)

    def commit(self, change: OrderChange) -> IdempotencyRecord | None:
        return self._inner.commit(change)


class _HidesIdempotency(_StaleReads):
    """A repository that cannot see idempotency records yet: the request raced another with the same key."""

    def __init__(self, inner: DynamoDBOrderRepository) -> None:
        self._inner = inner

    def get(self, order_id: str) -> Order | None:
        return self._inner.get(order_id)

    def find_idempotency(self, key: str) -> IdempotencyRecord | None:
        return None


@pytest.mark.parametrize("loser", [Command.CONFIRM, Command.CANCEL])
def test_concurrent_writers_on_one_order_exactly_one_wins(
    service: OrderService, repository: DynamoDBOrderRepository, dynamodb: Any, tables: Tables, loser: Command
) -> None:
    # Given two writers that both read the order at version 1
    order_id = place(service).order.order_id
    seen_by_both = repository.get(order_id)
    assert seen_by_both is not None
    late_writer = OrderService(
        _StaleReads(repository, seen_by_both), clock=FakeClock(), new_id=SequentialIds()
    )

    # When the first commits a cancel and the second then commits its own command from version 1
    winner = cancel(service, order_id)
    with pytest.raises(ConcurrentModificationError):
        late_writer.transition(TransitionOrder(loser, order_id))

    # Then only the winner's change and event exist
    item = stored_order(dynamodb, tables, order_id)
    assert (item["status"], item["version"]) == ({"S": "CANCELLED"}, {"N": "2"})
    events = [OutboxEvent.from_item(row) for row in outbox_rows(dynamodb, tables, order_id)]
    assert sorted((e.seq, e.event_id) for e in events) == [(1, events[0].event_id), (2, winner.event_id)]


def test_expected_version_mismatch_is_a_conflict_and_writes_nothing(
    service: OrderService, dynamodb: Any, tables: Tables
) -> None:
    # Given an order at version 1
    order_id = place(service).order.order_id
    before = snapshot(dynamodb, tables)
    # When a client confirms it believing it is at version 5
    with pytest.raises(ConcurrentModificationError):
        service.confirm(TransitionOrder(Command.CONFIRM, order_id, expected_version=5))
    # Then nothing changed
    assert snapshot(dynamodb, tables) == before


# --- Idempotency --------------------------------------------------------------------------------


@pytest.mark.parametrize("age", [timedelta(minutes=11), timedelta(days=6, hours=23)])
def test_replay_returns_the_original_and_creates_no_event_long_after_10_minutes(
    service: OrderService, clock: FakeClock, dynamodb: Any, tables: Tables, age: timedelta
) -> None:
    # Given an order placed with key "k" ...
    original = place(service, key="k")
    before = snapshot(dynamodb, tables)
    # ... and time moved past DynamoDB's 10-minute ClientRequestToken window (moto ignores it anyway)
    clock.advance(age)

    # When the same request is replayed with the same key
    replay = place(service, key="k")

    # Then the original answer comes back, flagged as a replay, and nothing new was written
    assert replay.replayed
    assert (replay.order, replay.event_id) == (original.order, original.event_id)
    assert snapshot(dynamodb, tables) == before


def test_replay_of_a_confirm_returns_the_original_even_after_a_later_cancel(
    service: OrderService, clock: FakeClock, dynamodb: Any, tables: Tables
) -> None:
    # Given an order confirmed with key "kc", then cancelled
    order_id = place(service).order.order_id
    confirmed = confirm(service, order_id, key="kc")
    cancel(service, order_id)
    clock.advance(timedelta(hours=1))
    before = snapshot(dynamodb, tables)

    # When the confirm is retried with its key (a naive retry would be an invalid transition)
    replay = confirm(service, order_id, key="kc")

    # Then the original confirm's answer (CONFIRMED, version 2) comes back and nothing is written
    assert replay.replayed
    assert (replay.order.status, replay.order.version) == (OrderStatus.CONFIRMED, 2)
    assert replay.event_id == confirmed.event_id
    assert snapshot(dynamodb, tables) == before


@pytest.mark.parametrize(
    "other_request",
    [
        lambda s, order_id: place(s, key="k", customer_id="c-2"),
        lambda s, order_id: place(s, key="k", currency="USD"),
        lambda s, order_id: confirm(s, order_id, key="k"),
    ],
    ids=["other-customer", "other-currency", "other-command"],
)
def test_same_key_with_a_different_request_is_a_conflict_and_writes_nothing(
    service: OrderService, dynamodb: Any, tables: Tables, other_request: Any
) -> None:
    # Given key "k" used to place an order
    order_id = place(service, key="k").order.order_id
    before = snapshot(dynamodb, tables)
    # When another request reuses it
    with pytest.raises(IdempotencyConflictError):
        other_request(service, order_id)
    # Then nothing was written
    assert snapshot(dynamodb, tables) == before


def test_a_racing_duplicate_is_answered_from_the_record_the_transaction_hit(
    service: OrderService, repository: DynamoDBOrderRepository, dynamodb: Any, tables: Tables
) -> None:
    # Given a request with key "k" committed while a duplicate was between its check and its write
    original = place(service, key="k")
    before = snapshot(dynamodb, tables)
    racer = OrderService(_HidesIdempotency(repository), clock=FakeClock(), new_id=SequentialIds())

    # When the duplicate commits (its idempotency Put fails; DynamoDB hands back the stored record)
    replay = place(racer, key="k")

    # Then it answers with the original response and its own order and event were not written
    assert replay.replayed
    assert (replay.order, replay.event_id) == (original.order, original.event_id)
    assert snapshot(dynamodb, tables) == before


def test_a_key_is_reusable_once_its_record_expired(
    service: OrderService, clock: FakeClock, dynamodb: Any, tables: Tables
) -> None:
    # Given key "k" used 7 days ago (its record lingers: TTL deletion is lazy, and moto never deletes)
    first = place(service, key="k")
    clock.advance(IDEMPOTENCY_TTL)

    # When the key is used again, even for another request
    second = place(service, key="k", customer_id="c-2")

    # Then it places a new order and the record now belongs to the new request
    assert not second.replayed
    assert second.order.order_id != first.order.order_id
    assert len(outbox_rows(dynamodb, tables, second.order.order_id)) == 1
    assert place(service, key="k", customer_id="c-2").event_id == second.event_id


def test_idempotency_record_stores_hash_response_and_ttl(
    service: OrderService, clock: FakeClock, dynamodb: Any, tables: Tables
) -> None:
    # Given / When an order is placed with a key
    result = place(service, key="k")
    # Then its record holds the command, the request hash, the response and a 7-day TTL
    item = dynamodb.get_item(TableName=tables.orders, Key={"pk": {"S": "IDEMPOTENCY#k"}})["Item"]
    assert item["command"] == {"S": "place"}
    assert item["order_id"] == {"S": result.order.order_id}
    assert len(item["request_hash"]["S"]) == 64
    assert result.event_id in item["response"]["S"]
    assert int(item["expires_at"]["N"]) == int((clock.now + IDEMPOTENCY_TTL).timestamp())
