"""Lambda entry point of the order-summary consumer (strict ordering, every Order event, from the topic)."""

from order_consumers.projections import OrderSummaryProjection
from outbox_inbox.function import SqsConsumerFunction

function = SqsConsumerFunction(
    "order-summary", lambda config: OrderSummaryProjection(config.inbox.table_name)
)
handler = function.handler
