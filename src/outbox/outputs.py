"""The CloudFormation outputs through which tools find a deployed outbox stack.

The `Outbox` construct (outbox_cdk) writes them; the operations commands, `outbox demo` and the local runtime
read them by these names, so a deployed stack and the tools that inspect it cannot drift apart.
"""

from __future__ import annotations

from typing import Final

OUTBOX_TABLE_NAME: Final = "OutboxTableName"
OUTBOX_TABLE_STREAM_ARN: Final = "OutboxTableStreamArn"
TOPIC_ARN: Final = "TopicArn"
EVENT_BUS_NAME: Final = "EventBusName"
EVENT_SOURCE: Final = "EventSource"
POISON_QUEUE_URL: Final = "PoisonQueueUrl"
ON_FAILURE_QUEUE_URL: Final = "OnFailureQueueUrl"
ALARM_TOPIC_ARN: Final = "AlarmTopicArn"
PUBLISHER_FUNCTION_NAME: Final = "PublisherFunctionName"
SWEEPER_FUNCTION_NAME: Final = "SweeperFunctionName"
DASHBOARD_NAME: Final = "DashboardName"
OPERATOR_POLICY_ARN: Final = "OperatorPolicyArn"

# Every output whose key ends with this is a consumer's dead-letter queue (the inbox consumer construct writes
# `<ConsumerId>DeadLetterQueueUrl`); a second outbox in one stack prefixes the names above (`outputs_prefix`).
DEAD_LETTER_QUEUE_URL_SUFFIX: Final = "DeadLetterQueueUrl"

OUTBOX_OUTPUTS: Final = (
    OUTBOX_TABLE_NAME,
    OUTBOX_TABLE_STREAM_ARN,
    TOPIC_ARN,
    EVENT_BUS_NAME,
    EVENT_SOURCE,
    POISON_QUEUE_URL,
    ON_FAILURE_QUEUE_URL,
    ALARM_TOPIC_ARN,
    PUBLISHER_FUNCTION_NAME,
    SWEEPER_FUNCTION_NAME,
    DASHBOARD_NAME,
    OPERATOR_POLICY_ARN,
)
"""What the `Outbox` construct writes, each prefixed by its `outputs_prefix` (TopicArn, EventBusName and
EventSource only for the destinations it has)."""

# With regions (outbox_cdk.regions), every region's stack writes these too (each prefixed likewise): the
# regions in ring order, comma-separated, home first; the takeover time. `outbox status` reads the heartbeats
# by them.
OUTBOX_REGIONS: Final = "OutboxRegions"
TAKEOVER_AFTER_SECONDS: Final = "OutboxTakeoverAfterSeconds"
REGION_OUTPUTS: Final = (OUTBOX_REGIONS, TAKEOVER_AFTER_SECONDS)


def alarm_name(outbox_name: str, alarm: str) -> str:
    """The name of one of an outbox's alarms (`PoisonQueueDepth`, ...): `<outbox name>-<alarm>`. An outbox's
    name is its DashboardName output's value (outbox_cdk.naming)."""
    return f"{outbox_name}-{alarm}"


# The sample app's own.
ORDERS_TABLE_NAME: Final = "OrdersTableName"
API_URL: Final = "ApiUrl"
ORDERS_API_FUNCTION_NAME: Final = "OrdersApiFunctionName"
SAMPLE_TOPIC_CONSUMER_QUEUE_URL: Final = "SampleTopicConsumerQueueUrl"
SAMPLE_BUS_CONSUMER_QUEUE_URL: Final = "SampleBusConsumerQueueUrl"
ORDER_SUMMARY_TABLE_NAME: Final = "OrderSummaryTableName"
ORDER_SUMMARY_DEAD_LETTER_QUEUE_URL: Final = f"OrderSummary{DEAD_LETTER_QUEUE_URL_SUFFIX}"
CANCELLATIONS_TABLE_NAME: Final = "CancellationsTableName"
CANCELLATIONS_DEAD_LETTER_QUEUE_URL: Final = f"Cancellations{DEAD_LETTER_QUEUE_URL_SUFFIX}"
