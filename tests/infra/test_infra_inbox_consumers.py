"""The sample's inbox consumers in the synthesized template: queue, dead-letter queue, function, table,
alarm and least-privilege role, and the construct's refusals."""

from typing import Any

import pytest
from aws_cdk import App, Duration, Stack
from aws_cdk import aws_sns as sns
from aws_cdk.assertions import Template

from outbox_cdk.consumers import InboxConsumer, InboxConsumerProps
from outbox_cdk.errors import OutboxConstructError
from outbox_cdk.functions import FunctionSettings
from outbox_inbox.inbox import Ordering
from tests.infra.template_queries import (
    actions_by_resource,
    function_by_handler,
    only,
    resources,
    role_of,
    statements_of_role,
)

SUMMARY_HANDLER = "order_consumers.summary_handler.handler"
CANCELLATIONS_HANDLER = "order_consumers.cancellations_handler.handler"
QUEUE_CONSUME = {
    "sqs:ReceiveMessage",
    "sqs:ChangeMessageVisibility",
    "sqs:GetQueueUrl",
    "sqs:DeleteMessage",
    "sqs:GetQueueAttributes",
}
# No GetItem: only external effects read first (the sample's consumers have none).
INBOX_ACTIONS = {"dynamodb:PutItem", "dynamodb:UpdateItem"}


