"""DynamoDB adapter of the `OrderRepository` port (single-table Orders + the Outbox table).

Orders table items (partition key `pk` only): the order (`ORDER#{order_id}`: its state, `version` and
`last_seq`) and the idempotency record (`IDEMPOTENCY#{key}`: the request hash, the stored response and
`expires_at`, the table's TTL attribute).

Every command is ONE TransactWriteItems call, in this order: 0. the idempotency record, when a key is given
(`attribute_not_exists(pk) OR expires_at <= :now`); 1. the order: a Put conditioned on its absence or on the
version read, or, for a `StatusChange` (If-Match, no read), an Update conditioned on the version, last_seq
and status it was computed from; 2. the outbox row (OutboxWriter: a slot is writable once).
Each condition returns the item it failed on (ALL_OLD), so a cancelled transaction is judged from its
CancellationReasons without a read: a failure on the idempotency entry is a replay (its stored response is
the answer), one on the order's hands the stored order to the service (404, 412 or 409). The idempotency
record comes first on purpose: DynamoDB reports every failed condition and the first is raised, so a retried
request whose order condition ALSO fails is recognised as a replay, not as a conflict.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from orders.errors import ConcurrentModificationError, OrderStoreUnavailableError
from orders.model import Command, Order, OrderLine, OrderStatus, StatusChange
from orders.service import CommandResult, IdempotencyRecord, OrderChange, OrderConditionFailedError
from outbox.dynamodb import DynamoDBTransactionExecutor, translate_client_error
from outbox.errors import (
    ConditionFailedError,
    DuplicateEventError,
    RetryableError,
    TransactionConflictError,
)
from outbox.limits import Item
from outbox.schemas import SchemaRegistry
from outbox.trace_context import TraceContext, active_trace_context
from outbox.transaction import TableKeys, Transaction, TransactionExecutor
from outbox.writer import OutboxWriter

PARTITION_KEY = "pk"
# The Orders table's TTL attribute: idempotency records expire by it.
EXPIRES_AT = "expires_at"
ORDER_PREFIX = "ORDER#"
IDEMPOTENCY_PREFIX = "IDEMPOTENCY#"


def order_key(order_id: str) -> dict[str, dict[str, str]]:
    return {PARTITION_KEY: {"S": f"{ORDER_PREFIX}{order_id}"}}


def idempotency_key(key: str) -> dict[str, dict[str, str]]:
    return {PARTITION_KEY: {"S": f"{IDEMPOTENCY_PREFIX}{key}"}}


class IdempotencyKeyTakenError(ConditionFailedError):
    """The idempotency record's Put found a live record. `existing` is that record, as stored."""

    def __init__(self, action: str, *, index: int, existing: Item | None) -> None:
        super().__init__(action, index=index)
        self.existing = existing


class OrderVersionMismatchError(ConditionFailedError):
    """The order's write found it missing, already present (new order) or at another version or status.
    `existing` is the order's item as stored, when DynamoDB returned it."""

    def __init__(self, action: str, *, index: int, existing: Item | None) -> None:
        super().__init__(action, index=index)
        self.existing = existing


CONDITION_FAILED = "ConditionalCheckFailed"


