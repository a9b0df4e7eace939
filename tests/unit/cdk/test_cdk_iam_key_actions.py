"""tests.support.iam's KMS mapping, which the recorded-calls test of the roles relies on: a call on a resource
under a customer-managed key implies the KMS actions the project grants for it; on one under an AWS managed
or AWS owned key (or none), nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import boto3
import pytest

from outbox_cdk import constants as c
from tests.support.aws import REGION
from tests.support.iam import CustomerKeyed, customer_keyed, key_actions, mapping_key_actions

TABLE = set(c.TABLE_KEY_ACTIONS)
QUEUE = set(c.QUEUE_KEY_ACTIONS)
TOPIC = set(c.TOPIC_KEY_ACTIONS)
DECRYPT = {"kms:Decrypt"}


@dataclass(frozen=True)
class Provisioned:
    keyed: CustomerKeyed
    names: dict[str, str]
    """What each placeholder below stands for: a table's name, a queue's URL or ARN, a topic's ARN."""


def client(service: str) -> Any:
    return boto3.client(service, region_name=REGION)


@pytest.fixture
def provisioned(aws: None) -> Provisioned:
    """Each kind of resource three ways: under a customer-managed key, under the service's AWS managed key
    (alias/aws/...), under AWS's own key."""
    key = client("kms").create_key(Description="data key")["KeyMetadata"]["Arn"]
    dynamodb, sqs, sns = client("dynamodb"), client("sqs"), client("sns")
    names: dict[str, str] = {}
    for name, encryption in (
        ("table-cmk", {"Enabled": True, "SSEType": "KMS", "KMSMasterKeyId": key}),
        ("table-aws-managed", {"Enabled": True}),
        ("table-aws-owned", None),
    ):
        table = dynamodb.create_table(
            TableName=name,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"},
            **({"SSESpecification": encryption} if encryption else {}),
        )["TableDescription"]
        names[name] = name
        names[f"{name}-arn"] = table["TableArn"]
        names[f"{name}-stream"] = table["LatestStreamArn"]
    for name, attributes in (
        ("queue-cmk", {"KmsMasterKeyId": key}),
        ("queue-aws-managed", {"KmsMasterKeyId": "alias/aws/sqs"}),
        ("queue-aws-owned", {"SqsManagedSseEnabled": "true"}),
    ):
        url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
        names[name] = url
        names[f"{name}-arn"] = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
    for name, attributes in (
        ("topic-cmk", {"KmsMasterKeyId": key}),
        ("topic-aws-managed", {"KmsMasterKeyId": f"arn:aws:kms:{REGION}:123456789012:alias/aws/sns"}),
        ("topic-plain", {}),
    ):
        names[name] = sns.create_topic(Name=name, Attributes=attributes)["TopicArn"]
    return Provisioned(keyed=customer_keyed(client), names=names)


def put(table: str) -> dict[str, Any]:
    return {"Put": {"TableName": table, "Item": {"pk": {"S": "a"}}}}


@pytest.mark.parametrize(
    ("service", "operation", "params", "expected"),
    [
        ("dynamodb", "GetItem", {"TableName": "table-cmk"}, TABLE),
        ("dynamodb", "UpdateItem", {"TableName": "table-cmk-arn"}, TABLE),
        (
            "dynamodb",
            "TransactWriteItems",
            {"TransactItems": [put("table-aws-owned"), put("table-cmk")]},
            TABLE,
        ),
        ("dynamodb", "BatchGetItem", {"RequestItems": {"table-cmk": {}}}, TABLE),
        ("dynamodb", "DescribeTable", {"TableName": "table-cmk"}, set()),
        ("dynamodb", "PutItem", {"TableName": "table-aws-managed"}, set()),
        ("dynamodb", "PutItem", {"TableName": "table-aws-owned"}, set()),
        ("dynamodb", "TransactWriteItems", {"TransactItems": [put("table-aws-managed")]}, set()),
        ("sqs", "SendMessage", {"QueueUrl": "queue-cmk"}, QUEUE),
        ("sqs", "SendMessageBatch", {"QueueUrl": "queue-cmk"}, QUEUE),
        ("sqs", "ReceiveMessage", {"QueueUrl": "queue-cmk"}, DECRYPT),
        ("sqs", "GetQueueAttributes", {"QueueUrl": "queue-cmk"}, set()),
        ("sqs", "SendMessage", {"QueueUrl": "queue-aws-managed"}, set()),
        ("sqs", "SendMessage", {"QueueUrl": "queue-aws-owned"}, set()),
        ("sns", "Publish", {"TopicArn": "topic-cmk"}, TOPIC),
        ("sns", "Publish", {"TargetArn": "topic-cmk"}, TOPIC),
        ("sns", "PublishBatch", {"TopicArn": "topic-cmk"}, TOPIC),
        ("sns", "GetTopicAttributes", {"TopicArn": "topic-cmk"}, set()),
        ("sns", "Publish", {"TopicArn": "topic-aws-managed"}, set()),
        ("sns", "Publish", {"TopicArn": "topic-plain"}, set()),
        ("events", "PutEvents", {"Entries": []}, set()),
    ],
)
def test_a_call_implies_key_actions_only_on_a_customer_managed_key(
    provisioned: Provisioned, service: str, operation: str, params: dict[str, Any], expected: set[str]
) -> None:
    # Given resources under each kind of key, read back as the runtime provisioned them
    # When a call on one is mapped (its placeholders replaced by the resource's real name, URL or ARN)
    call = _named(params, provisioned.names)
    actions = key_actions(service, operation, call, provisioned.keyed)

    # Then it implies the key actions the project grants for it, and none off a customer-managed key
    assert actions == expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("table-cmk-stream", DECRYPT),
        ("queue-cmk-arn", DECRYPT),
        ("table-aws-managed-stream", set()),
        ("table-aws-owned-stream", set()),
        ("queue-aws-managed-arn", set()),
        ("queue-aws-owned-arn", set()),
    ],
)
def test_an_event_source_mapping_decrypts_only_a_source_under_a_customer_managed_key(
    provisioned: Provisioned, source: str, expected: set[str]
) -> None:
    # Given a mapping's source, When what the Lambda service needs on a key to poll it is mapped
    # Then it is kms:Decrypt for a queue or stream under a customer-managed key, nothing otherwise
    assert mapping_key_actions(provisioned.names[source], provisioned.keyed) == expected


def _named(value: Any, names: dict[str, str]) -> Any:
    """`value` with each placeholder (a string or a key of RequestItems) replaced by what it stands for."""
    if isinstance(value, str):
        return names.get(value, value)
    if isinstance(value, dict):
        return {names.get(k, k): _named(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [_named(item, names) for item in value]
    return value
