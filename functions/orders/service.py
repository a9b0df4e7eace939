"""The Orders application service: place, confirm, cancel and read orders.

Each command ends in ONE atomic commit of the repository port: the order's new state, its outbox
event and, when the request carries an idempotency key, the key's record. No boto3 here: the
DynamoDB adapter lives in `orders.repository`, and tests may pass an in-memory fake.

What each command costs the store, on its common path:
- place: the commit only;
- confirm or cancel with an `If-Match` naming one version: the commit only, of a `StatusChange`
  (`orders.model.change_at`) conditioned on that version, when the version tells the order's status;
- confirm or cancel otherwise: the order's read, then the commit;
- an idempotency key adds nothing: its record is in the commit, conditioned on the key being free. It is
  read only on the replay path: when the commit was refused on the record itself (the repository hands the
  stored record back), or when the command was refused before any write (a replayed confirm finds the
  order already confirmed) and the key may hold that refusal's earlier success.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, NamedTuple, Protocol

from orders.commands import PlaceOrder, TransitionOrder, request_hash, validate_idempotency_key
from orders.errors import (
    ConcurrentModificationError,
    IdempotencyConflictError,
    InvalidTransitionError,
    OrderNotFoundError,
    PreconditionFailedError,
)
from orders.model import AGGREGATE_TYPE, Command, Order, StatusChange, change_at, validate_order_id
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


class CommandResult(NamedTuple):
    """What a command returns: the order after it and the `event_id` of the event it emitted.

    `order` is the whole order, or, for a transition made without reading the order (If-Match), the
    `StatusChange`: what the command knows of it. `replayed` is True when the answer comes from an earlier
    request with the same idempotency key.
    """

    order: Order | StatusChange
    event_id: str
    replayed: bool = False

    def to_dict(self) -> dict[str, Any]:
        if isinstance(self.order, StatusChange):
            return {"change": self.order.to_dict(), "event_id": self.event_id}
        return {"order": self.order.to_dict(), "event_id": self.event_id}

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, replayed: bool) -> CommandResult:
        order: Order | StatusChange = (
            StatusChange.from_dict(data["change"]) if "change" in data else Order.from_dict(data["order"])
        )
        return cls(order, str(data["event_id"]), replayed=replayed)


class IdempotencyRecord(NamedTuple):
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


class OrderChange(NamedTuple):
    """Everything one command writes, atomically.

    `order` is the order's new state, or a `StatusChange` (then the write is conditioned on the version,
    `last_seq` and status it was computed from). `expected_version` is the stored version the change was
    computed from (None: a new order). `at` is the moment of the change: an idempotency record that expired
    before it may be replaced.
    """

    order: Order | StatusChange
    expected_version: int | None
    event: OutboxEvent
    idempotency: IdempotencyRecord | None
    at: datetime


class OrderConditionFailedError(ConcurrentModificationError):
    """The commit was refused on the order's own condition (the key's record, if any, passed its own).

    `current` is the order as stored when the condition failed, when the store said (None: no such order,
    or the store did not return it).
    """

    def __init__(self, current: Order | None) -> None:
        super().__init__()
        self.current = current


class OrderRepository(Protocol):
    """Port: where orders, their outbox events and idempotency records are stored."""

    def get(self, order_id: str) -> Order | None: ...

    def find_idempotency(self, key: str) -> IdempotencyRecord | None:
        """The record of `key` if stored (expired or not: the caller decides)."""
        ...

    def commit(self, change: OrderChange) -> IdempotencyRecord | None:
        """Write the change all or nothing.

        Returns None when committed, or the live record already holding the change's idempotency
        key (then nothing is written). Raises OrderConditionFailedError when the order's condition failed
        (nothing is written), ConcurrentModificationError when the items changed concurrently.
        """
        ...


class _Key(NamedTuple):
    """A request's idempotency key and its fingerprint."""

    key: str
    fingerprint: str


