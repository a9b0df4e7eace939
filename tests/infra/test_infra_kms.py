"""`-c kms_key=customer`: one customer-managed key for every table, queue, topic, log group, the event bus and
its archive; held to this account in its policy, granted to each function only for what it touches; cdk-nag
clean. Without the flag the template keeps AWS's own keys (the alarm topic's key is the only customer key)."""

from __future__ import annotations

from typing import Any

import pytest

from outbox_cdk import constants as c
from outbox_cdk import encryption
from tests.infra.template_queries import (
    as_list,
    function_by_handler,
    only,
    resources,
    role_of,
    statements_of_role,
)
from tests.support.synth import Synthesized

ACCOUNT = {"Ref": "AWS::AccountId"}
# Where each type of resource that keeps data at rest names its key.
KEY_PROPERTY: dict[str, tuple[str | int, ...]] = {
    "AWS::DynamoDB::Table": ("SSESpecification", "KMSMasterKeyId"),
    "AWS::SQS::Queue": ("KmsMasterKeyId",),
    "AWS::SNS::Topic": ("KmsMasterKeyId",),
    "AWS::Logs::LogGroup": ("KmsKeyId",),
    "AWS::Events::Archive": ("KmsKeyIdentifier",),
    "AWS::Events::EventBus": ("KmsKeyIdentifier",),
    "AWS::Lambda::Function": ("KmsKeyArn",),
    "AWS::S3::Bucket": (
        "BucketEncryption",
        "ServerSideEncryptionConfiguration",
        0,
        "ServerSideEncryptionByDefault",
        "KMSMasterKeyID",
    ),
}
# Every other resource type of the template, and why it keeps no data at rest of its own.
HOLDS_NO_DATA = {
    "AWS::KMS::Key": "the key itself",
    "AWS::IAM::Role": "configuration: who may do what",
    "AWS::IAM::Policy": "configuration: who may do what",
    "AWS::IAM::ManagedPolicy": "configuration: who may do what",
    "AWS::SQS::QueuePolicy": "configuration: who may send",
    "AWS::SNS::TopicPolicy": "configuration: who may publish",
    "AWS::SNS::Subscription": "configuration: a filter policy on event types, no payload",
    "AWS::Lambda::Permission": "configuration: who may invoke",
    "AWS::Lambda::EventInvokeConfig": "configuration: the sweeper's retry settings",
    "AWS::Lambda::EventSourceMapping": "configuration: its filter patterns name event types and statuses, no "
    "payload (their own key, FilterCriteria's KMSKeyArn, would also need a key statement for Lambda)",
    "AWS::Events::Rule": "configuration: event patterns and targets",
    "AWS::CloudWatch::Alarm": "configuration: thresholds on metrics",
    "AWS::CloudWatch::Dashboard": "configuration: which metrics to show",
    "AWS::ApiGatewayV2::Api": "configuration: the HTTP API",
    "AWS::ApiGatewayV2::Route": "configuration: the HTTP API",
    "AWS::ApiGatewayV2::Integration": "configuration: the HTTP API",
    "AWS::ApiGatewayV2::Stage": "configuration: the HTTP API (its access log is a log group, under the key)",
    "AWS::CDK::Metadata": "CDK's own record of the construct library versions",
    "AWS::S3::BucketPolicy": "configuration: TLS only",
    "AWS::EventSchemas::Registry": "configuration: where the event schemas are published",
    "AWS::EventSchemas::Schema": "configuration: an event type's JSON Schema, no payload",
}
# What each function touches under the key, by the service it uses the key through: its tables, the queues it
# sends to or receives from, the topic it publishes to.
PUBLISHING_ACTIONS = {
    c.VIA_DYNAMODB: set(c.TABLE_KEY_ACTIONS),
    c.VIA_SQS: set(c.QUEUE_KEY_ACTIONS),
    c.VIA_SNS: set(c.TOPIC_KEY_ACTIONS),
    c.VIA_S3: set(c.PAYLOAD_READ_KEY_ACTIONS),
}
CONSUMER_ACTIONS = {
    c.VIA_DYNAMODB: set(c.TABLE_KEY_ACTIONS),
    c.VIA_SQS: set(c.QUEUE_KEY_ACTIONS),
    c.VIA_S3: set(c.PAYLOAD_READ_KEY_ACTIONS),
}
# The ARN condition of each service's statement in the key policy: (condition key, service, resource).
ARNS_BY_SID = {
    encryption.SID_LOGS: ("kms:EncryptionContext:aws:logs:arn", "logs", "log-group:*"),
    encryption.SID_SNS_DELIVERIES: ("aws:SourceArn", "sns", "*"),
    encryption.SID_EVENTBRIDGE_DELIVERIES: ("aws:SourceArn", "events", "rule/*"),
    encryption.SID_ALARM_ACTIONS: ("aws:SourceArn", "cloudwatch", "alarm:*"),
    encryption.SID_ARCHIVES: ("kms:EncryptionContext:aws:events:event-bus:arn", "events", "event-bus/*"),
}
KEY_ACTIONS_BY_HANDLER = {
    c.PUBLISHER_HANDLER: PUBLISHING_ACTIONS,
    c.SWEEPER_HANDLER: PUBLISHING_ACTIONS,
    "orders_api.handler.handler": {c.VIA_DYNAMODB: set(c.TABLE_KEY_ACTIONS)},
    "order_consumers.summary_handler.handler": CONSUMER_ACTIONS,
    "order_consumers.cancellations_handler.handler": CONSUMER_ACTIONS,
}