class DynamoDBOrderRepository:
    def __init__(
        self,
        client: Any,
        *,
        orders_table: str,
        outbox_table: str,
        executor: TransactionExecutor | None = None,
        trace_context: Callable[[], TraceContext] = active_trace_context,
        schemas: SchemaRegistry | None = None,
        origin: str | None = None,
    ) -> None:
        """`origin`: the region this service saves in, when the outbox spans regions (multi-region.md)."""
        self._client = client
        self._orders = TableKeys(orders_table, PARTITION_KEY)
        self._outbox = OutboxWriter(outbox_table, schemas=schemas, trace_context=trace_context, origin=origin)
        self._executor = executor if executor is not None else DynamoDBTransactionExecutor(client)

    def get(self, order_id: str) -> Order | None:
        item = self._get_item(order_key(order_id))
        return None if item is None else order_from_item(item)

    def find_idempotency(self, key: str) -> IdempotencyRecord | None:
        item = self._get_item(idempotency_key(key))
        return None if item is None else idempotency_from_item(item)

    def commit(self, change: OrderChange) -> IdempotencyRecord | None:
        transaction = self.transaction_for(change)
        try:
            self._executor.execute(transaction)
        except IdempotencyKeyTakenError as error:
            # Raised for the record's own entry (the executor builds each entry's failure from that entry's
            # reason); a replay only if that entry's reason says its condition failed.
            if not _failed_entry(error, error.index):
                raise ConcurrentModificationError() from error
            existing = error.existing
            if existing is None:  # DynamoDB normally returns it (ALL_OLD); read it if not.
                existing = self._get_item(idempotency_key(_key_of(change)))
            if existing is None:
                # Gone between the cancelled write and the read (expired and deleted): a rare race
                # the client resolves by retrying.
                raise ConcurrentModificationError(
                    "the idempotency key changed concurrently; retry"
                ) from error
            return idempotency_from_item(existing)
        except OrderVersionMismatchError as error:
            # The record's entry (if any) passed, or the error above would have been raised: not a replay.
            current = None if error.existing is None else order_from_item(error.existing)
            raise OrderConditionFailedError(current) from error
        except (DuplicateEventError, TransactionConflictError) as error:
            raise ConcurrentModificationError() from error
        except RetryableError as error:
            raise OrderStoreUnavailableError("the order store is unavailable; retry later") from error
        return None

    def transaction_for(self, change: OrderChange) -> Transaction:
        """The one transaction `commit` sends (public so tests can inspect its actions)."""
        transaction = Transaction()
        record = change.idempotency
        if record is not None:
            transaction.put(
                self._orders,
                idempotency_to_item(record),
                label="idempotency record",
                # An expired record may linger (TTL deletes lazily): it no longer holds the key.
                condition=f"attribute_not_exists({PARTITION_KEY}) OR {EXPIRES_AT} <= :now",
                values={":now": {"N": str(int(change.at.timestamp()))}},
                on_condition_failed=_idempotency_taken,
            )
        if isinstance(change.order, StatusChange):
            self._update_status(transaction, change.order)
        elif change.expected_version is None:
            transaction.put(
                self._orders,
                order_to_item(change.order),
                label="order",
                condition="attribute_not_exists(pk)",
                on_condition_failed=_version_mismatch,
            )
        else:
            transaction.put(
                self._orders,
                order_to_item(change.order),
                label="order",
                condition="#version = :expected",
                names={"#version": "version"},
                values={":expected": {"N": str(change.expected_version)}},
                on_condition_failed=_version_mismatch,
            )
        self._outbox.append(transaction, change.event)
        return transaction

    def _update_status(self, transaction: Transaction, change: StatusChange) -> None:
        """The order's status change, without its other attributes (unknown here, and unchanged): only an
        order stored at the version, seq and status the change was computed from takes it."""
        transaction.update(
            self._orders,
            order_key(change.order_id),
            "SET #status = :status, #version = :version, last_seq = :seq, updated_at = :at",
            label="order",
            condition="#version = :expected AND last_seq = :expected_seq AND #status = :previous",
            names={"#status": "status", "#version": "version"},
            values={
                ":status": {"S": change.status.value},
                ":version": {"N": str(change.version)},
                ":seq": {"N": str(change.last_seq)},
                ":at": {"S": change.updated_at},
                ":expected": {"N": str(change.expected_version)},
                ":expected_seq": {"N": str(change.expected_seq)},
                ":previous": {"S": change.previous_status.value},
            },
            on_condition_failed=_version_mismatch,
        )

    def _get_item(self, key: dict[str, dict[str, str]]) -> Item | None:
        try:
            response = self._client.get_item(TableName=self._orders.table_name, Key=key, ConsistentRead=True)
        except ClientError as error:
            translated = translate_client_error(error, "GetItem")
            if isinstance(translated, RetryableError):
                raise OrderStoreUnavailableError("the order store is unavailable; retry later") from error
            raise translated from error
        except BotoCoreError as error:
            raise OrderStoreUnavailableError("the order store did not answer; retry later") from error
        item: Item | None = response.get("Item")
        return item


