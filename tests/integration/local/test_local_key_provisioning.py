"""What the local runtime makes of a template's encryption settings: a table is created under the key its
SSESpecification names (DescribeTable answers it, as on AWS)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from outbox_local.runtime import LocalRuntime
from outbox_local.template import ResolvedResource
from tests.support.local_templates import options, write_template

KEY = {"Type": "AWS::KMS::Key", "Properties": {"Description": "data key"}}


def table(encryption: dict[str, Any] | None) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
        "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
        "BillingMode": "PAY_PER_REQUEST",
    }
    if encryption is not None:
        properties["SSESpecification"] = encryption
    return {"Type": "AWS::DynamoDB::Table", "Properties": properties}


def physical(runtime: LocalRuntime, logical_id: str) -> ResolvedResource:
    assert runtime.stack is not None
    return runtime.stack.resources[logical_id][1]


def aws_managed_dynamodb_key(runtime: LocalRuntime) -> str:
    metadata = runtime.client("kms").describe_key(KeyId="alias/aws/dynamodb")["KeyMetadata"]
    return str(metadata["Arn"])


@pytest.mark.parametrize(
    ("encryption", "expected"),
    [
        (None, None),
        ({"SSEEnabled": False}, None),
        ({"SSEEnabled": True}, "aws-managed"),
        (
            {"SSEEnabled": "true", "SSEType": "KMS", "KMSMasterKeyId": {"Fn::GetAtt": ["Key", "Arn"]}},
            "customer",
        ),
    ],
    ids=["absent", "disabled", "aws-managed-key", "customer-key"],
)
def test_a_table_is_under_the_key_its_sse_specification_names(
    tmp_path: Path, encryption: dict[str, Any] | None, expected: str | None
) -> None:
    # Given a table with an SSESpecification (or none) next to a customer-managed key
    body = {"Resources": {"Key": KEY, "Items": table(encryption)}}

    # When the runtime provisions it
    with LocalRuntime(options(write_template(tmp_path, body))) as runtime:
        name = physical(runtime, "Items").ref
        description = runtime.client("dynamodb").describe_table(TableName=name)["Table"]
        keys = {
            None: None,
            "aws-managed": aws_managed_dynamodb_key(runtime),
            "customer": physical(runtime, "Key").attributes["Arn"],
        }

    # Then DescribeTable names the key CloudFormation would put it under: none for AWS's own key (SSE off or
    # absent), the AWS managed key for SSEEnabled alone, the customer-managed key it names
    encryption_key = description.get("SSEDescription", {}).get("KMSMasterKeyArn")
    assert encryption_key == keys[expected]
