"""The reusable constructs composed as a user would: their own table, one destination, their own function.

Each stack is synthesized with cdk-nag attached, as the sample app is: a finding fails the synth.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from outbox.model import FAILED_INDEX_NAME, TTL_ATTRIBUTE
from outbox_cdk.errors import OutboxConstructError
from outbox_publisher.config import PublisherConfig
from outbox_publisher.routing import Destination
from tests.infra.template_queries import function_by_handler, only, resources
from tests.infra.user_tables import own_table

if TYPE_CHECKING:
    from aws_cdk import Stack

PUBLISHER = "outbox_publisher.handler.handler"


def _synth(tmp_path: Path, build: Callable[[Stack], None]) -> dict[str, Any]:
    from aws_cdk import App, Stack

    from outbox_cdk.nag import add_nag_checks

    app = App(outdir=str(tmp_path))
    stack = Stack(app, "UserStack")
    build(stack)
    add_nag_checks(app)
    template: dict[str, Any] = app.synth().get_stack_by_name("UserStack").template
    return template


def _environment(template: dict[str, Any]) -> dict[str, Any]:
    _, function = function_by_handler(template, PUBLISHER)
    environment: dict[str, Any] = function["Properties"]["Environment"]["Variables"]
    return environment


def _publisher_actions(template: dict[str, Any]) -> set[str]:
    actions: set[str] = set()
    for policy in resources(template, "AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            listed = statement["Action"]
            actions.update([listed] if isinstance(listed, str) else listed)
    return actions


def test_a_users_own_table_and_only_a_topic_synthesize_nag_clean(tmp_path: Path) -> None:
    # Given a user's stack: their own outbox table (NEW_AND_OLD_IMAGES, no index: the sweeper needs none),
    # their own topic, no bus; the sweeper and monitoring
    def build(stack: Stack) -> None:
        from aws_cdk import aws_sns as sns

        from outbox_cdk import OutboxMonitoring, OutboxPublisher, OutboxSweeper

        topic = sns.Topic(stack, "Events", enforce_ssl=True)
        table = own_table(stack)
        publisher = OutboxPublisher(stack, "Publisher", table=table, topic=topic)
        sweeper = OutboxSweeper(stack, "Sweeper", publisher=publisher)
        OutboxMonitoring(
            stack,
            "Monitoring",
            publisher_function=publisher.function,
            sweeper_function=sweeper.function,
            poison_queue=publisher.poison_queue,
            on_failure_queue=publisher.on_failure_queue,
        )

    # When it is synthesized with cdk-nag (it raises on any open finding)
    template = _synth(tmp_path, build)

    # Then the publisher reads the user's stream, publishes to SNS only, and may call nothing of EventBridge
    table_id, _ = only(template, "AWS::DynamoDB::Table", "MyOutbox")
    _, mapping = only(template, "AWS::Lambda::EventSourceMapping")
    assert mapping["Properties"]["EventSourceArn"] == {"Fn::GetAtt": [table_id, "StreamArn"]}
    environment = _environment(template)
    assert "TOPIC_ARN" in environment
    assert "EVENT_BUS_NAME" not in environment
    assert "EVENT_SOURCE" not in environment
    assert "events:PutEvents" not in _publisher_actions(template)
    # and the poison and on-failure queues it needs were created for it
    assert len(resources(template, "AWS::SQS::Queue")) == 2
    assert mapping["Properties"]["DestinationConfig"]["OnFailure"]["Destination"]


def test_only_an_event_bus_and_a_table_created_by_the_construct(tmp_path: Path) -> None:
    # Given a publisher with a bus and nothing else: it creates its table and its queues
    def build(stack: Stack) -> None:
        from aws_cdk import aws_events as events

        from outbox_cdk import OutboxPublisher, PublisherSettings

        bus = events.EventBus(stack, "Bus")
        OutboxPublisher(
            stack, "Publisher", event_bus=bus, settings=PublisherSettings(event_source="com.example.billing")
        )

    # When it is synthesized
    template = _synth(tmp_path, build)

    # Then its own table is the outbox table (NEW_AND_OLD_IMAGES stream, TTL for the rows an earlier release
    # kept, only the `failed` index: none is written per event) and SNS is absent
    _, table = only(template, "AWS::DynamoDB::Table")
    assert table["Properties"]["StreamSpecification"] == {"StreamViewType": "NEW_AND_OLD_IMAGES"}
    assert table["Properties"]["TimeToLiveSpecification"] == {"AttributeName": TTL_ATTRIBUTE, "Enabled": True}
    assert [index["IndexName"] for index in table["Properties"]["GlobalSecondaryIndexes"]] == [
        FAILED_INDEX_NAME
    ]
    environment = _environment(template)
    assert environment["EVENT_SOURCE"] == "com.example.billing"
    assert "TOPIC_ARN" not in environment
    assert "sns:Publish" not in _publisher_actions(template)


def test_typed_routes_become_the_configuration_the_publisher_reads(tmp_path: Path) -> None:
    # Given typed routes: Customer events to EventBridge only, everything else nowhere (poison)
    def build(stack: Stack) -> None:
        from aws_cdk import aws_events as events
        from aws_cdk import aws_sns as sns

        from outbox_cdk import OutboxPublisher, PublisherSettings, Route

        OutboxPublisher(
            stack,
            "Publisher",
            topic=sns.Topic(stack, "Events", enforce_ssl=True),
            event_bus=events.EventBus(stack, "Bus"),
            settings=PublisherSettings(
                routes=[Route((Destination.EVENTBRIDGE,), aggregate_type="Customer")], default_destinations=()
            ),
        )

    # When the template's environment is read back by the publisher's own configuration parser
    environment = _environment(_synth(tmp_path, build))
    resolved = {name: value if isinstance(value, str) else "x" for name, value in environment.items()}
    resolved["TOPIC_ARN"] = "arn:aws:sns:us-east-1:123456789012:events"
    config = PublisherConfig.from_env(resolved)

    # Then the routes are exactly the typed ones
    assert json.loads(environment["OUTBOX_ROUTES"]) == {
        "routes": [{"aggregate_type": "Customer", "destinations": ["eventbridge"]}],
        "default": [],
    }
    assert config.router.destinations_for("Customer", "CustomerCreated") == (Destination.EVENTBRIDGE,)
    assert config.router.destinations_for("Order", "OrderPlaced") == ()


def test_the_construct_can_run_a_function_of_the_users(tmp_path: Path) -> None:
    # Given the user's own function (their packaging, their sizing) handed to the construct
    def build(stack: Stack) -> None:
        from aws_cdk import aws_sns as sns

        from outbox_cdk import FunctionSettings, OutboxPublisher, PythonFunction

        own = PythonFunction(
            stack,
            "MyPublisher",
            handler=PUBLISHER,
            description="my publisher",
            environment={"MY_SETTING": "1"},
            settings=FunctionSettings(memory_mb=1024),
        )
        OutboxPublisher(
            stack,
            "Publisher",
            table=own_table(stack),
            topic=sns.Topic(stack, "T", enforce_ssl=True),
            function=own.function,
        )

    # When it is synthesized
    template = _synth(tmp_path, build)

    # Then there is one function, the user's, with their setting and the publisher's environment and mapping
    (function_id, function), *others = resources(template, "AWS::Lambda::Function").items()
    assert others == []
    assert function["Properties"]["MemorySize"] == 1024
    assert function["Properties"]["Environment"]["Variables"]["MY_SETTING"] == "1"
    assert "OUTBOX_TABLE_NAME" in function["Properties"]["Environment"]["Variables"]
    _, mapping = only(template, "AWS::Lambda::EventSourceMapping")
    assert mapping["Properties"]["FunctionName"] == {"Ref": function_id}


@pytest.mark.parametrize("view_type", ["KEYS_ONLY", "OLD_IMAGE"])
def test_a_stream_without_new_images_is_refused_at_synth(tmp_path: Path, view_type: str) -> None:
    # Given a user's table whose stream carries no new image
    def build(stack: Stack) -> None:
        from aws_cdk import aws_dynamodb as dynamodb
        from aws_cdk import aws_sns as sns

        from outbox_cdk import OutboxPublisher

        table = own_table(stack, dynamodb.StreamViewType[view_type])
        OutboxPublisher(stack, "Publisher", table=table, topic=sns.Topic(stack, "T"))

    # When the app is built, Then the construct refuses it, saying why and what to use
    with pytest.raises(ValueError, match=rf"stream is {view_type}.*new image.*NEW_AND_OLD_IMAGES, NEW_IMAGE"):
        _synth(tmp_path, build)


def test_a_table_without_a_stream_or_with_other_keys_is_refused(tmp_path: Path) -> None:
    from aws_cdk import App, Stack
    from aws_cdk import aws_dynamodb as dynamodb
    from aws_cdk import aws_sns as sns

    from outbox_cdk import OutboxPublisher

    # Given a table with no stream
    stack = Stack(App(), "NoStream")
    bare = dynamodb.Table(
        stack,
        "Bare",
        partition_key=dynamodb.Attribute(name="aggregate_key", type=dynamodb.AttributeType.STRING),
    )
    # Then it is refused with the way to fix it
    with pytest.raises(ValueError, match="has no stream"):
        OutboxPublisher(stack, "Publisher", table=bare, topic=sns.Topic(stack, "T"))

    # Given a table keyed otherwise than the row contract, Then it is refused naming the keys
    other = Stack(App(), "OtherKeys")
    with pytest.raises(ValueError, match="keys must be aggregate_key"):
        OutboxPublisher(
            other, "Publisher", table=own_table(other, sort_key="sk"), topic=sns.Topic(other, "T")
        )


def test_an_imported_table_with_its_stream_is_taken_on_trust(tmp_path: Path) -> None:
    # Given a table imported by name and stream ARN (its view type cannot be read at synth)
    def build(stack: Stack) -> None:
        from aws_cdk import aws_dynamodb as dynamodb
        from aws_cdk import aws_sns as sns

        from outbox_cdk import OutboxPublisher

        table = dynamodb.Table.from_table_attributes(
            stack,
            "Imported",
            table_name="outbox",
            table_stream_arn="arn:aws:dynamodb:us-east-1:123456789012:table/outbox/stream/2026-01-01T00:00:00.000",
        )
        OutboxPublisher(stack, "Publisher", table=table, topic=sns.Topic(stack, "T", enforce_ssl=True))

    # When it is synthesized, Then the mapping reads that stream
    template = _synth(tmp_path, build)
    _, mapping = only(template, "AWS::Lambda::EventSourceMapping")
    assert mapping["Properties"]["EventSourceArn"].endswith(":table/outbox/stream/2026-01-01T00:00:00.000")


def test_wrong_combinations_are_refused_before_anything_is_built() -> None:
    from aws_cdk import App, Stack
    from aws_cdk import aws_sns as sns

    from outbox_cdk import DataTableProps, OutboxPublisher, PublisherSettings, Route

    stack = Stack(App(), "Wrong")
    topic = sns.Topic(stack, "T")
    # Nowhere to publish
    with pytest.raises(ValueError, match="topic, an event_bus or both"):
        OutboxPublisher(stack, "NoDestination")
    # A table and the props of one to create
    with pytest.raises(ValueError, match="either table"):
        OutboxPublisher(stack, "Both", table=own_table(stack), table_props=DataTableProps(), topic=topic)
    # A route to a destination that was not given: the publisher would refuse it at start-up
    with pytest.raises(ValueError, match=r"publisher routes: .*'eventbridge' is not configured"):
        OutboxPublisher(
            stack,
            "RouteNowhere",
            topic=topic,
            settings=PublisherSettings(routes=[Route((Destination.EVENTBRIDGE,))]),
        )
    # An EventBridge source reserved for AWS
    with pytest.raises(ValueError, match=r"not start with 'aws\.'"):
        PublisherSettings(event_source="aws.orders")


def _key_actions(template: dict[str, Any], key_id: str) -> set[str]:
    """Actions the publisher's policies grant on the KMS key `key_id`."""
    granted: set[str] = set()
    for policy in resources(template, "AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if statement["Resource"] == {"Fn::GetAtt": [key_id, "Arn"]}:
                listed = statement["Action"]
                granted.update([listed] if isinstance(listed, str) else listed)
    return granted


def test_customer_managed_keys_of_the_table_and_the_queues_are_granted(tmp_path: Path) -> None:
    # Given a publisher whose own table and both queues use customer-managed keys
    def build(stack: Stack) -> None:
        from aws_cdk import aws_kms as kms
        from aws_cdk import aws_sns as sns
        from aws_cdk import aws_sqs as sqs

        from outbox_cdk import DataTableProps, OutboxPublisher, acknowledge

        def queue(name: str) -> sqs.Queue:
            key = kms.Key(stack, f"{name}Key", enable_key_rotation=True)
            made = sqs.Queue(stack, name, encryption_master_key=key, enforce_ssl=True)
            acknowledge(made, "AwsSolutions-SQS3", "A dead-letter queue in a test stack: nothing reads it.")
            return made

        OutboxPublisher(
            stack,
            "Publisher",
            table_props=DataTableProps(encryption_key=kms.Key(stack, "TableKey", enable_key_rotation=True)),
            topic=sns.Topic(stack, "T", enforce_ssl=True),
            poison_queue=queue("Poison"),
            on_failure_queue=queue("OnFailure"),
        )

    # When it is synthesized
    template = _synth(tmp_path, build)

    # Then the role may use each key for what it needs, and nothing with a wildcard
    table_key, poison_key, on_failure_key = (
        only(template, "AWS::KMS::Key", prefix)[0] for prefix in ("TableKey", "PoisonKey", "OnFailureKey")
    )
    table_actions = {"kms:Decrypt", "kms:DescribeKey", "kms:Encrypt", "kms:GenerateDataKey"}
    assert _key_actions(template, table_key) == table_actions
    assert _key_actions(template, poison_key) == {"kms:Decrypt", "kms:GenerateDataKey"}
    assert _key_actions(template, on_failure_key) == {"kms:Decrypt", "kms:GenerateDataKey"}


def test_a_table_v2_and_key_types_are_checked_too() -> None:
    from aws_cdk import App, Stack
    from aws_cdk import aws_dynamodb as dynamodb
    from aws_cdk import aws_sns as sns

    from outbox_cdk import OutboxPublisher

    # Given a TableV2 with a KEYS_ONLY stream, Then it is refused like a Table
    stack = Stack(App(), "V2")
    v2 = dynamodb.TableV2(
        stack,
        "V2",
        partition_key=dynamodb.Attribute(name="aggregate_key", type=dynamodb.AttributeType.STRING),
        sort_key=dynamodb.Attribute(name="seq", type=dynamodb.AttributeType.NUMBER),
        dynamo_stream=dynamodb.StreamViewType.KEYS_ONLY,
    )
    with pytest.raises(OutboxConstructError, match="stream is KEYS_ONLY"):
        OutboxPublisher(stack, "Publisher", table=v2, topic=sns.Topic(stack, "T"))

    # Given a table whose seq is a string, Then it is refused: the publishing paths address rows by a number
    strings = Stack(App(), "StringSeq")
    table = dynamodb.Table(
        strings,
        "Strings",
        partition_key=dynamodb.Attribute(name="aggregate_key", type=dynamodb.AttributeType.STRING),
        sort_key=dynamodb.Attribute(name="seq", type=dynamodb.AttributeType.STRING),
        stream=dynamodb.StreamViewType.NEW_IMAGE,
    )
    with pytest.raises(OutboxConstructError, match=r"seq \(sort, number\)"):
        OutboxPublisher(strings, "Publisher", table=table, topic=sns.Topic(strings, "T"))


def test_a_users_function_must_run_the_publisher_and_gets_the_powertools_layer(tmp_path: Path) -> None:
    from aws_cdk import App, Stack
    from aws_cdk import aws_lambda as lambda_
    from aws_cdk import aws_sns as sns

    from outbox_cdk import FunctionSettings, OutboxPublisher, PublisherSettings

    # Given a function of the user's with another handler, Then it is refused, naming the right one
    stack = Stack(App(), "OtherHandler")
    other = lambda_.Function(
        stack,
        "Other",
        runtime=lambda_.Runtime.PYTHON_3_13,
        handler="index.handler",
        code=lambda_.Code.from_inline("def handler(e, c): pass"),
    )
    with pytest.raises(OutboxConstructError, match=r"handler 'index\.handler'.*outbox_publisher\.handler"):
        OutboxPublisher(
            stack, "Publisher", table=own_table(stack), topic=sns.Topic(stack, "T"), function=other
        )

    # Given sizing for a function the construct would not create, Then it is refused
    sized = Stack(App(), "Sized")
    own = lambda_.Function(
        sized,
        "Own",
        runtime=lambda_.Runtime.PYTHON_3_13,
        handler=PUBLISHER,
        code=lambda_.Code.from_inline("# built elsewhere"),
    )
    with pytest.raises(OutboxConstructError, match=r"settings\.function sizes the function created here"):
        OutboxPublisher(
            sized,
            "Publisher",
            table=own_table(sized),
            topic=sns.Topic(sized, "T"),
            function=own,
            settings=PublisherSettings(function=FunctionSettings(memory_mb=1024)),
        )

    # Given the same function without the sizing, Then it runs the publisher with the Powertools layer
    OutboxPublisher(
        sized, "Runs", table=own_table(sized, name="Second"), topic=sns.Topic(sized, "T2"), function=own
    )
    from aws_cdk.assertions import Template

    properties = Template.from_stack(sized).to_json()["Resources"]
    (function,) = [r for r in properties.values() if r["Type"] == "AWS::Lambda::Function"]
    assert "powertools" in json.dumps(function["Properties"]["Layers"]).lower()


def test_the_other_wrong_settings_are_refused() -> None:
    from aws_cdk import App, Stack
    from aws_cdk import aws_sns as sns
    from aws_cdk import aws_sqs as sqs

    from outbox_cdk import FailureQueuesProps, OutboxPublisher, PublisherSettings

    # A sweep grace below the minimum, or longer than the function accepts
    for seconds in (0, 3_153_600_001):
        with pytest.raises(
            OutboxConstructError, match=r"sweep_grace_seconds must be at least \d+ and at most 3153600000"
        ):
            PublisherSettings(sweep_grace_seconds=seconds)
    # The longest is accepted
    PublisherSettings(sweep_grace_seconds=3_153_600_000)
    # Queue props for queues that were all passed in
    stack = Stack(App(), "Queues")
    with pytest.raises(OutboxConstructError, match="queue_props applies to queues created here"):
        OutboxPublisher(
            stack,
            "Publisher",
            topic=sns.Topic(stack, "T"),
            poison_queue=sqs.Queue(stack, "P"),
            on_failure_queue=sqs.Queue(stack, "F"),
            queue_props=FailureQueuesProps(),
        )


def test_a_users_table_without_old_images_is_accepted_with_a_warning_that_rewrites_go_unseen() -> None:
    from aws_cdk import App, Stack
    from aws_cdk import aws_dynamodb as dynamodb
    from aws_cdk import aws_sns as sns
    from aws_cdk.assertions import Annotations, Match

    from outbox_cdk import OutboxPublisher

    # Given a table of the user's with a NEW_IMAGE stream, and one with NEW_AND_OLD_IMAGES
    warned, quiet = Stack(App(), "NewImage"), Stack(App(), "NewAndOld")
    for stack, stream in ((warned, dynamodb.StreamViewType.NEW_IMAGE), (quiet, None)):
        OutboxPublisher(stack, "Publisher", table=own_table(stack, stream), topic=sns.Topic(stack, "T"))

    # Then the first synthesizes with a warning naming what is lost; the second without
    Annotations.from_stack(warned).has_warning("*", Match.string_like_regexp("cannot see another writer"))
    Annotations.from_stack(quiet).has_no_warning("*", Match.string_like_regexp("cannot see another writer"))
