"""Stable Outputs, destinations and the sample consumers the local demo reads."""

from typing import Any

from outbox_publisher.messages import SQS_MAX_MESSAGE_BYTES
from tests.infra.template_queries import only

DOCUMENTED_OUTPUTS = {
    "OrdersTableName",
    "OutboxTableName",
    "OutboxTableStreamArn",
    "ApiUrl",
    "TopicArn",
    "EventBusName",
    "EventSource",
    "PoisonQueueUrl",
    "OnFailureQueueUrl",
    "AlarmTopicArn",
    "OrdersApiFunctionName",
    "PublisherFunctionName",
    "SweeperFunctionName",
    "DashboardName",
    "OperatorPolicyArn",
    "SampleTopicConsumerQueueUrl",
    "SampleBusConsumerQueueUrl",
    "OrderSummaryTableName",
    "OrderSummaryDeadLetterQueueUrl",
    "CancellationsTableName",
    "CancellationsDeadLetterQueueUrl",
}


def test_every_documented_output_exists_with_a_description(template: dict[str, Any]) -> None:
    # Given the synthesized stack (sample consumers on, as in app.py)
    # When its outputs are listed
    outputs = template["Outputs"]

    # Then exactly the documented names exist (their logical IDs are the names) and each says what it is
    assert set(outputs) == DOCUMENTED_OUTPUTS
    assert all(o["Description"] for o in outputs.values())


def test_outputs_point_at_the_right_resources(template: dict[str, Any]) -> None:
    # Given the resources
    outputs = template["Outputs"]
    orders, _ = only(template, "AWS::DynamoDB::Table", "TablesOrdersTable")
    outbox, _ = only(template, "AWS::DynamoDB::Table", "OutboxTable")
    topic, _ = only(template, "AWS::SNS::Topic", "OutboxDestinationsTopic")
    poison, _ = only(template, "AWS::SQS::Queue", "OutboxFailureQueuesPoisonQueue")
    on_failure, _ = only(template, "AWS::SQS::Queue", "OutboxFailureQueuesOnFailureQueue")
    topic_queue, _ = only(template, "AWS::SQS::Queue", "SampleConsumersTopicConsumerQueue")
    bus_queue, _ = only(template, "AWS::SQS::Queue", "SampleConsumersBusConsumerQueue")

    # When the outputs are resolved to references
    # Then each names the resource it documents
    assert outputs["OrdersTableName"]["Value"] == {"Ref": orders}
    assert outputs["OutboxTableName"]["Value"] == {"Ref": outbox}
    assert outputs["OutboxTableStreamArn"]["Value"] == {"Fn::GetAtt": [outbox, "StreamArn"]}
    assert outputs["TopicArn"]["Value"] == {"Ref": topic}
    assert outputs["PoisonQueueUrl"]["Value"] == {"Ref": poison}
    assert outputs["OnFailureQueueUrl"]["Value"] == {"Ref": on_failure}
    assert outputs["SampleTopicConsumerQueueUrl"]["Value"] == {"Ref": topic_queue}
    assert outputs["SampleBusConsumerQueueUrl"]["Value"] == {"Ref": bus_queue}
    assert outputs["EventSource"]["Value"] == "outbox.orders"


def test_poison_queue_takes_a_whole_row(template: dict[str, Any]) -> None:
    # Given the poison queue, which receives whole outbox rows (up to DynamoDB's 400 KB item) plus the reason
    _, poison = only(template, "AWS::SQS::Queue", "OutboxFailureQueuesPoisonQueue")

    # Then it accepts SQS's largest message, the size the publisher fits its poison messages into
    assert poison["Properties"]["MaximumMessageSize"] == SQS_MAX_MESSAGE_BYTES == 1_048_576


def test_bus_has_an_archive_for_replay(template: dict[str, Any]) -> None:
    # Given the bus and its archive
    bus, _ = only(template, "AWS::Events::EventBus")
    _, archive = only(template, "AWS::Events::Archive")

    # When the archive is read
    props = archive["Properties"]

    # Then it keeps this source's events from this bus for a bounded time
    assert props["SourceArn"] == {"Fn::GetAtt": [bus, "Arn"]}
    assert props["EventPattern"] == {"source": ["outbox.orders"]}
    assert props["RetentionDays"] == 30


