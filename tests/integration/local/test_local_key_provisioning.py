"""What the local runtime makes of a template's encryption settings: a table is created under the key its
SSESpecification names (DescribeTable answers it, as on AWS); a function keeps the key its `KmsKeyArn` names
for its environment, and one naming a key that does not exist or is disabled is refused, as Lambda's
CreateFunction refuses it (and CloudFormation fails the function)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from outbox_local.errors import ProvisioningError
from outbox_local.runtime import LocalRuntime
from outbox_local.template import ResolvedResource
from tests.support.local_templates import function, options, write_template

KEY = {"Type": "AWS::KMS::Key", "Properties": {"Description": "data key"}}
DISABLED_KEY = {"Type": "AWS::KMS::Key", "Properties": {"Description": "retired key", "Enabled": False}}
ROLE = {"Type": "AWS::IAM::Role", "Properties": {"AssumeRolePolicyDocument": {}}}
MISSING_KEY_ARN = "arn:aws:kms:us-east-1:123456789012:key/00000000-0000-4000-8000-000000000000"


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


def keyed_function(key_arn: Any) -> dict[str, Any]:
    """A function whose environment variables `key_arn` encrypts."""
    resource = function("api", {"GREETING": "hello"})
    resource["Properties"]["KmsKeyArn"] = key_arn
    return resource


def test_a_function_keeps_the_key_its_environment_is_encrypted_with(tmp_path: Path) -> None:
    # Given a function whose KmsKeyArn names the template's key, and one naming none
    body = {
        "Resources": {
            "Key": KEY,
            "Role": ROLE,
            "Keyed": keyed_function({"Fn::GetAtt": ["Key", "Arn"]}),
            "Plain": function("api", {}),
        }
    }

    # When the runtime provisions them
    with LocalRuntime(options(write_template(tmp_path, body))) as runtime:
        assert runtime.host is not None
        keyed, plain = (runtime.host.find(physical(runtime, name).ref) for name in ("Keyed", "Plain"))

        # Then the first carries that key for its environment, the other none; the variables are as written
        assert keyed.kms_key_arn == physical(runtime, "Key").attributes["Arn"]
        assert plain.kms_key_arn is None
        assert keyed.environment == {"GREETING": "hello"}


@pytest.mark.parametrize(
    ("key", "refusal"),
    [
        (MISSING_KEY_ARN, f"KmsKeyArn {MISSING_KEY_ARN} names no key \\(KMSNotFoundException\\)"),
        (
            {"Fn::GetAtt": ["Retired", "Arn"]},
            r"KmsKeyArn \S+ is Disabled, not Enabled \(KMSDisabledException\)",
        ),
    ],
    ids=["missing-key", "disabled-key"],
)
def test_a_function_whose_key_does_not_exist_or_is_disabled_is_refused(
    tmp_path: Path, key: Any, refusal: str
) -> None:
    # Given a function whose KmsKeyArn names a key that does not exist, or one that is disabled
    body = {"Resources": {"Retired": DISABLED_KEY, "Role": ROLE, "Keyed": keyed_function(key)}}

    # When the runtime provisions it, Then it refuses, naming the function and why, as CreateFunction would
    with (
        pytest.raises(ProvisioningError, match=rf"^Keyed \(AWS::Lambda::Function\): {refusal}$"),
        LocalRuntime(options(write_template(tmp_path, body))),
    ):
        pass
