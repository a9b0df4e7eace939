"""The Orders application service: place, confirm, cancel and read orders.

Each command ends in ONE atomic commit of the repository port: the order's new state, its outbox
event and, when the request carries an idempotency key, the key's record. No boto3 here: the
DynamoDB adapter lives in `orders.repository`, and tests may pass an in-memory fake.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from orders.commands import PlaceOrder, TransitionOrder, request_hash, validate_idempotency_key
from orders.errors import ConcurrentModificationError, IdempotencyConflictError, OrderNotFoundError
from orders.model import AGGREGATE_TYPE, Command, Order, validate_order_id
from outbox.clock import Clock, format_timestamp, utc_now
from outbox.model import OutboxEvent

SCHEMA_VERSION = 1
# How long an idempotency key is remembered. Far beyond DynamoDB's 10-minute ClientRequestToken
# window: a client retrying after an outage of hours or days still gets the original answer.
IDEMPOTENCY_TTL = timedelta(days=7)

EVENT_TYPES = {
    Command.PLACE: "OrderPlaced",
    Command.CONFIRM: "OrderConfirmed",
    Command.CANCEL: "OrderCancelled",
}


@dataclass(frozen=True, slots=True)
class CommandResult:
    """What a command returns: the order after it and the `event_id` of the event it emitted.

    `replayed` is True when the answer comes from an earlier request with the same idempotency key.
    """

    order: Order
    event_id: str
    replayed: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"order": self.order.to_dict(), "event_id": self.event_id}

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, replayed: bool) -> CommandResult:
        return cls(Order.from_dict(data["order"]), str(data["event_id"]), replayed=replayed)


@dataclass(frozen=True, slots=True)
class IdempotencyRecord:
    """A used idempotency key: which request it was used for and the response it got."""

    key: str
    command: Command
    order_id: str
    request_hash: str
    response: CommandResult
    created_at: str
    expires_at: int  # epoch seconds; also the table's TTL attribute

    def is_live(self, now: datetime) -> bool:
        return self.expires_at > int(now.timestamp())


@dataclass(frozen=True, slots=True)
class OrderChange:
    """Everything one command writes, atomically.

    `expected_version` is the stored version the change was computed from (None: a new order).
    `at` is the moment of the change: an idempotency record that expired before it may be replaced.
    """

    order: Order
    expected_version: int | None
    event: OutboxEvent
    idempotency: IdempotencyRecord | None
    at: datetime


class OrderRepository(Protocol):
    """Port: where orders, their outbox events and idempotency records are stored."""

    def get(self, order_id: str) -> Order | None: ...

    def find_idempotency(self, key: str) -> IdempotencyRecord | None:
        """The record of `key` if stored (expired or not: the caller decides)."""
        ...

    def commit(self, change: OrderChange) -> IdempotencyRecord | None:
        """Write the change all or nothing.

        Returns None when committed, or the live record already holding the change's idempotency
        key (then nothing is written). Raises ConcurrentModificationError when the order moved on.
        """
        ...


class OrderService:
    def __init__(
        self,
        repository: OrderRepository,
        *,
        clock: Clock = utc_now,
        new_id: Callable[[], uuid.UUID] = uuid.uuid4,
        idempotency_ttl: timedelta = IDEMPOTENCY_TTL,
    ) -> None:
        self._repository = repository
        self._clock = clock
        self._new_id = new_id
        self._ttl = idempotency_ttl

    def get(self, order_id: str) -> Order:
        validate_order_id(order_id)
        order = self._repository.get(order_id)
        if order is None:
            raise OrderNotFoundError(order_id)
        return order

    def place(
        self, request: PlaceOrder, *, idempotency_key: str | None = None, correlation_id: str | None = None
    ) -> CommandResult:
        def build(now: datetime) -> tuple[Order, Order | None]:
            order = Order.place(
                order_id=str(self._new_id()),
                customer_id=request.customer_id,
                currency=request.currency,
                lines=request.lines,
                now=format_timestamp(now),
            )
            return order, None

        return self._run(
            Command.PLACE,
            order_id=None,
            canonical=request.canonical(),
            idempotency_key=idempotency_key,
            correlation_id=correlation_id,
            build=build,
        )

    def confirm(
        self,
        request: TransitionOrder,
        *,
        idempotency_key: str | None = None,
        correlation_id: str | None = None,
    ) -> CommandResult:
        return self.transition(
            _as(request, Command.CONFIRM), idempotency_key=idempotency_key, correlation_id=correlation_id
        )

    def cancel(
        self,
        request: TransitionOrder,
        *,
        idempotency_key: str | None = None,
        correlation_id: str | None = None,
    ) -> CommandResult:
        return self.transition(
            _as(request, Command.CANCEL), idempotency_key=idempotency_key, correlation_id=correlation_id
        )

    def transition(
        self,
        request: TransitionOrder,
        *,
        idempotency_key: str | None = None,
        correlation_id: str | None = None,
    ) -> CommandResult:
        def build(now: datetime) -> tuple[Order, Order | None]:
            current = self.get(request.order_id)
            if request.expected_version is not None and request.expected_version != current.version:
                raise ConcurrentModificationError(
                    "the order's version is not the expected_version; re-read it and retry"
                )
            return current.apply(request.command, now=format_timestamp(now)), current

        return self._run(
            request.command,
            order_id=request.order_id,
            canonical=request.canonical(),
            idempotency_key=idempotency_key,
            correlation_id=correlation_id,
            build=build,
        )

    def _run(
        self,
        command: Command,
        *,
        order_id: str | None,
        canonical: dict[str, Any],
        idempotency_key: str | None,
        correlation_id: str | None,
        build: Callable[[datetime], tuple[Order, Order | None]],
    ) -> CommandResult:
        now = self._clock()
        fingerprint: str | None = None
        if idempotency_key is not None:
            validate_idempotency_key(idempotency_key)
            fingerprint = request_hash(command, order_id, canonical)
            # Checked before the command runs: a replayed confirm must get its original answer,
            # not an InvalidTransitionError because the first attempt already confirmed the order.
            stored = self._repository.find_idempotency(idempotency_key)
            if stored is not None and stored.is_live(now):
                return _replay(stored, fingerprint)

        order, previous = build(now)
        event = OutboxEvent.new(
            aggregate_type=AGGREGATE_TYPE,
            aggregate_id=order.order_id,
            # Explicit: the event's seq IS the order's last_seq, continuing its sequence without gaps.
            seq=order.last_seq,
            event_type=EVENT_TYPES[command],
            payload=_payload(order, previous),
            schema_version=SCHEMA_VERSION,
            correlation_id=correlation_id,
            clock=lambda: now,
            new_id=self._new_id,
        )
        result = CommandResult(order, event.event_id)
        record = None
        if idempotency_key is not None and fingerprint is not None:
            record = IdempotencyRecord(
                key=idempotency_key,
                command=command,
                order_id=order.order_id,
                request_hash=fingerprint,
                response=result,
                created_at=format_timestamp(now),
                expires_at=int((now + self._ttl).timestamp()),
            )
        expected_version = None if previous is None else previous.version
        taken = self._repository.commit(OrderChange(order, expected_version, event, record, now))
        if taken is not None and fingerprint is not None:
            # Another request with this key committed between our check and our write.
            return _replay(taken, fingerprint)
        return result


def _replay(record: IdempotencyRecord, fingerprint: str) -> CommandResult:
    if record.request_hash != fingerprint:
        raise IdempotencyConflictError()
    return CommandResult(record.response.order, record.response.event_id, replayed=True)


def _as(request: TransitionOrder, command: Command) -> TransitionOrder:
    if request.command is not command:
        raise ValueError(f"expected a {command} request, got {request.command}")
    return request


def _payload(order: Order, previous: Order | None) -> dict[str, Any]:
    """Minimal event payloads: what consumers need to react, no personal data beyond the customer id."""
    if previous is None:
        return {
            "order_id": order.order_id,
            "customer_id": order.customer_id,
            "currency": order.currency,
            "total": order.total_text,
            "lines": [line.to_dict(order.currency) for line in order.lines],
        }
    return {
        "order_id": order.order_id,
        "previous_status": previous.status.value,
        "status": order.status.value,
        "version": order.version,
    }