@pytest.mark.parametrize(
    ("prefix", "handler", "ordering"),
    [
        ("SampleConsumersOrderSummary", SUMMARY_HANDLER, "strict"),
        ("SampleConsumersCancellations", CANCELLATIONS_HANDLER, "latest"),
    ],
)
def test_each_consumer_is_wired_so_that_no_message_is_lost(
    template: dict[str, Any], prefix: str, handler: str, ordering: str
) -> None:
    # Given one sample consumer's resources
    queue, queue_resource = only(template, "AWS::SQS::Queue", f"{prefix}Queue")
    dead_letters, _ = only(template, "AWS::SQS::Queue", f"{prefix}DeadLetterQueue")
    table, table_resource = only(template, "AWS::DynamoDB::Table", f"{prefix}Table")
    function_id, function = function_by_handler(template, handler)
    [mapping] = [
        m["Properties"]
        for m in resources(template, "AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["FunctionName"] == {"Ref": function_id}
    ]
    # Then the queue feeds the function with partial batch responses
    assert mapping["EventSourceArn"] == {"Fn::GetAtt": [queue, "Arn"]}
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["BatchSize"] == 10
    # And its visibility is six times the function's timeout, its redrive lets a gap wait 15 minutes first
    properties = queue_resource["Properties"]
    assert properties["VisibilityTimeout"] == 6 * function["Properties"]["Timeout"] == 180
    assert properties["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [dead_letters, "Arn"]},
        "maxReceiveCount": 8,
    }
    assert properties["SqsManagedSseEnabled"] is True
    # And the function knows its table, its ordering and its dead-letter queue
    variables = function["Properties"]["Environment"]["Variables"]
    assert variables["INBOX_TABLE_NAME"] == {"Ref": table}
    assert variables["INBOX_ORDERING"] == ordering
    assert variables["INBOX_MAX_GAP_WAIT_SECONDS"] == "900"
    assert variables["INBOX_DEDUPE_WINDOW_SECONDS"] == str(7 * 24 * 3600)
    assert variables["INBOX_DEAD_LETTER_QUEUE_URL"] == {"Ref": dead_letters}
    # And the table has the inbox's key and TTL, point-in-time recovery, and is retained
    assert table_resource["Properties"]["KeySchema"] == [{"AttributeName": "pk", "KeyType": "HASH"}]
    assert table_resource["Properties"]["TimeToLiveSpecification"] == {
        "AttributeName": "expires_at",
        "Enabled": True,
    }
    assert table_resource["DeletionPolicy"] == "Retain"
    # And its role may do exactly what the inbox, its effect and the event source call
    granted = actions_by_resource(statements_of_role(template, role_of(function)))
    assert granted[f"GetAtt:{table}.Arn"] == INBOX_ACTIONS
    assert granted[f"GetAtt:{dead_letters}.Arn"] == {"sqs:SendMessage"}
    assert granted[f"GetAtt:{queue}.Arn"] == QUEUE_CONSUME


@pytest.mark.parametrize("prefix", ["SampleConsumersOrderSummary", "SampleConsumersCancellations"])
def test_each_consumer_dead_letter_queue_has_an_alarm_on_its_first_message(
    template: dict[str, Any], prefix: str
) -> None:
    dead_letters, _ = only(template, "AWS::SQS::Queue", f"{prefix}DeadLetterQueue")
    alarm = next(
        a["Properties"]
        for a in resources(template, "AWS::CloudWatch::Alarm").values()
        if {"Name": "QueueName", "Value": {"Fn::GetAtt": [dead_letters, "QueueName"]}}
        in a["Properties"].get("Dimensions", [])
    )
    assert alarm["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert alarm["Threshold"] == 1
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert "Runbook: docs/runbook.md#consumerdeadletters" in alarm["AlarmDescription"]
    assert alarm["AlarmActions"]
    assert alarm["OKActions"]


def test_the_summary_consumer_receives_every_order_event_type_and_the_cancellations_one_only_cancels(
    template: dict[str, Any],
) -> None:
    queue, _ = only(template, "AWS::SQS::Queue", "SampleConsumersOrderSummaryQueue")
    [subscription] = [
        s["Properties"]
        for s in resources(template, "AWS::SNS::Subscription").values()
        if s["Properties"]["Endpoint"] == {"Fn::GetAtt": [queue, "Arn"]}
    ]
    assert subscription["RawMessageDelivery"] is True
    assert subscription["FilterPolicy"] == {"event_type": ["OrderPlaced", "OrderConfirmed", "OrderCancelled"]}
    _, rule = only(template, "AWS::Events::Rule", "SampleConsumersCancellationsRule")
    assert rule["Properties"]["EventPattern"] == {
        "detail-type": ["OrderCancelled"],
        "source": ["outbox.orders"],
    }


def test_what_sns_or_eventbridge_cannot_deliver_to_a_consumer_queue_goes_to_its_dead_letter_queue(
    template: dict[str, Any],
) -> None:
    # Given the two delivery legs into the consumers' queues
    summary_queue, _ = only(template, "AWS::SQS::Queue", "SampleConsumersOrderSummaryQueue")
    summary_dead_letters, _ = only(template, "AWS::SQS::Queue", "SampleConsumersOrderSummaryDeadLetterQueue")
    cancellations_dead_letters, _ = only(
        template, "AWS::SQS::Queue", "SampleConsumersCancellationsDeadLetterQueue"
    )
    [subscription] = [
        s["Properties"]
        for s in resources(template, "AWS::SNS::Subscription").values()
        if s["Properties"]["Endpoint"] == {"Fn::GetAtt": [summary_queue, "Arn"]}
    ]
    _, rule = only(template, "AWS::Events::Rule", "SampleConsumersCancellationsRule")
    # Then neither drops what it cannot deliver: each sends it to the consumer's dead-letter queue
    assert subscription["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [summary_dead_letters, "Arn"]}
    }
    [target] = rule["Properties"]["Targets"]
    assert target["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": [cancellations_dead_letters, "Arn"]}}


def _consumer(props: InboxConsumerProps) -> dict[str, Any]:
    """A stack holding only an InboxConsumer with `props`: its template."""
    stack = Stack(App(), "ConsumerStack")
    InboxConsumer(
        stack,
        "Consumer",
        consumer_name="c",
        handler=SUMMARY_HANDLER,
        vendored=("outbox", "outbox_inbox", "order_consumers"),
        description="test consumer",
        props=props,
        alarm_topic=sns.Topic(stack, "Alarms"),
    )
    return dict(Template.from_stack(stack).to_json())


def test_a_redrive_that_would_cut_a_gap_wait_short_is_refused() -> None:
    with pytest.raises(OutboxConstructError, match="before its 900 s wait ends"):
        _consumer(InboxConsumerProps(ordering=Ordering.STRICT, max_receive_count=3))


def test_a_latest_consumer_may_choose_any_redrive() -> None:
    _consumer(
        InboxConsumerProps(ordering=Ordering.LATEST, max_receive_count=2, max_gap_wait=Duration.minutes(1))
    )


def test_a_fifo_consumer_takes_at_most_ten_messages_per_batch() -> None:
    with pytest.raises(OutboxConstructError, match="at most 10"):
        _consumer(InboxConsumerProps(fifo=True, batch_size=11))


def test_a_timeout_too_short_for_one_record_is_refused() -> None:
    with pytest.raises(OutboxConstructError, match="timeout of at least 24 s"):
        _consumer(InboxConsumerProps(function=FunctionSettings(timeout=Duration.seconds(10))))


@pytest.mark.parametrize("max_concurrency", [1, 1001])
def test_a_concurrency_an_sqs_mapping_does_not_take_is_refused(max_concurrency: int) -> None:
    with pytest.raises(OutboxConstructError, match="max_concurrency must be from 2 to 1000"):
        _consumer(InboxConsumerProps(max_concurrency=max_concurrency))


def test_a_concurrency_above_the_functions_reserved_one_is_refused() -> None:
    with pytest.raises(OutboxConstructError, match="above the function's reserved concurrency 4"):
        _consumer(
            InboxConsumerProps(
                max_concurrency=5,
                function=FunctionSettings(timeout=Duration.seconds(30), reserved_concurrency=4),
            )
        )


def test_a_consumer_bounds_its_queue_mapping_when_asked() -> None:
    # Given a consumer with a concurrency limit, and one without
    # When their queue mappings are read
    # Then the first is bounded there (not by reserved concurrency), the second by nothing but the backlog
    limited = only(_consumer(InboxConsumerProps(max_concurrency=5)), "AWS::Lambda::EventSourceMapping")[1]
    assert limited["Properties"]["ScalingConfig"] == {"MaximumConcurrency": 5}
    unlimited = only(_consumer(InboxConsumerProps()), "AWS::Lambda::EventSourceMapping")[1]
    assert "ScalingConfig" not in unlimited["Properties"]


def test_external_effects_in_latest_order_are_refused() -> None:
    with pytest.raises(OutboxConstructError, match="external effects need strict or unordered ordering"):
        _consumer(InboxConsumerProps(ordering=Ordering.LATEST, external_effects=True))


def test_external_effects_add_exactly_what_powertools_idempotency_calls() -> None:
    # Given a consumer construct with external effects
    # When its role is read
    template = _consumer(InboxConsumerProps(external_effects=True))
    table, _ = only(template, "AWS::DynamoDB::Table", "ConsumerTable")
    function = function_by_handler(template, SUMMARY_HANDLER)[1]
    granted = actions_by_resource(statements_of_role(template, role_of(function)))
    # Then it may also read (the inbox's check) and delete (Powertools' failed in-progress record)
    assert granted[f"GetAtt:{table}.Arn"] == INBOX_ACTIONS | {"dynamodb:GetItem", "dynamodb:DeleteItem"}