@pytest.fixture(scope="module")
def template_with_key(customer_key: Synthesized) -> dict[str, Any]:
    return customer_key.template


def _the_key(template: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return only(template, "AWS::KMS::Key")


def _key_statements(template: dict[str, Any]) -> list[dict[str, Any]]:
    _, key = _the_key(template)
    statements: list[dict[str, Any]] = key["Properties"]["KeyPolicy"]["Statement"]
    return statements


def _key_reference(resource: dict[str, Any]) -> Any:
    value: Any = resource["Properties"]
    for name in KEY_PROPERTY[resource["Type"]]:
        value = value[name] if isinstance(name, int) else value.get(name)
    return value


def _kms_statements(statements: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [s for s in statements if any(str(a).startswith("kms:") for a in as_list(s["Action"]))]


def test_every_table_queue_topic_log_group_the_bus_and_its_archive_use_the_one_key(
    template_with_key: dict[str, Any],
) -> None:
    # Given the template synthesized with the flag: one key, and everything that keeps data at rest
    key_id, _ = _the_key(template_with_key)
    kept = {k: r for k, r in template_with_key["Resources"].items() if r["Type"] in KEY_PROPERTY}
    # (four tables, eight queues, the events and alarm topics, six log groups, the bus, the archive, the
    # five functions' environment variables, and the payload bucket)
    assert len(kept) == 28

    # When each one's key is read
    # Then it is that key, by its ARN
    for logical_id, resource in kept.items():
        assert _key_reference(resource) == {"Fn::GetAtt": [key_id, "Arn"]}, logical_id
    for table in resources(template_with_key, "AWS::DynamoDB::Table").values():
        assert table["Properties"]["SSESpecification"]["SSEType"] == "KMS"
    for queue in resources(template_with_key, "AWS::SQS::Queue").values():
        assert "SqsManagedSseEnabled" not in queue["Properties"]


def test_every_resource_type_either_keeps_its_data_under_the_key_or_holds_none(
    template_with_key: dict[str, Any],
) -> None:
    # Given every resource type of the template synthesized with the flag
    types = {resource["Type"] for resource in template_with_key["Resources"].values()}

    # Then each is one the test above checks for the key, or one known to hold no data: a new type of
    # resource must be placed in one or the other, with its reason
    assert types - set(KEY_PROPERTY) - set(HOLDS_NO_DATA) == set()


def test_the_key_rotates_and_is_kept_like_the_tables(template_with_key: dict[str, Any]) -> None:
    # Given the key and the tables of the template synthesized with the flag
    _, key = _the_key(template_with_key)
    tables = resources(template_with_key, "AWS::DynamoDB::Table").values()

    # Then its material rotates, and deleting the stack keeps it as it keeps the tables (whose data it reads)
    assert key["Properties"]["EnableKeyRotation"] is True
    assert {key["DeletionPolicy"], key["UpdateReplacePolicy"]} == {"Retain"}
    assert {t["DeletionPolicy"] for t in tables} == {"Retain"}


def test_a_dev_stack_that_drops_its_tables_drops_its_key_too() -> None:
    # Given the key as a stack that keeps no data makes it (retain_data=false)
    from aws_cdk import App, Stack
    from aws_cdk.assertions import Template

    stack = Stack(App(), "DevStack")
    encryption.OutboxKey(stack, "DataKey", retain=False)

    # Then it is deleted with the stack, still rotating
    [key] = Template.from_stack(stack).find_resources("AWS::KMS::Key").values()
    assert key["DeletionPolicy"] == "Delete"
    assert key["Properties"]["EnableKeyRotation"] is True


def test_every_service_may_use_the_key_only_for_this_account(template_with_key: dict[str, Any]) -> None:
    # Given the key policy's statements for AWS services
    services = [s for s in _key_statements(template_with_key) if "Service" in s.get("Principal", {})]
    by_sid = {s.get("Sid"): s for s in services}

    # Then each service the app relies on has its statement, and CDK's EventBus its own (no Sid)
    assert set(by_sid) == {*ARNS_BY_SID, encryption.SID_ARCHIVES_DESCRIBE_KEY, None}
    # And each but CloudWatch Logs' uses it only on behalf of this account (the confused-deputy guard)
    for statement in services:
        if statement.get("Sid") != encryption.SID_LOGS:
            assert statement["Condition"]["StringEquals"]["aws:SourceAccount"] == ACCOUNT, statement
    # And only for this account's resources of its kind: by aws:SourceArn where the service sets it, by the
    # resource ARN it puts in the encryption context otherwise (CloudWatch Logs, archives)
    for sid, (condition_key, service, resource) in ARNS_BY_SID.items():
        assert by_sid[sid]["Condition"]["ArnLike"][condition_key] == _arn(service, resource), sid
    # And CloudWatch Logs is named by its regional principal
    assert by_sid[encryption.SID_LOGS]["Principal"]["Service"] == {
        "Fn::Join": ["", ["logs.", {"Ref": "AWS::Region"}, ".", {"Ref": "AWS::URLSuffix"}]]
    }
    # And the bus's statement names this bus alone
    _, bus = only(template_with_key, "AWS::Events::EventBus")
    this_bus = _arn("events", f"event-bus/{bus['Properties']['Name']}")
    assert by_sid[None]["Condition"]["StringEquals"] == {
        "aws:SourceAccount": ACCOUNT,
        "aws:SourceArn": this_bus,
        "kms:EncryptionContext:aws:events:event-bus:arn": this_bus,
    }


def _arn(service: str, resource: str) -> dict[str, Any]:
    """`arn:<partition>:<service>:<region>:<account>:<resource>` in this stack's region and account."""
    parts = ["arn:", {"Ref": "AWS::Partition"}, f":{service}:", {"Ref": "AWS::Region"}, ":", ACCOUNT]
    return {"Fn::Join": ["", [*parts, f":{resource}"]]}


def test_queues_take_deliveries_only_from_their_own_topic_or_rule(template_with_key: dict[str, Any]) -> None:
    # Given every statement of the queue policies that lets an AWS service send
    allowed = [
        s
        for policy in resources(template_with_key, "AWS::SQS::QueuePolicy").values()
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
        if s["Effect"] == "Allow"
    ]
    # (the topic's three subscriptions with the summary's dead-letter queue, the two rules with the ledger's)
    assert len(allowed) == 6

    # Then each is held to the one topic or rule that delivers there: CDK's rule target would have dropped
    # that condition for a queue under a customer-managed key
    for statement in allowed:
        assert set(statement["Principal"]) == {"Service"}
        assert statement["Action"] == "sqs:SendMessage"
        assert set(statement["Condition"]) == {"ArnEquals"}
        assert set(statement["Condition"]["ArnEquals"]) == {"aws:SourceArn"}


def _via(statement: dict[str, Any]) -> str:
    """The service a kms statement's `kms:ViaService` names (`dynamodb.<region>.<suffix>` -> `dynamodb`)."""
    value = statement["Condition"]["StringEquals"]["kms:ViaService"]
    assert value == {"Fn::Join": ["", [value["Fn::Join"][1][0], *VIA_SUFFIX]]}, value
    return str(value["Fn::Join"][1][0]).removesuffix(".")


VIA_SUFFIX = [{"Ref": "AWS::Region"}, ".", {"Ref": "AWS::URLSuffix"}]


def _key_use(statements: list[dict[str, Any]]) -> dict[str, set[str]]:
    used: dict[str, set[str]] = {}
    for statement in _kms_statements(statements):
        used.setdefault(_via(statement), set()).update(as_list(statement["Action"]))
    return used


def test_each_role_may_use_the_key_only_for_what_its_function_touches(
    template_with_key: dict[str, Any],
) -> None:
    key_id, _ = _the_key(template_with_key)
    for handler, expected in KEY_ACTIONS_BY_HANDLER.items():
        # Given a function's role
        statements = statements_of_role(
            template_with_key, role_of(function_by_handler(template_with_key, handler)[1])
        )

        # When its kms statements are read
        kms = _kms_statements(statements)

        # Then they name the key alone, with exactly the actions of what the function touches (no wildcard),
        # each only through the service of what it touches (kms:ViaService)
        assert kms, handler
        assert {str(r) for s in kms for r in as_list(s["Resource"])} == {str({"Fn::GetAtt": [key_id, "Arn"]})}
        assert _key_use(statements) == expected, handler


@pytest.mark.parametrize(
    ("access", "expected"),
    [
        (
            "read_only",
            {c.VIA_DYNAMODB: set(c.TABLE_READ_KEY_ACTIONS), c.VIA_SQS: set(c.QUEUE_RECEIVE_KEY_ACTIONS)},
        ),
        ("operator", {c.VIA_DYNAMODB: set(c.TABLE_KEY_ACTIONS), c.VIA_SQS: set(c.QUEUE_KEY_ACTIONS)}),
    ],
)
def test_the_operator_policy_may_use_the_key_only_to_read_unless_it_may_write(
    access: str, expected: dict[str, set[str]]
) -> None:
    from aws_cdk import App, Stack
    from aws_cdk.assertions import Template

    from outbox_cdk import Outbox, OutboxProps
    from outbox_cdk.operators import OperatorAccess

    # Given an outbox under a key of its own, with an operator policy of each access
    stack = Stack(App(), "S")
    Outbox(stack, "Outbox", OutboxProps(customer_managed_key=True, operator_access=OperatorAccess(access)))
    template = dict(Template.from_stack(stack).to_json())
    _, policy = only(template, "AWS::IAM::ManagedPolicy", "OutboxOperatorPolicy")

    # When its kms statements are read
    # Then a read-only operator may only decrypt what it reads; an operator also encrypt what it redrives
    assert _key_use(policy["Properties"]["PolicyDocument"]["Statement"]) == expected


def test_without_the_flag_nothing_changes_keys(template: dict[str, Any]) -> None:
    # Given the template synthesized without the flag
    # Then the only customer-managed key is the alarm topic's, as before
    (key_id, _) = only(template, "AWS::KMS::Key")
    assert key_id.startswith("OutboxMonitoringAlarmTopicKey")
    # And tables, queues, log groups, the bus and the archive keep AWS's own keys; the events topic the
    # AWS-managed SNS key
    for table in resources(template, "AWS::DynamoDB::Table").values():
        assert table["Properties"]["SSESpecification"] == {"SSEEnabled": True}
    for queue in resources(template, "AWS::SQS::Queue").values():
        assert queue["Properties"]["SqsManagedSseEnabled"] is True
        assert "KmsMasterKeyId" not in queue["Properties"]
    for log_group in resources(template, "AWS::Logs::LogGroup").values():
        assert "KmsKeyId" not in log_group["Properties"]
    for function in resources(template, "AWS::Lambda::Function").values():
        assert "KmsKeyArn" not in function["Properties"]
    assert "KmsKeyIdentifier" not in only(template, "AWS::Events::EventBus")[1]["Properties"]
    assert only(template, "AWS::Events::Archive")[1]["Properties"]["KmsKeyIdentifier"] == ""
    _, events_topic = only(template, "AWS::SNS::Topic", "OutboxDestinationsTopic")
    assert events_topic["Properties"]["KmsMasterKeyId"] == _arn("kms", c.SNS_AWS_MANAGED_KEY_ALIAS)
    # And no role is granted anything on a key
    for role_id in resources(template, "AWS::IAM::Role"):
        assert not _kms_statements(statements_of_role(template, role_id)), role_id


@pytest.mark.parametrize(
    ("value", "customer"), [("customer", True), ("aws-managed", False), (" Customer ", True)]
)
def test_the_flag_reads_its_two_values(value: str, customer: bool) -> None:
    from aws_cdk import App

    from infra.app import props_from_context

    assert props_from_context(App(context={"kms_key": value})).outbox.customer_managed_key is customer
    assert props_from_context(App()).outbox.customer_managed_key is False


@pytest.mark.parametrize("value", ["cmk", "true", "aws"])
def test_an_unknown_flag_value_fails_the_synth_with_what_to_write(value: str) -> None:
    # Given a kms_key value the app does not know
    from infra.app import build_app
    from outbox_cdk.errors import OutboxConstructError

    # When the app is built (as `cdk synth -c kms_key=...` does)
    # Then it refuses, naming the flag, the two values it takes and the one it got
    with pytest.raises(
        OutboxConstructError, match=rf"'kms_key' must be 'aws-managed' .* or 'customer' .*got '{value}'"
    ):
        build_app({"kms_key": value})


def test_cdk_nag_is_clean_with_the_key(customer_key: Synthesized) -> None:
    # Given the synthesis with the flag (it would have raised on an unacknowledged finding)
    reports = {r["pluginName"]: r for r in customer_key.validation_report["pluginReports"]}

    # Then AwsSolutions ran and passed
    assert reports["AwsSolutions"]["conclusion"] == "success"
    assert reports["AwsSolutions"]["violations"] == []
