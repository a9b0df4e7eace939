"""Least privilege: each function's role allows exactly the actions its code calls, on its resources."""

from typing import Any

import pytest

from outbox_cdk.constants import PAYLOAD_PREFIX
from tests.infra.template_queries import (
    actions_by_resource,
    function_by_handler,
    only,
    role_of,
    statements_of_role,
)

XRAY = {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}
LOGS = {"logs:CreateLogStream", "logs:PutLogEvents"}
# The order gate's reads (BatchGetItem), settles (a conditional DeleteItem per published row), claims, parks
# and FAILED marks (UpdateItem).
ROW_ACTIONS = {"dynamodb:BatchGetItem", "dynamodb:DeleteItem", "dynamodb:UpdateItem"}
# The sweeper also scans the table (it holds only what is not out yet) and reads and saves its cursor, an
# item of the table (GetItem, PutItem).
SWEEPER_ROW_ACTIONS = ROW_ACTIONS | {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Scan"}
HANDLERS = (
    "orders_api.handler.handler",
    "outbox_publisher.handler.handler",
    "outbox_sweeper.handler.handler",
    "order_consumers.summary_handler.handler",
    "order_consumers.cancellations_handler.handler",
)


def _granted(template: dict[str, Any], handler: str) -> dict[str, set[str]]:
    _, function = function_by_handler(template, handler)
    return actions_by_resource(statements_of_role(template, role_of(function)))


def _log_group_of(template: dict[str, Any], handler: str) -> str:
    _, function = function_by_handler(template, handler)
    return f"GetAtt:{function['Properties']['LoggingConfig']['LogGroup']['Ref']}.Arn"


def test_orders_api_role_has_exactly_its_actions(template: dict[str, Any]) -> None:
    # Given the Orders API function's role
    orders, _ = only(template, "AWS::DynamoDB::Table", "TablesOrdersTable")
    outbox, _ = only(template, "AWS::DynamoDB::Table", "OutboxTable")

    # When every statement reaching it is grouped by resource
    granted = _granted(template, "orders_api.handler.handler")

    # Then: PutItem + GetItem + UpdateItem on Orders (TransactWriteItems is authorized per item: a place or a
    # read-then-write command Puts, a confirm or cancel with If-Match Updates the order it did not read),
    # PutItem on Outbox, its own log group, X-Ray - and nothing else
    assert granted == {
        f"GetAtt:{orders}.Arn": {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"},
        f"GetAtt:{outbox}.Arn": {"dynamodb:PutItem"},
        _log_group_of(template, "orders_api.handler.handler"): LOGS,
        "*": XRAY,
    }


def test_publisher_role_has_exactly_its_actions(template: dict[str, Any]) -> None:
    # Given the publisher function's role and the resources it touches
    outbox, _ = only(template, "AWS::DynamoDB::Table", "OutboxTable")
    poison, _ = only(template, "AWS::SQS::Queue", "OutboxFailureQueuesPoisonQueue")
    on_failure, _ = only(template, "AWS::SQS::Queue", "OutboxFailureQueuesOnFailureQueue")
    topic, _ = only(template, "AWS::SNS::Topic", "OutboxDestinationsTopic")
    bus, _ = only(template, "AWS::Events::EventBus", "OutboxDestinationsEventBus")
    bucket, _ = only(template, "AWS::S3::Bucket", "OutboxPayloads")

    # When every statement reaching it is grouped by resource
    granted = _granted(template, "outbox_publisher.handler.handler")

    # Then: read the stream (scoped to it, ListStreams included), read predecessors, settle and update rows on
    # the table's ARN only (no index), publish to its topic, put events on its bus, send to the poison and
    # on-failure queues - and nothing else
    assert granted == {
        f"GetAtt:{outbox}.StreamArn": {
            "dynamodb:DescribeStream",
            "dynamodb:GetRecords",
            "dynamodb:GetShardIterator",
            "dynamodb:ListStreams",
        },
        f"GetAtt:{outbox}.Arn": ROW_ACTIONS,
        f"Ref:{topic}": {"sns:Publish"},
        f"GetAtt:{bus}.Arn": {"events:PutEvents"},
        f"GetAtt:{poison}.Arn": {"sqs:SendMessage"},
        f"GetAtt:{on_failure}.Arn": {"sqs:SendMessage"},
        **_envelope_reads(bucket),
        _log_group_of(template, "outbox_publisher.handler.handler"): LOGS,
        "*": XRAY,
    }


def test_sweeper_role_has_exactly_its_actions(template: dict[str, Any]) -> None:
    # Given the sweeper function's role and the resources it touches
    outbox, _ = only(template, "AWS::DynamoDB::Table", "OutboxTable")
    poison, _ = only(template, "AWS::SQS::Queue", "OutboxFailureQueuesPoisonQueue")
    topic, _ = only(template, "AWS::SNS::Topic", "OutboxDestinationsTopic")
    bus, _ = only(template, "AWS::Events::EventBus", "OutboxDestinationsEventBus")

    # When every statement reaching it is grouped by resource
    granted = _granted(template, "outbox_sweeper.handler.handler")

    # Then: scan the table, read and save its cursor, read predecessors, settle and update rows, all on the
    # table's ARN and no index's; publish, send to the poison queue; no stream, no on-failure queue - and
    # nothing else
    assert granted == {
        f"GetAtt:{outbox}.Arn": SWEEPER_ROW_ACTIONS,
        f"Ref:{topic}": {"sns:Publish"},
        f"GetAtt:{bus}.Arn": {"events:PutEvents"},
        f"GetAtt:{poison}.Arn": {"sqs:SendMessage"},
        **_envelope_reads(only(template, "AWS::S3::Bucket", "OutboxPayloads")[0]),
        _log_group_of(template, "outbox_sweeper.handler.handler"): LOGS,
        "*": XRAY,
    }


@pytest.mark.parametrize("handler", HANDLERS)
def test_no_function_has_a_wildcard_beyond_what_aws_requires(template: dict[str, Any], handler: str) -> None:
    # Given a function's grants
    granted = _granted(template, handler)

    # When the wildcard resource and wildcard actions are looked for
    wildcard_actions = {a for actions in granted.values() for a in actions if "*" in a}

    # Then "*" carries only the X-Ray calls (which have no resource-level permissions), no action
    # is a wildcard, and no resource ARN is a pattern but the stored envelopes' prefix of the payload bucket
    # (named by event ids, unknown before each event is written), which only reads or writes objects
    assert granted.get("*", set()) == XRAY
    assert wildcard_actions == set()
    bucket, _ = only(template, "AWS::S3::Bucket", "OutboxPayloads")
    envelopes = f"Join:GetAtt:{bucket}.Arn/{PAYLOAD_PREFIX}*"
    assert [r for r in granted if r not in ("*", envelopes) and "*" in r] == []
    assert granted.get(envelopes, {"s3:GetObject"}) <= {"s3:GetObject", "s3:PutObject"}


def _envelope_reads(bucket: str) -> dict[str, set[str]]:
    """What a reader of stored envelopes holds (outbox_cdk.payloads.grant_payload_reads)."""
    return {
        f"Join:GetAtt:{bucket}.Arn/{PAYLOAD_PREFIX}*": {"s3:GetObject"},
        f"GetAtt:{bucket}.Arn": {"s3:ListBucket"},
    }


@pytest.mark.parametrize("handler", HANDLERS)
def test_function_roles_have_no_managed_policies(template: dict[str, Any], handler: str) -> None:
    # Given a function's role
    _, function = function_by_handler(template, handler)
    role = template["Resources"][role_of(function)]

    # When its managed policies are read
    managed = role["Properties"].get("ManagedPolicyArns", [])

    # Then there are none (AWSLambdaBasicExecutionRole would allow logs on every log group)
    assert managed == []
    assert role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {
        "Service": "lambda.amazonaws.com"
    }


def test_only_function_roles_exist(template: dict[str, Any]) -> None:
    # Given the template's IAM roles
    roles = {k for k, v in template["Resources"].items() if v["Type"] == "AWS::IAM::Role"}

    # When compared with the functions' roles
    function_roles = {role_of(function_by_handler(template, h)[1]) for h in HANDLERS}

    # Then no other role (e.g. a custom-resource provider with broad rights) was created
    assert roles == function_roles
