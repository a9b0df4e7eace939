"""What each sample consumer writes for an event: pure functions from an envelope to DynamoDB actions.

Both consumers keep their inbox records and their read model in one table of their own (partition key
`pk`): the inbox's records are prefixed with the consumer's name, the read model's items with `order#` or
`cancellation#`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from outbox.transaction import TableKeys, Transaction
from outbox_inbox.envelope import Envelope
from outbox_inbox.errors import MalformedEnvelopeError
from outbox_inbox.inbox import PARTITION_KEY

SUMMARY_PREFIX: Final = "order#"
CANCELLATION_PREFIX: Final = "cancellation#"
# Every event type of the Order aggregate: the summary consumer's subscription passes exactly these, and,
# strict, it must receive every event of an order (a type missing here would leave gaps that wait).
ORDER_EVENT_TYPES: Final = ("OrderPlaced", "OrderConfirmed", "OrderCancelled")
CANCELLED_EVENT_TYPE: Final = "OrderCancelled"


def summary_key(order_id: str) -> dict[str, dict[str, str]]:
    return {PARTITION_KEY: {"S": f"{SUMMARY_PREFIX}{order_id}"}}


def cancellation_key(order_id: str) -> dict[str, dict[str, str]]:
    return {PARTITION_KEY: {"S": f"{CANCELLATION_PREFIX}{order_id}"}}


class OrderSummaryProjection:
    """One item per order: its customer, total, number of items, status and the seq it reflects.

    Strict ordering: an order's events apply one after the other, so OrderPlaced creates the item and each
    status change updates it; the condition only guards against a broken contract (a status event without
    its OrderPlaced), which then fails loudly and is retried, never half-applied.
    """

    def __init__(self, table_name: str) -> None:
        self._table = TableKeys(table_name, PARTITION_KEY)

    def __call__(self, envelope: Envelope, transaction: Transaction) -> None:
        payload = envelope.payload
        if envelope.event_type == "OrderPlaced":
            lines = _field(payload, "lines", list)
            item_count = sum(int(_field(line, "quantity", int)) for line in lines)
            transaction.put(
                self._table,
                {
                    **summary_key(envelope.aggregate_id),
                    "order_id": {"S": envelope.aggregate_id},
                    "customer_id": {"S": _field(payload, "customer_id", str)},
                    "currency": {"S": _field(payload, "currency", str)},
                    "total": {"S": _field(payload, "total", str)},
                    "item_count": {"N": str(item_count)},
                    "status": {"S": "PLACED"},
                    "last_seq": {"N": str(envelope.seq)},
                    "updated_at": {"S": envelope.occurred_at},
                },
                label="order summary",
            )
        elif envelope.event_type in ORDER_EVENT_TYPES:
            transaction.update(
                self._table,
                summary_key(envelope.aggregate_id),
                "SET #status = :status, last_seq = :seq, updated_at = :at",
                label="order summary",
                condition="attribute_exists(pk)",
                names={"#status": "status"},
                values={
                    ":status": {"S": _field(payload, "status", str)},
                    ":seq": {"N": str(envelope.seq)},
                    ":at": {"S": envelope.occurred_at},
                },
            )


class CancellationLedger:
    """One item per cancelled order. It sees only OrderCancelled (a bus rule filters), so `latest` ordering:
    seq 3 with seqs 1 and 2 never delivered to it is not a gap."""

    def __init__(self, table_name: str) -> None:
        self._table = TableKeys(table_name, PARTITION_KEY)

    def __call__(self, envelope: Envelope, transaction: Transaction) -> None:
        if envelope.event_type != CANCELLED_EVENT_TYPE:
            return
        transaction.put(
            self._table,
            {
                **cancellation_key(envelope.aggregate_id),
                "order_id": {"S": envelope.aggregate_id},
                "previous_status": {"S": _field(envelope.payload, "previous_status", str)},
                "cancelled_at": {"S": envelope.occurred_at},
                "seq": {"N": str(envelope.seq)},
            },
            label="cancellation",
        )


def _field(document: object, name: str, kind: type) -> Any:
    """A payload field of the documented type. A payload that breaks its schema can never be applied: the
    consumer dead-letters it with this reason (field names only, no values)."""
    value = document.get(name) if isinstance(document, Mapping) else None
    if not isinstance(value, kind) or isinstance(value, bool):
        raise MalformedEnvelopeError(f"payload field {name} is not a {kind.__name__}")
    return value