def test_topic_consumer_gets_raw_envelopes(template: dict[str, Any]) -> None:
    # Given the sample subscription
    topic, _ = only(template, "AWS::SNS::Topic", "OutboxDestinationsTopic")
    queue, _ = only(template, "AWS::SQS::Queue", "SampleConsumersTopicConsumerQueue")
    _, subscription = only(template, "AWS::SNS::Subscription", "SampleConsumersTopicConsumerQueue")

    # When it is read
    # Then the queue receives the envelope itself (raw delivery) from the events topic
    assert subscription["Properties"] == {
        "Endpoint": {"Fn::GetAtt": [queue, "Arn"]},
        "Protocol": "sqs",
        "RawMessageDelivery": True,
        "TopicArn": {"Ref": topic},
    }


def test_bus_consumer_rule_matches_the_source_and_names_the_bus_by_getatt(template: dict[str, Any]) -> None:
    # Given the sample rule
    bus, _ = only(template, "AWS::Events::EventBus")
    queue, _ = only(template, "AWS::SQS::Queue", "SampleConsumersBusConsumerQueue")
    _, rule = only(template, "AWS::Events::Rule", "SampleConsumersBusConsumerRule")

    # When it is read
    props = rule["Properties"]

    # Then it matches the outbox source on our bus (GetAtt Name, which moto can provision) into the queue
    assert props["EventBusName"] == {"Fn::GetAtt": [bus, "Name"]}
    assert props["EventPattern"] == {"source": ["outbox.orders"]}
    assert [t["Arn"] for t in props["Targets"]] == [{"Fn::GetAtt": [queue, "Arn"]}]


def test_fifo_topic_gets_a_fifo_consumer_queue() -> None:
    # Given a small stack with a FIFO destinations topic and the sample consumers
    from aws_cdk import App, Stack
    from aws_cdk import aws_sns as sns
    from aws_cdk.assertions import Template

    from infra.consumers import SampleConsumers
    from outbox_cdk.destinations import DestinationsProps, OutboxDestinations
    from outbox_cdk.functions import powertools_layer
    from outbox_cdk.table import DataTableProps

    stack = Stack(App(), "FifoProbe")
    destinations = OutboxDestinations(stack, "Destinations", DestinationsProps(fifo_topic=True))
    assert destinations.topic is not None
    assert destinations.event_bus is not None
    SampleConsumers(
        stack,
        "SampleConsumers",
        topic=destinations.topic,
        fifo_topic=True,
        event_bus=destinations.event_bus,
        event_source="outbox.orders",
        tables=DataTableProps(),
        alarm_topic=sns.Topic(stack, "Alarms"),
        powertools_layer=powertools_layer(stack),
    )

    # When it is synthesized
    template = Template.from_stack(stack).to_json()

    # Then the topic is FIFO without content-based dedup, and its subscribed queue is FIFO
    _, topic = only(template, "AWS::SNS::Topic", "Destinations")
    _, topic_queue = only(template, "AWS::SQS::Queue", "SampleConsumersTopicConsumerQueue")
    _, bus_queue = only(template, "AWS::SQS::Queue", "SampleConsumersBusConsumerQueue")
    assert topic["Properties"]["FifoTopic"] is True
    assert topic["Properties"]["ContentBasedDeduplication"] is False
    assert topic["Properties"]["TopicName"].endswith(".fifo")
    assert topic_queue["Properties"]["FifoQueue"] is True
    assert "FifoQueue" not in bus_queue["Properties"]
    # and the order-summary consumer's queue and dead-letter queue are FIFO too
    _, summary_queue = only(template, "AWS::SQS::Queue", "SampleConsumersOrderSummaryQueue")
    _, summary_dead_letters = only(template, "AWS::SQS::Queue", "SampleConsumersOrderSummaryDeadLetterQueue")
    assert summary_queue["Properties"]["FifoQueue"] is True
    assert summary_dead_letters["Properties"]["FifoQueue"] is True
