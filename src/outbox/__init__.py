"""The outbox core library: the row contract, and writing rows atomically with business changes.

Typical use from a Lambda of your own::

    from outbox import OutboxEvent, OutboxWriter, Transaction, TableKeys, DynamoDBTransactionExecutor
    from outbox.aws import client

    tx = Transaction()
    tx.put(TableKeys("orders", "pk"), order_item, label="order", condition="attribute_not_exists(pk)")
    OutboxWriter("outbox").append(tx, OutboxEvent.new(aggregate_type="Order", aggregate_id="o-1", seq=1,
                                                     event_type="OrderPlaced", payload={"total": "9.99"}))
    DynamoDBTransactionExecutor(client("dynamodb")).execute(tx)   # all or nothing
"""

from outbox.dynamodb import DynamoDBTransactionExecutor
from outbox.errors import (
    AwsCallError,
    AwsUnavailableError,
    ConditionFailedError,
    ConfigurationError,
    DuplicateEventError,
    DuplicateItemKeyError,
    InvalidEventError,
    InvalidOutboxRowError,
    InvalidPayloadError,
    ItemTooLargeError,
    OutboxError,
    OutboxValidationError,
    RetryableError,
    SchemaError,
    SchemaViolationError,
    ThrottledError,
    TooManyActionsError,
    TransactionCancelledError,
    TransactionConflictError,
    TransactionTooLargeError,
    TransactionValidationError,
    UnknownSchemaError,
)
from outbox.model import OutboxEvent, OutboxStatus
from outbox.payload_store import (
    PayloadMissingError,
    PayloadStore,
    PayloadStoreError,
    PayloadTooLargeError,
    PayloadUnavailableError,
)
from outbox.schemas import SchemaRegistry
from outbox.transaction import TableKeys, Transaction, TransactionExecutor
from outbox.writer import OutboxWriter

__all__ = [
    "AwsCallError",
    "AwsUnavailableError",
    "ConditionFailedError",
    "ConfigurationError",
    "DuplicateEventError",
    "DuplicateItemKeyError",
    "DynamoDBTransactionExecutor",
    "InvalidEventError",
    "InvalidOutboxRowError",
    "InvalidPayloadError",
    "ItemTooLargeError",
    "OutboxError",
    "OutboxEvent",
    "OutboxStatus",
    "OutboxValidationError",
    "OutboxWriter",
    "PayloadMissingError",
    "PayloadStore",
    "PayloadStoreError",
    "PayloadTooLargeError",
    "PayloadUnavailableError",
    "RetryableError",
    "SchemaError",
    "SchemaRegistry",
    "SchemaViolationError",
    "TableKeys",
    "ThrottledError",
    "TooManyActionsError",
    "Transaction",
    "TransactionCancelledError",
    "TransactionConflictError",
    "TransactionExecutor",
    "TransactionTooLargeError",
    "TransactionValidationError",
    "UnknownSchemaError",
]
