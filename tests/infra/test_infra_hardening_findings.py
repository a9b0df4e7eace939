"""Regression tests for the hardening review's permission and retention findings, on the synthesized
template: before each fix, its test failed."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.infra.template_queries import function_by_handler, only, resources, role_of, statements_of_role


def test_the_orders_api_may_write_only_the_partition_keys_it_owns(template: dict[str, Any]) -> None:
    # Given the Orders API role's statements on the two tables
    orders, _ = only(template, "AWS::DynamoDB::Table", "TablesOrdersTable")
    outbox, _ = only(template, "AWS::DynamoDB::Table", "OutboxTable")
    statements = statements_of_role(
        template, role_of(function_by_handler(template, "orders_api.handler.handler")[1])
    )
    by_table = {
        table: [s for s in statements if s.get("Resource") == {"Fn::GetAtt": [table, "Arn"]}]
        for table in (orders, outbox)
    }
    # Then each is held to the keys the API writes: a compromised function cannot forge another aggregate
    # type's events (it could PutItem any row before)
    [outbox_statement] = by_table[outbox]
    [orders_statement] = by_table[orders]
    assert outbox_statement["Condition"] == {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["Order#*"]}}
    assert orders_statement["Condition"] == {
        "ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["ORDER#*", "IDEMPOTENCY#*"]}
    }


@pytest.mark.parametrize(
    "queue_prefix",
    [
        "OutboxFailureQueuesPoisonQueue",
        "OutboxFailureQueuesOnFailureQueue",
        "SampleConsumersOrderSummaryDeadLetterQueue",
        "SampleConsumersCancellationsDeadLetterQueue",
    ],
)
def test_the_queues_of_undelivered_events_are_retained_like_the_tables(
    template: dict[str, Any], queue_prefix: str
) -> None:
    # Given a queue that holds events never delivered
    _, queue = only(template, "AWS::SQS::Queue", queue_prefix)
    # Then deleting the stack keeps it (it was deleted while the tables were retained)
    assert queue["DeletionPolicy"] == "Retain"
    assert queue["UpdateReplacePolicy"] == "Retain"
    # And so is its policy: a kept queue still refuses plain HTTP
    queue_id, _ = only(template, "AWS::SQS::Queue", queue_prefix)
    [policy] = [
        p
        for p in resources(template, "AWS::SQS::QueuePolicy").values()
        if {"Ref": queue_id} in p["Properties"]["Queues"]
    ]
    assert policy["DeletionPolicy"] == "Retain"


def test_the_alarm_key_lets_cloudwatch_encrypt_only_for_this_account(template: dict[str, Any]) -> None:
    # Given the alarm topic's key policy
    _, key = only(template, "AWS::KMS::Key", "OutboxMonitoringAlarmTopicKey")
    [statement] = [
        s
        for s in key["Properties"]["KeyPolicy"]["Statement"]
        if s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"}
    ]
    # Then CloudWatch may use it only on behalf of this account's alarms (a confused-deputy guard)
    assert statement["Condition"] == {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}


@pytest.mark.parametrize(
    ("arn", "accepted"),
    [
        ("", True),
        ("arn:aws:lambda:eu-west-1:017000801446:layer:AWSLambdaPowertoolsPythonV3-python313-arm64:18", True),
        ("arn:aws:lambda:eu-west-1:123456789012:layer:AWSLambdaPowertoolsPythonV3-python313-arm64:18", False),
        ("arn:aws:lambda:eu-west-1:017000801446:layer:SomethingElse:1", False),
        (
            "arn:aws:lambda:eu-west-1:017000801446:layer:AWSLambdaPowertoolsPythonV3-python312-x86_64:18",
            False,
        ),
        (
            "arn:aws-cn:lambda:cn-north-1:498634801083:layer:AWSLambdaPowertoolsPythonV3-python313-arm64:9",
            True,
        ),
        (
            "arn:aws-us-gov:lambda:us-gov-west-1:165093116878:layer:AWSLambdaPowertoolsPythonV3-python313-arm64:27",
            True,
        ),
        (
            "arn:aws-us-gov:lambda:us-gov-east-1:165087284144:layer:AWSLambdaPowertoolsPythonV3-python313-arm64:27",
            True,
        ),
        (
            "arn:aws-cn:lambda:cn-north-1:017000801446:layer:AWSLambdaPowertoolsPythonV3-python313-arm64:9",
            False,
        ),
    ],
)
def test_the_powertools_layer_parameter_accepts_only_aws_powertools_layers(
    template: dict[str, Any], arn: str, accepted: bool
) -> None:
    # Given the PowertoolsLayerArn parameter (a layer runs as the functions' own code, with their roles)
    pattern = template["Parameters"]["PowertoolsLayerArn"]["AllowedPattern"]
    # Then it takes AWS's Powertools layers only (it took a layer from any account)
    assert bool(re.fullmatch(pattern, arn)) is accepted