_REFUSALS = (OrderNotFoundError, InvalidTransitionError, ConcurrentModificationError, PreconditionFailedError)
"""What a command may be refused with before anything is written; with a key, each may hide a replay."""


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
        now = self._clock()
        key = _key(Command.PLACE, None, request.canonical(), idempotency_key)
        order = Order.place(
            order_id=str(self._new_id()),
            customer_id=request.customer_id,
            currency=request.currency,
            lines=request.lines,
            now=format_timestamp(now),
        )
        return self._commit(
            command=Command.PLACE, order=order, previous=None, key=key, now=now, correlation_id=correlation_id
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
        now = self._clock()
        key = _key(request.command, request.order_id, request.canonical(), idempotency_key)
        version = request.blind_version()
        at = format_timestamp(now)
        change = (
            None
            if version is None
            else change_at(request.command, order_id=request.order_id, version=version, now=at)
        )
        if change is not None:
            try:
                return self._commit(
                    command=request.command,
                    order=change,
                    previous=None,
                    key=key,
                    now=now,
                    correlation_id=correlation_id,
                )
            except OrderConditionFailedError as failed:
                # Not a replay: the key's record passed its condition. Judge the order as it was stored.
                current = failed.current
                if current is None:  # no item came back: absent, or a store that does not say (read it)
                    current = self._repository.get(request.order_id)
                if current is None:
                    raise OrderNotFoundError(request.order_id) from None
                _check_preconditions(request, current)
                # At the version If-Match names, but not in the status or seq that version implies: go on from
                # what is stored, as without If-Match (one more call, never a wrong event).
                order = current.apply(request.command, now=at)
                return self._commit_transition(
                    order=order,
                    current=current,
                    request=request,
                    key=key,
                    now=now,
                    correlation_id=correlation_id,
                )
        try:
            current = self.get(request.order_id)
            _check_preconditions(request, current)
            order = current.apply(request.command, now=at)
        except _REFUSALS:
            # A replayed confirm finds its order confirmed already: the key's record holds its first answer.
            replay = self._stored_replay(key, now)
            if replay is not None:
                return replay
            raise
        return self._commit_transition(
            order=order, current=current, request=request, key=key, now=now, correlation_id=correlation_id
        )

    def _commit_transition(
        self,
        *,
        order: Order,
        current: Order,
        request: TransitionOrder,
        key: _Key | None,
        now: datetime,
        correlation_id: str | None,
    ) -> CommandResult:
        try:
            return self._commit(
                command=request.command,
                order=order,
                previous=current,
                key=key,
                now=now,
                correlation_id=correlation_id,
            )
        except OrderConditionFailedError:
            if request.if_match is not None and not request.if_match.wildcard:
                # The order moved on between the read and the write: the version If-Match named is gone.
                raise PreconditionFailedError() from None
            raise

    def _stored_replay(self, key: _Key | None, now: datetime) -> CommandResult | None:
        if key is None:
            return None
        stored = self._repository.find_idempotency(key.key)
        if stored is None or not stored.is_live(now):
            return None
        return _replay(stored, key.fingerprint)

    def _commit(
        self,
        *,
        command: Command,
        order: Order | StatusChange,
        previous: Order | None,
        key: _Key | None,
        now: datetime,
        correlation_id: str | None,
    ) -> CommandResult:
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
        if key is not None:
            record = IdempotencyRecord(
                key=key.key,
                command=command,
                order_id=order.order_id,
                request_hash=key.fingerprint,
                response=result,
                created_at=format_timestamp(now),
                expires_at=int((now + self._ttl).timestamp()),
            )
        if isinstance(order, StatusChange):
            expected_version: int | None = order.expected_version
        else:
            expected_version = None if previous is None else previous.version
        taken = self._repository.commit(OrderChange(order, expected_version, event, record, now))
        if taken is not None and key is not None:
            # The key is held by an earlier request: this one is its replay, or a conflicting reuse.
            return _replay(taken, key.fingerprint)
        return result


def _key(
    command: Command, order_id: str | None, canonical: dict[str, Any], idempotency_key: str | None
) -> _Key | None:
    if idempotency_key is None:
        return None
    validate_idempotency_key(idempotency_key)
    return _Key(idempotency_key, request_hash(command, order_id, canonical))


def _check_preconditions(request: TransitionOrder, current: Order) -> None:
    """If-Match first (412: HTTP evaluates preconditions before the method), then expected_version (409)."""
    if request.if_match is not None and not request.if_match.matches(current.version):
        raise PreconditionFailedError()
    if request.expected_version is not None and request.expected_version != current.version:
        raise ConcurrentModificationError(
            "the order's version is not the expected_version; re-read it and retry"
        )


def _replay(record: IdempotencyRecord, fingerprint: str) -> CommandResult:
    if record.request_hash != fingerprint:
        raise IdempotencyConflictError()
    return CommandResult(record.response.order, record.response.event_id, replayed=True)


def _as(request: TransitionOrder, command: Command) -> TransitionOrder:
    if request.command is not command:
        raise ValueError(f"expected a {command} request, got {request.command}")
    return request


def _payload(order: Order | StatusChange, previous: Order | None) -> dict[str, Any]:
    """Minimal event payloads: what consumers need to react, no personal data beyond the customer id.

    A status change's payload is the same whether the order was read or not: every field of it is what the
    command knows, and the write's condition guarantees `previous_status` (docs/api.md, Events).
    """
    if isinstance(order, StatusChange):
        return {
            "order_id": order.order_id,
            "previous_status": order.previous_status.value,
            "status": order.status.value,
            "version": order.version,
        }
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
