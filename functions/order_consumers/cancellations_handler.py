"""Lambda entry point of the cancellations consumer (latest ordering, OrderCancelled only, from the bus)."""

import outbox_tracing
from order_consumers.projections import CancellationLedger
from outbox_inbox.function import SqsConsumerFunction

function = SqsConsumerFunction(
    "order-cancellations",
    lambda config: CancellationLedger(config.inbox.table_name),
    tracer=outbox_tracing.tracer("order-cancellations"),
)
handler = function.handler
