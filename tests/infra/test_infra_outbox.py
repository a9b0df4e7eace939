"""The `Outbox` construct: the whole pattern in one line, its outputs, and two outboxes kept apart.

One app is synthesized for the module (cdk-nag on, as a user's app would be): stack `PaymentsStack` holds
two outboxes (the second with `outputs_prefix="Refunds"`) and a writer function; stack `ShippingStack` holds
one outbox, SNS only on a topic of its own, under a customer-managed key, and an inbox consumer.
"""

from __future__ import annotations

from typing import Any

import pytest

from outbox import metrics, outputs
from tests.infra.template_queries import (
    actions_by_resource,
    function_by_handler,
    resources,
    role_of,
    statements_of_role,
)

PUBLISHER = "outbox_publisher.handler.handler"
SWEEPER = "outbox_sweeper.handler.handler"


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    from aws_cdk import App, Stack
    from aws_cdk import aws_iam as iam
    from aws_cdk import aws_lambda as lambda_
    from aws_cdk import aws_sns as sns

    from outbox_cdk import DestinationsProps, Outbox, OutboxProps, add_nag_checks
    from outbox_cdk.consumers import InboxConsumer
    from outbox_cdk.nag import acknowledge

    app = App(outdir=str(tmp_path_factory.mktemp("cdk.out.outboxes")))
    payments = Stack(app, "PaymentsStack")
    first = Outbox(payments, "Outbox")
    Outbox(payments, "Refunds", OutboxProps(outputs_prefix="Refunds"))
    writer = lambda_.Function(
        payments,
        "Writer",
        runtime=lambda_.Runtime.PYTHON_3_13,
        handler="index.handler",
        code=lambda_.Code.from_inline("def handler(event, context): pass"),
        environment=dict(first.writer_environment),
    )
    first.grant_write(writer)
    for rule in (
        "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
        "AWSLambdaBasicExecutionRole]",
        "AwsSolutions-L1",
    ):
        acknowledge(
            writer, rule, "A stand-in writer of this test: only its grant from the outbox is looked at"
        )

    shipping = Stack(app, "ShippingStack")
    topic = sns.Topic(shipping, "ShipmentEvents", enforce_ssl=True)
    shipped = Outbox(
        shipping,
        "Outbox",
        OutboxProps(topic=topic, destinations=DestinationsProps(event_bus=False), customer_managed_key=True),
    )
    shipped.grant_write(
        iam.Role(shipping, "WriterRole", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    )
    consumer = InboxConsumer(
        shipping,
        "Invoices",
        consumer_name="invoices",
        handler="order_consumers.summary_handler.handler",
        vendored=("outbox", "outbox_inbox", "order_consumers"),
        description="Test consumer: only its outputs are looked at",
    )
    consumer.subscribe(topic)
    add_nag_checks(app)

    assembly = app.synth()
    return {name: assembly.get_stack_by_name(name).template for name in ("PaymentsStack", "ShippingStack")}


def test_two_outboxes_in_one_stack_write_their_outputs_under_their_own_prefixes(
    templates: dict[str, dict[str, Any]],
) -> None:
    # Given the stack with two outboxes, the second with outputs_prefix "Refunds"
    keys = set(templates["PaymentsStack"]["Outputs"])

    # When its outputs are read
    # Then each outbox wrote every output the CLI reads, the first unprefixed, the second prefixed
    assert set(outputs.OUTBOX_OUTPUTS) <= keys
    assert {f"Refunds{name}" for name in outputs.OUTBOX_OUTPUTS} <= keys
    # and the two point at different tables
    table_of = templates["PaymentsStack"]["Outputs"]
    assert (
        table_of[outputs.OUTBOX_TABLE_NAME]["Value"]
        != table_of[f"Refunds{outputs.OUTBOX_TABLE_NAME}"]["Value"]
    )


def test_outboxes_in_two_stacks_and_two_in_one_share_no_metric_alarm_or_dashboard(
    templates: dict[str, dict[str, Any]],
) -> None:
    # Given three outboxes: two in one stack, one in another
    services: list[str] = []
    alarm_names: list[str] = []
    dashboards: list[str] = []
    watched: set[str] = set()

    # When every function's service name, every alarm and every dashboard is collected
    for template in templates.values():
        for function in resources(template, "AWS::Lambda::Function").values():
            variables = function["Properties"].get("Environment", {}).get("Variables", {})
            if function["Properties"]["Handler"] in (PUBLISHER, SWEEPER):
                services.append(variables[metrics.ENV_SERVICE_NAME])
        for alarm in resources(template, "AWS::CloudWatch::Alarm").values():
            alarm_names.append(alarm["Properties"]["AlarmName"])
            if alarm["Properties"].get("Namespace") == metrics.NAMESPACE:
                [dimension] = alarm["Properties"]["Dimensions"]
                watched.add(dimension["Value"])
        dashboards += [
            d["Properties"]["DashboardName"]
            for d in resources(template, "AWS::CloudWatch::Dashboard").values()
        ]

    # Then each outbox's publisher and sweeper report under names of their own, derived from the stack's name
    # and the construct's path
    outbox_names = ["PaymentsStack-Outbox", "PaymentsStack-Refunds", "ShippingStack-Outbox"]
    assert sorted(services) == sorted(
        metrics.service_name(name, function)
        for name in outbox_names
        for function in (metrics.PUBLISHER, metrics.SWEEPER)
    )
    # and the alarms on those metrics watch exactly those services, no fixed shared one
    assert watched
    assert watched <= set(services)
    assert not watched & {metrics.PUBLISHER_SERVICE, metrics.SWEEPER_SERVICE}
    # and no two alarms or dashboards share a name
    assert len(alarm_names) == len(set(alarm_names)) == 3 * 8 + 1
    assert sorted(dashboards) == sorted(outbox_names)


def test_each_outboxs_alarms_watch_its_own_functions_metrics(templates: dict[str, dict[str, Any]]) -> None:
    # Given the second outbox of the payments stack
    template = templates["PaymentsStack"]
    alarms = {
        a["Properties"]["AlarmName"]: a["Properties"]
        for a in resources(template, "AWS::CloudWatch::Alarm").values()
    }

    # When its held-aggregates and writer-contract alarms are read
    held = alarms["PaymentsStack-Refunds-HeldAggregates"]
    violations = alarms["PaymentsStack-Refunds-WriterContractViolations"]

    # Then they watch its own sweeper's and publisher's service, and link the runbook
    assert held["Dimensions"] == [{"Name": "service", "Value": "PaymentsStack-Refunds-sweeper"}]
    assert violations["Dimensions"] == [{"Name": "service", "Value": "PaymentsStack-Refunds-publisher"}]
    assert held["AlarmDescription"].endswith("Runbook: docs/runbook.md#heldaggregates")


def test_the_outboxs_table_has_the_failed_index_the_operations_commands_read(
    templates: dict[str, dict[str, Any]],
) -> None:
    # Given the tables the outboxes created
    tables = resources(templates["PaymentsStack"], "AWS::DynamoDB::Table")

    # When their indexes are read
    # Then each has the sparse `failed` index, and a stream with old and new images
    assert len(tables) == 2
    for table in tables.values():
        assert [i["IndexName"] for i in table["Properties"]["GlobalSecondaryIndexes"]] == ["failed"]
        assert table["Properties"]["StreamSpecification"] == {"StreamViewType": "NEW_AND_OLD_IMAGES"}


def test_grant_write_lets_a_writer_put_rows_and_nothing_else(templates: dict[str, dict[str, Any]]) -> None:
    # Given the writer function granted by the first outbox, with its writer environment
    template = templates["PaymentsStack"]
    writer = function_by_handler(template, "index.handler")[1]
    table_name = template["Outputs"][outputs.OUTBOX_TABLE_NAME]["Value"]

    # When its environment and its role's statements are read
    granted = actions_by_resource(statements_of_role(template, role_of(writer)))
    table_id = table_name["Ref"]

    # Then it knows the table under the variable the library reads, and may only PutItem on that table
    assert writer["Properties"]["Environment"]["Variables"] == {"OUTBOX_TABLE_NAME": table_name}
    assert granted[f"GetAtt:{table_id}.Arn"] == {"dynamodb:PutItem"}
    assert not any(table_id in resource for resource in granted if resource != f"GetAtt:{table_id}.Arn")


def test_an_outbox_on_your_own_topic_under_its_own_key_says_only_what_it_has(
    templates: dict[str, dict[str, Any]],
) -> None:
    # Given the shipping stack's outbox: your topic, no bus, a customer-managed key
    template = templates["ShippingStack"]
    keys = set(template["Outputs"])

    # When its resources and outputs are read
    [key_id] = [k for k in resources(template, "AWS::KMS::Key") if k.startswith("OutboxKey")]
    [table] = [
        t for k, t in resources(template, "AWS::DynamoDB::Table").items() if k.startswith("OutboxTable")
    ]
    [role_id] = [k for k in resources(template, "AWS::IAM::Role") if k.startswith("WriterRole")]
    granted = actions_by_resource(statements_of_role(template, role_id))

    # Then it created no topic and no bus: it publishes to yours, and says so in its outputs
    assert len(resources(template, "AWS::SNS::Topic")) == 2  # yours and the alarm topic
    assert not resources(template, "AWS::Events::EventBus")
    assert outputs.TOPIC_ARN in keys
    assert not keys & {outputs.EVENT_BUS_NAME, outputs.EVENT_SOURCE}
    # and its table is under the key, which a writer may use for what it writes
    assert table["Properties"]["SSESpecification"]["KMSMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    assert granted[f"GetAtt:{key_id}.Arn"] >= {"kms:Encrypt", "kms:GenerateDataKey"}


def test_an_inbox_consumer_writes_its_dead_letter_queue_output(templates: dict[str, dict[str, Any]]) -> None:
    # Given the shipping stack's consumer "Invoices"
    template = templates["ShippingStack"]

    # When its outputs are read
    output = template["Outputs"][f"Invoices{outputs.DEAD_LETTER_QUEUE_URL_SUFFIX}"]

    # Then `InvoicesDeadLetterQueueUrl` names its dead-letter queue, as `outbox status` finds them all
    [queue_id] = [
        k for k in resources(template, "AWS::SQS::Queue") if k.startswith("InvoicesDeadLetterQueue")
    ]
    assert output["Value"] == {"Ref": queue_id}
    assert [k for k in template["Outputs"] if k.endswith(outputs.DEAD_LETTER_QUEUE_URL_SUFFIX)] == [
        f"Invoices{outputs.DEAD_LETTER_QUEUE_URL_SUFFIX}"
    ]


def test_a_second_outbox_with_the_same_outputs_prefix_is_refused_naming_the_fix() -> None:
    # Given a stack that already has an outbox with the default (empty) outputs prefix
    from aws_cdk import App, Stack

    from outbox_cdk import Outbox, OutboxConstructError

    stack = Stack(App(), "PaymentsStack")
    Outbox(stack, "Outbox")

    # When a second one is added without a prefix of its own
    # Then the synth stops with what to change, before anything of the second is built
    with pytest.raises(OutboxConstructError, match=r"PaymentsStack/Second.*no prefix.*outputs_prefix"):
        Outbox(stack, "Second")
    assert stack.node.try_find_child("Second") is not None
    assert not stack.node.find_child("Second").node.children


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"outputs_prefix": "Refunds-"}, "letters and digits only"),
        ({"outbox_name": "payments outbox"}, "letters, digits, '-' or '_'"),
        ({"outbox_name": "x" * 201}, "1 to 200"),
        ({"customer_managed_key": True, "encryption_key": "KEY"}, "not both"),
        ({"table": "TABLE", "table_props": "PROPS"}, "not both"),
    ],
)
def test_outbox_props_refuse_what_cannot_work(fields: dict[str, Any], message: str) -> None:
    # Given props that cannot name their outputs, their metrics, or say which key or table to use
    from aws_cdk import App, Stack
    from aws_cdk import aws_dynamodb as dynamodb
    from aws_cdk import aws_kms as kms

    from outbox_cdk import DataTableProps, Outbox, OutboxConstructError, OutboxProps

    stack = Stack(App(), "PaymentsStack")
    stand_ins = {
        "KEY": kms.Key(stack, "Key"),
        "TABLE": dynamodb.Table.from_table_name(stack, "Table", "payments-outbox"),
        "PROPS": DataTableProps(),
    }
    resolved: dict[str, Any] = {
        name: stand_ins.get(value, value) if isinstance(value, str) else value
        for name, value in fields.items()
    }

    # When the outbox is built with them
    # Then it is refused with what to change
    with pytest.raises(OutboxConstructError, match=message):
        Outbox(stack, "Outbox", OutboxProps(**resolved))


