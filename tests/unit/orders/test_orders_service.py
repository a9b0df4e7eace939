"""OrderService against an in-memory repository: the domain rules without DynamoDB."""

from __future__ import annotations

import copy
from collections import Counter
from datetime import timedelta

import pytest

from orders.commands import PlaceOrder, TransitionOrder
from orders.errors import (
    ConcurrentModificationError,
    IdempotencyConflictError,
    InvalidTransitionError,
    OrderNotFoundError,
    PreconditionFailedError,
)
from orders.model import Command, Order, OrderStatus, StatusChange
from orders.service import (
    IDEMPOTENCY_TTL,
    IdempotencyRecord,
    OrderChange,
    OrderConditionFailedError,
    OrderService,
)
from outbox.model import OutboxEvent
from tests.support.clock import FakeClock
from tests.support.orders import SequentialIds, place_body


class InMemoryOrders:
    """The repository port with DynamoDB's conditions: version check (and, for a status change, seq and status
    too), one slot per seq, live keys. `calls` counts what a store would be asked, by method."""

    def __init__(self) -> None:
        self.orders: dict[str, Order] = {}
        self.events: dict[tuple[str, int], OutboxEvent] = {}
        self.keys: dict[str, IdempotencyRecord] = {}
        self.hide_keys = False  # simulate a duplicate racing between check and write
        self.calls: Counter[str] = Counter()

    def get(self, order_id: str) -> Order | None:
        self.calls["get"] += 1
        return self.orders.get(order_id)

    def find_idempotency(self, key: str) -> IdempotencyRecord | None:
        self.calls["find_idempotency"] += 1
        return None if self.hide_keys else self.keys.get(key)

    def commit(self, change: OrderChange) -> IdempotencyRecord | None:
        self.calls["commit"] += 1
        record = change.idempotency
        if record is not None and record.key in self.keys and self.keys[record.key].is_live(change.at):
            return self.keys[record.key]
        stored = self.orders.get(change.order.order_id)
        if (stored.version if stored else None) != change.expected_version:
            raise OrderConditionFailedError(stored)
        new = change.order
        if isinstance(new, StatusChange):
            assert stored is not None
            if (stored.last_seq, stored.status) != (new.expected_seq, new.previous_status):
                raise OrderConditionFailedError(stored)
            new = stored._replace(
                status=new.status,
                version=new.version,
                last_seq=new.last_seq,
                updated_at=new.updated_at,
            )
        slot = (change.event.aggregate_key, change.event.seq)
        if slot in self.events:
            raise ConcurrentModificationError()
        self.orders[new.order_id] = new
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


# --- If-Match: one commit, no read, when the version tells the status -------------------------------------


def placed(service: OrderService, store: InMemoryOrders) -> str:
    order_id = service.place(PlaceOrder.from_json(place_body())).order.order_id
    store.calls.clear()
    return order_id


def if_match(command: Command, order_id: str, header: str, body: object = None) -> TransitionOrder:
    return TransitionOrder.from_json(command, order_id, body, if_match=header)


def test_a_confirm_with_if_match_commits_a_status_change_without_reading(
    service: OrderService, store: InMemoryOrders
) -> None:
    # Given a placed order (version 1)
    order_id = placed(service, store)
    # When it is confirmed with If-Match "1"
    result = service.confirm(if_match(Command.CONFIRM, order_id, '"1"'))
    # Then one commit and nothing read; the answer is what the command knows
    assert store.calls == {"commit": 1}
    assert result.order == StatusChange(
        order_id, OrderStatus.PLACED, OrderStatus.CONFIRMED, 2, 2, "2026-11-29T12:00:00.000Z"
    )
    # And the event is the one the read path would have written
    assert store.events[(f"Order#{order_id}", 2)].payload == {
        "order_id": order_id,
        "previous_status": "PLACED",
        "status": "CONFIRMED",
        "version": 2,
    }
    assert store.orders[order_id].status is OrderStatus.CONFIRMED