def _idempotency_taken(label: str, index: int, old: Item | None) -> IdempotencyKeyTakenError:
    return IdempotencyKeyTakenError(label, index=index, existing=old)


def _version_mismatch(label: str, index: int, old: Item | None) -> OrderVersionMismatchError:
    return OrderVersionMismatchError(label, index=index, existing=old)


def _failed_entry(error: ConditionFailedError, index: int) -> bool:
    """Whether the cancelled transaction's entry `index` failed its own condition (CancellationReasons)."""
    return not error.reasons or (index < len(error.reasons) and error.reasons[index] == CONDITION_FAILED)


def _key_of(change: OrderChange) -> str:
    assert change.idempotency is not None  # noqa: S101 - only reachable when a record was written
    return change.idempotency.key


def order_to_item(order: Order) -> dict[str, Any]:
    return {
        **order_key(order.order_id),
        "entity": {"S": "ORDER"},
        "order_id": {"S": order.order_id},
        "customer_id": {"S": order.customer_id},
        "currency": {"S": order.currency},
        # Money as exact decimal text (S): a number attribute would drop trailing zeros.
        "items": {
            "L": [
                {
                    "M": {
                        "sku": {"S": line.sku},
                        "quantity": {"N": str(line.quantity)},
                        "unit_price": {"S": line.to_dict(order.currency)["unit_price"]},
                    }
                }
                for line in order.lines
            ]
        },
        "total": {"S": order.total_text},
        "status": {"S": order.status.value},
        "version": {"N": str(order.version)},
        "last_seq": {"N": str(order.last_seq)},
        "created_at": {"S": order.created_at},
        "updated_at": {"S": order.updated_at},
    }


def order_from_item(item: Item) -> Order:
    return Order(
        order_id=item["order_id"]["S"],
        customer_id=item["customer_id"]["S"],
        currency=item["currency"]["S"],
        lines=tuple(
            OrderLine(
                sku=line["M"]["sku"]["S"],
                quantity=int(line["M"]["quantity"]["N"]),
                unit_price=Decimal(line["M"]["unit_price"]["S"]),
            )
            for line in item["items"]["L"]
        ),
        status=OrderStatus(item["status"]["S"]),
        version=int(item["version"]["N"]),
        last_seq=int(item["last_seq"]["N"]),
        created_at=item["created_at"]["S"],
        updated_at=item["updated_at"]["S"],
    )


def idempotency_to_item(record: IdempotencyRecord) -> dict[str, Any]:
    return {
        **idempotency_key(record.key),
        "entity": {"S": "IDEMPOTENCY"},
        "command": {"S": record.command.value},
        "order_id": {"S": record.order_id},
        "request_hash": {"S": record.request_hash},
        "response": {"S": json.dumps(record.response.to_dict(), separators=(",", ":"), sort_keys=True)},
        "created_at": {"S": record.created_at},
        EXPIRES_AT: {"N": str(record.expires_at)},
    }


def idempotency_from_item(item: Item) -> IdempotencyRecord:
    return IdempotencyRecord(
        key=item[PARTITION_KEY]["S"].removeprefix(IDEMPOTENCY_PREFIX),
        command=Command(item["command"]["S"]),
        order_id=item["order_id"]["S"],
        request_hash=item["request_hash"]["S"],
        response=CommandResult.from_dict(json.loads(item["response"]["S"]), replayed=True),
        created_at=item["created_at"]["S"],
        expires_at=int(item[EXPIRES_AT]["N"]),
    )
