"""Names and sizes of the sample app (the reusable constructs keep theirs in `outbox_cdk.constants`)."""

from __future__ import annotations

from typing import Final

STACK_ID: Final = "OutboxStack"

ORDERS_API_HANDLER: Final = "orders_api.handler.handler"
# The packages the Orders API's asset ships what its handler imports from: the library's (the core, and the
# publisher's tracer) and the sample's own.
SAMPLE_PACKAGES: Final = ("outbox", "outbox_tracing", "orders", "orders_api")
ORDERS_API_SERVICE: Final = "orders-api"

ORDERS_API_MEMORY_MB: Final = 256
ORDERS_API_TIMEOUT_SECONDS: Final = 10
# Caps the API's share of account concurrency and the write rate it can push into the two tables.
ORDERS_API_RESERVED_CONCURRENCY: Final = 20

API_THROTTLE_RATE_LIMIT: Final = 50
API_THROTTLE_BURST_LIMIT: Final = 100
ORDERS_API_ROUTES: Final = (
    ("POST", "/orders"),
    ("GET", "/orders/{id}"),
    ("POST", "/orders/{id}/confirm"),
    ("POST", "/orders/{id}/cancel"),
)

# TransactWriteItems has no IAM action of its own: DynamoDB authorizes each item in it by its kind
# (Put -> PutItem, Update -> UpdateItem, ConditionCheck -> ConditionCheckItem). The API's transaction
# Puts (order and idempotency record on Orders, the event on Outbox; a confirm/cancel that read the
# order is a Put conditioned on the version) and Updates (a confirm/cancel with If-Match updates the
# order's status without reading it), and it reads orders with GetItem. Add an action here only
# together with the code that calls it.
ORDERS_API_ORDERS_TABLE_ACTIONS: Final = ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem")
ORDERS_API_OUTBOX_TABLE_ACTIONS: Final = ("dynamodb:PutItem",)
# The partition keys the API writes: orders and idempotency records (orders.repository), the Order
# aggregate's outbox rows (outbox.model.aggregate_key).
ORDERS_TABLE_KEY_PATTERNS: Final = ("ORDER#*", "IDEMPOTENCY#*")
OUTBOX_TABLE_KEY_PATTERNS: Final = ("Order#*",)

# The sample's inbox consumers (infra.consumers); their packages ship with the library's.
CONSUMER_PACKAGES: Final = ("outbox", "outbox_tracing", "outbox_inbox", "order_consumers")
ORDER_SUMMARY_CONSUMER: Final = "order-summary"
ORDER_SUMMARY_HANDLER: Final = "order_consumers.summary_handler.handler"
CANCELLATIONS_CONSUMER: Final = "order-cancellations"
CANCELLATIONS_HANDLER: Final = "order_consumers.cancellations_handler.handler"