def test_a_cancel_at_version_2_with_if_match_knows_it_leaves_confirmed(
    service: OrderService, store: InMemoryOrders
) -> None:
    # Given a confirmed order (version 2)
    order_id = placed(service, store)
    service.confirm(if_match(Command.CONFIRM, order_id, '"1"'))
    store.calls.clear()
    # When it is cancelled with If-Match "2"
    service.cancel(if_match(Command.CANCEL, order_id, '"2"'))
    # Then one commit; the event names CONFIRMED as the status left
    assert store.calls == {"commit": 1}
    assert store.events[(f"Order#{order_id}", 3)].payload["previous_status"] == "CONFIRMED"


def test_a_stale_if_match_is_a_precondition_failure_and_writes_nothing(
    service: OrderService, store: InMemoryOrders
) -> None:
    # Given an order confirmed since the client read it at version 1
    order_id = placed(service, store)
    service.confirm(TransitionOrder(Command.CONFIRM, order_id))
    before, store.calls = store.state(), Counter()
    # When the client cancels with If-Match "1"
    with pytest.raises(PreconditionFailedError):
        service.cancel(if_match(Command.CANCEL, order_id, '"1"'))
    # Then nothing was written, and the refused commit told the stored version: no read
    assert store.state() == before
    assert store.calls == {"commit": 1}


def test_at_the_named_version_but_not_in_the_status_it_implies_the_order_is_judged_as_stored(
    service: OrderService, store: InMemoryOrders
) -> None:
    # Given an order cancelled at version 2 (the guess for a cancel at 2 is CONFIRMED)
    order_id = placed(service, store)
    service.cancel(TransitionOrder(Command.CANCEL, order_id))
    before = store.state()
    # When it is cancelled again with If-Match "2"
    with pytest.raises(InvalidTransitionError):
        service.cancel(if_match(Command.CANCEL, order_id, '"2"'))
    # Then it is refused as the read path would refuse it, and nothing is written
    assert store.state() == before


def test_a_stored_order_whose_seq_left_its_version_is_written_from_what_is_stored(
    service: OrderService, store: InMemoryOrders
) -> None:
    # Given an order whose last_seq is not its version (a writer that emitted two events once)
    order_id = placed(service, store)
    store.orders[order_id] = store.orders[order_id]._replace(last_seq=2)
    # When it is confirmed with If-Match "1"
    result = service.confirm(if_match(Command.CONFIRM, order_id, '"1"'))
    # Then the event continues the stored sequence (seq 3), never a guessed one
    assert result.order.last_seq == 3
    assert (f"Order#{order_id}", 3) in store.events
    assert (f"Order#{order_id}", 2) not in store.events


def test_if_match_on_an_unknown_order_is_not_found(service: OrderService) -> None:
    with pytest.raises(OrderNotFoundError):
        service.confirm(if_match(Command.CONFIRM, "nope", '"1"'))


@pytest.mark.parametrize(
    ("header", "reads"),
    [
        ('W/"1"', 1),  # weak: never matches (strong comparison)
        ('"abc"', 1),  # never issued by this API
        ('"2"', 1),  # a confirm at 2 cannot be known without reading: read, then refused
    ],
)
def test_if_match_naming_no_current_version_is_refused_after_one_read(
    service: OrderService, store: InMemoryOrders, header: str, reads: int
) -> None:
    order_id = placed(service, store)
    before = store.state()
    with pytest.raises(PreconditionFailedError):
        service.confirm(if_match(Command.CONFIRM, order_id, header))
    assert store.state() == before
    assert store.calls == {"get": reads}


@pytest.mark.parametrize("header", ["*", '"7", "1"'])
def test_a_wildcard_or_a_list_reads_the_order_and_answers_it_whole(
    service: OrderService, store: InMemoryOrders, header: str
) -> None:
    order_id = placed(service, store)
    result = service.confirm(if_match(Command.CONFIRM, order_id, header))
    assert isinstance(result.order, Order)
    assert store.calls == {"get": 1, "commit": 1}


