"""Lambda entry point of the order-summary consumer (strict ordering, every Order event, from the topic)."""

import outbox_tracing
from order_consumers.projections import OrderSummaryProjection
from outbox_inbox.function import SqsConsumerFunction

function = SqsConsumerFunction(
    "order-summary",
    lambda config: OrderSummaryProjection(config.inbox.table_name),
    tracer=outbox_tracing.tracer("order-summary"),
)
handler = function.handler