def test_a_consumers_dead_letter_queue_output_can_be_left_out_and_never_collides() -> None:
    # Given a stack with a consumer "Invoices" (its output written), and one left without an output
    from aws_cdk import App, Stack

    from outbox_cdk import OutboxConstructError
    from outbox_cdk.consumers import InboxConsumer

    stack = Stack(App(), "ShippingStack")
    common: dict[str, Any] = {
        "consumer_name": "invoices",
        "handler": "order_consumers.summary_handler.handler",
        "vendored": ("outbox", "outbox_inbox", "order_consumers"),
        "description": "Test consumer: only its outputs are looked at",
    }
    InboxConsumer(stack, "Invoices", **common)
    quiet = InboxConsumer(stack, "Quiet", dead_letter_queue_output=False, **common)
    assert quiet.dead_letter_queue_output is None
    assert stack.node.try_find_child(f"Quiet{outputs.DEAD_LETTER_QUEUE_URL_SUFFIX}") is None

    # When another consumer of the same id, elsewhere in the stack, would write the same output
    from constructs import Construct

    elsewhere = Construct(stack, "Elsewhere")

    # Then it is refused, naming the output and the two ways out
    with pytest.raises(OutboxConstructError, match=r"'InvoicesDeadLetterQueueUrl'.*another id.*=False"):
        InboxConsumer(elsewhere, "Invoices", **common)