def test_if_match_is_judged_before_expected_version(service: OrderService, store: InMemoryOrders) -> None:
    # Given an order at version 1 / When If-Match and expected_version disagree
    order_id = placed(service, store)
    with pytest.raises(PreconditionFailedError):
        service.confirm(if_match(Command.CONFIRM, order_id, '"2"', {"expected_version": 1}))
    with pytest.raises(ConcurrentModificationError):
        service.confirm(if_match(Command.CONFIRM, order_id, '"1"', {"expected_version": 2}))


# --- Idempotency keys: in the commit, read only on the replay path ------------------------------------


def test_a_key_adds_no_call_to_a_place_or_a_conditional_confirm(
    service: OrderService, store: InMemoryOrders
) -> None:
    service.place(PlaceOrder.from_json(place_body()), idempotency_key="p")
    assert store.calls == {"commit": 1}
    order_id = placed(service, store)
    service.confirm(if_match(Command.CONFIRM, order_id, '"1"'), idempotency_key="c")
    assert store.calls == {"commit": 1}


def test_a_replayed_conditional_confirm_is_answered_from_the_refused_commit(
    service: OrderService, store: InMemoryOrders
) -> None:
    # Given a confirm with If-Match "1" and key "c"
    order_id = placed(service, store)
    original = service.confirm(if_match(Command.CONFIRM, order_id, '"1"'), idempotency_key="c")
    before, store.calls = store.state(), Counter()
    # When it is retried / Then the original answer, from the commit the record refused: no read
    replay = service.confirm(if_match(Command.CONFIRM, order_id, '"1"'), idempotency_key="c")
    assert (replay.replayed, replay.order, replay.event_id) == (True, original.order, original.event_id)
    assert store.calls == {"commit": 1}
    assert store.state() == before
    # And the same key with another If-Match is another request
    with pytest.raises(IdempotencyConflictError):
        service.confirm(if_match(Command.CONFIRM, order_id, '"2"'), idempotency_key="c")
    assert store.state() == before


def test_a_replayed_confirm_without_if_match_reads_its_record_once_refused(
    service: OrderService, store: InMemoryOrders
) -> None:
    # Given a confirm with key "c"
    order_id = placed(service, store)
    original = service.confirm(TransitionOrder(Command.CONFIRM, order_id), idempotency_key="c")
    assert store.calls == {"get": 1, "commit": 1}
    before, store.calls = store.state(), Counter()
    # When it is retried: the order is CONFIRMED already, so the key is read, and answers
    replay = service.confirm(TransitionOrder(Command.CONFIRM, order_id), idempotency_key="c")
    assert (replay.replayed, replay.event_id) == (True, original.event_id)
    assert store.calls == {"get": 1, "find_idempotency": 1}
    assert store.state() == before


def test_a_refusal_with_a_fresh_key_is_the_refusal(service: OrderService, store: InMemoryOrders) -> None:
    # Given a cancelled order / When a confirm with an unused key is refused / Then that refusal, no write
    order_id = placed(service, store)
    service.cancel(TransitionOrder(Command.CANCEL, order_id))
    before = store.state()
    with pytest.raises(InvalidTransitionError):
        service.confirm(TransitionOrder(Command.CONFIRM, order_id), idempotency_key="fresh")
    assert store.state() == before


def test_a_stale_if_match_with_a_fresh_key_reads_no_record(
    service: OrderService, store: InMemoryOrders
) -> None:
    # Given an order confirmed since version 1
    order_id = placed(service, store)
    service.confirm(TransitionOrder(Command.CONFIRM, order_id))
    store.calls.clear()
    # When a cancel with If-Match "1" and an unused key is refused on the order
    with pytest.raises(PreconditionFailedError):
        service.cancel(if_match(Command.CANCEL, order_id, '"1"'), idempotency_key="fresh")
    # Then the commit's refusal was the order's, not the key's: the key is not read
    assert store.calls == {"commit": 1}
