"""The Orders API handler on moto, and what its answers may have written: shared by the HTTP API's entry
points (the Lambda handler itself, and the local HTTP API in front of it)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from orders.repository import DynamoDBOrderRepository
from orders.service import OrderService
from orders_api import handler as api
from tests.hardening.checks import OUTBOX_KEY, TableState, key_of, restore, unexpected_changes
from tests.support.aws import Tables

ORDER_KEY = ("pk",)
ERROR_CODES = frozenset(
    {
        "validation_error",
        "order_not_found",
        "invalid_transition",
        "version_conflict",
        "precondition_failed",
        "idempotency_key_reused",
        "route_not_found",
    }
)
"""The typed errors the API answers with (docs/api.md); anything else is no typed answer."""


@contextlib.contextmanager
def orders_service(dynamodb: Any, tables: Tables) -> Iterator[None]:
    """The handler with its service on these moto tables (its injection seam), reset afterwards."""
    api.set_service(
        OrderService(
            DynamoDBOrderRepository(dynamodb, orders_table=tables.orders, outbox_table=tables.outbox)
        )
    )
    try:
        yield
    finally:
        api.set_service(None)


@dataclass(frozen=True)
class Snapshot:
    orders: TableState
    outbox: TableState


@dataclass(frozen=True)
class OrdersTables:
    dynamodb: Any
    tables: Tables

    def read(self) -> Snapshot:
        return Snapshot(
            TableState.read(self.dynamodb, self.tables.orders, ORDER_KEY),
            TableState.read(self.dynamodb, self.tables.outbox, OUTBOX_KEY),
        )

    def put_back(self, before: Snapshot, after: Snapshot) -> None:
        restore(self.dynamodb, before.orders, after.orders)
        restore(self.dynamodb, before.outbox, after.outbox)


def nothing_written(before: Snapshot, after: Snapshot) -> list[str]:
    return unexpected_changes(before.orders, after.orders, set()) + unexpected_changes(
        before.outbox, after.outbox, set()
    )


def accepted_writes(
    before: Snapshot, after: Snapshot, body: Mapping[str, Any], headers: Mapping[str, Any]
) -> list[str]:
    """A read (no event in the answer) or a replay writes nothing; a command writes its order, its idempotency
    record (with a key) and exactly one outbox row: the event it answered with."""
    if "event_id" not in body or any(name.lower() == "idempotent-replayed" for name in headers):
        return nothing_written(before, after)
    order_key = key_of({"pk": {"S": f"ORDER#{body['order_id']}"}}, ORDER_KEY)
    idempotency = {key for key in before.orders.changed_keys(after.orders) if '"IDEMPOTENCY#' in key}
    problems = unexpected_changes(before.orders, after.orders, {order_key, *idempotency})
    changed = before.outbox.changed_keys(after.outbox)
    written = [after.outbox.items[key] for key in changed if key in after.outbox.items]
    if len(written) != len(changed) or [row["event_id"]["S"] for row in written] != [body["event_id"]]:
        problems.append(
            f"the outbox rows changed are not exactly event {body['event_id']}: {sorted(changed)}"
        )
    stored = after.orders.items.get(order_key)
    if stored is None or stored["version"]["N"] != str(body["version"]):
        problems.append(f"order {body['order_id']} is not stored at version {body['version']}")
    return problems
