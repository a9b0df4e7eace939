"""Two regions in one local runtime: a global table (`AWS::DynamoDB::GlobalTable` with `Replicas`) provisioned
as one moto table per replica region, replicated by the runtime's replicator; stacks deployed through its
CloudFormation in the region their request was signed for; the replication's queue kept across a restart;
`Custom::AWS` (CDK's AwsCustomResource) made by the runtime, its provider function never run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest

from outbox_local.endpoint import LOCAL_CREDENTIALS
from outbox_local.errors import ProvisioningError, UnsupportedResourceError
from outbox_local.runtime import LocalRuntime
from outbox_local.stacks import StackDefinition
from outbox_local.template import Template
from tests.support.local_templates import options, write_template

EAST, WEST = "us-east-1", "us-west-2"


def global_table_template(regions: tuple[str, ...] = (WEST, EAST), **extra: Any) -> dict[str, Any]:
    return {
        "Resources": {
            "Outbox": {
                "Type": "AWS::DynamoDB::GlobalTable",
                "Properties": {
                    "TableName": "outbox-global",
                    "AttributeDefinitions": [
                        {"AttributeName": "aggregate_key", "AttributeType": "S"},
                        {"AttributeName": "seq", "AttributeType": "N"},
                    ],
                    "KeySchema": [
                        {"AttributeName": "aggregate_key", "KeyType": "HASH"},
                        {"AttributeName": "seq", "KeyType": "RANGE"},
                    ],
                    "BillingMode": "PAY_PER_REQUEST",
                    "Replicas": [{"Region": region} for region in regions],
                    "StreamSpecification": {"StreamViewType": "NEW_AND_OLD_IMAGES"},
                    "TimeToLiveSpecification": {"AttributeName": "expires_at", "Enabled": True},
                    **extra,
                },
                "DeletionPolicy": "Delete",
            }
        },
        "Outputs": {
            "Stream": {"Value": {"Fn::GetAtt": ["Outbox", "StreamArn"]}},
            "TableArn": {"Value": {"Fn::GetAtt": ["Outbox", "Arn"]}},
        },
    }


def client(runtime: LocalRuntime, service: str, region: str) -> Any:
    return boto3.client(service, endpoint_url=runtime.endpoint_url, region_name=region, **LOCAL_CREDENTIALS)


def row(seq: int, status: str = "PENDING") -> dict[str, Any]:
    return {"aggregate_key": {"S": "Order#1"}, "seq": {"N": str(seq)}, "status": {"S": status}}


def get(runtime: LocalRuntime, region: str, seq: int) -> dict[str, Any] | None:
    found: dict[str, Any] | None = (
        client(runtime, "dynamodb", region)
        .get_item(TableName="outbox-global", Key={"aggregate_key": {"S": "Order#1"}, "seq": {"N": str(seq)}})
        .get("Item")
    )
    return found


def test_a_global_table_is_a_table_per_replica_region_replicated_after_the_lag(tmp_path: Path) -> None:
    path = write_template(tmp_path, global_table_template())
    with LocalRuntime(options(path, replication_lag_s=1.0)) as runtime:
        for region in (EAST, WEST):
            described = client(runtime, "dynamodb", region).describe_table(TableName="outbox-global")["Table"]
            assert described["StreamSpecification"]["StreamViewType"] == "NEW_AND_OLD_IMAGES"
        assert runtime.outputs["TableArn"].startswith(f"arn:aws:dynamodb:{EAST}:")
        assert f":{EAST}:" in runtime.outputs["Stream"]
        assert runtime.replication.tables == {"outbox-global": (WEST, EAST)}

        client(runtime, "dynamodb", EAST).put_item(TableName="outbox-global", Item=row(1))
        client(runtime, "dynamodb", WEST).put_item(TableName="outbox-global", Item=row(2))
        started = runtime.clock()
        runtime.drain_streams()  # the clock moves on to when the writes are due, not further
        assert runtime.clock() - started >= 0.9
        for region in (EAST, WEST):
            assert get(runtime, region, 1) == row(1)
            assert get(runtime, region, 2) == row(2)


def test_a_cut_region_gets_its_writes_once_restored_even_after_a_restart(tmp_path: Path) -> None:
    path = write_template(tmp_path, global_table_template())
    state = tmp_path / "state"
    with LocalRuntime(options(path, state_dir=state)) as runtime:
        runtime.replication.cut(WEST)
        client(runtime, "dynamodb", EAST).put_item(TableName="outbox-global", Item=row(1))
        runtime.drain_streams()
        assert get(runtime, WEST, 1) is None
        assert runtime.replication.pending(WEST) == 1
    with LocalRuntime(options(path, state_dir=state)) as runtime:
        assert runtime.restored
        assert runtime.replication.cut_regions == {WEST}
        assert runtime.replication.pending(WEST) == 1
        runtime.replication.restore(WEST)
        runtime.drain_streams()
        assert get(runtime, WEST, 1) == row(1)
        assert runtime.replication.pending() == 0


def test_a_global_table_without_the_stacks_region_is_refused(tmp_path: Path) -> None:
    path = write_template(tmp_path, global_table_template(regions=(WEST, "eu-west-1")))
    with pytest.raises(UnsupportedResourceError, match="do not hold the stack's region us-east-1"):
        LocalRuntime(options(path)).start()


def test_a_strongly_consistent_global_table_is_refused(tmp_path: Path) -> None:
    path = write_template(tmp_path, global_table_template(MultiRegionConsistency="STRONG"))
    with pytest.raises(UnsupportedResourceError, match="only EVENTUAL global tables"):
        LocalRuntime(options(path)).start()


def test_a_stack_deployed_with_a_request_signed_for_a_region_lives_there(tmp_path: Path) -> None:
    body = global_table_template()
    with LocalRuntime(options(None)) as runtime:
        cloudformation = client(runtime, "cloudformation", WEST)
        created = cloudformation.create_change_set(
            StackName="ReplicaStack",
            ChangeSetName="cdk-deploy-change-set",
            ChangeSetType="CREATE",
            TemplateBody=json.dumps(body),
        )
        cloudformation.execute_change_set(ChangeSetName=created["Id"])
        runtime.cloudformation.wait()
        (stack,) = cloudformation.describe_stacks(StackName="ReplicaStack")["Stacks"]
        assert stack["StackStatus"] == "CREATE_COMPLETE", stack
        assert stack["StackId"].startswith(f"arn:aws:cloudformation:{WEST}:")
        outputs = {output["OutputKey"]: output["OutputValue"] for output in stack["Outputs"]}
        assert outputs["TableArn"].startswith(f"arn:aws:dynamodb:{WEST}:")
        assert runtime.stacks["us-west-2/ReplicaStack"].definition.region == WEST

        cloudformation.delete_stack(StackName="ReplicaStack")
        runtime.cloudformation.wait()
        assert runtime.replication.tables == {}
        for region in (EAST, WEST):
            assert "outbox-global" not in client(runtime, "dynamodb", region).list_tables()["TableNames"]


PROVIDER = "AWS679f53fac002430cb0da5b7982bd22872D164C4C"


def replica_stack_template(resource_type: str = "Custom::AWS", **call: Any) -> dict[str, Any]:
    """What CDK synthesizes for a replica region's stack reading its global table's stream ARN with an
    AwsCustomResource: the Node.js provider function, its role, the call's policy and the `Custom::AWS`."""
    describe = {
        "service": "DynamoDB",
        "action": "describeTable",
        "outputPaths": ["Table.LatestStreamArn"],
        "parameters": {"TableName": "outbox-global"},
        "physicalResourceId": {"id": "outbox-global-stream"},
        **call,
    }
    return {
        "Resources": {
            "ProviderRole": {"Type": "AWS::IAM::Role", "Properties": {"AssumeRolePolicyDocument": {}}},
            PROVIDER: {
                "Type": "AWS::Lambda::Function",
                "Properties": {
                    "Code": {"S3Bucket": "cdk-assets", "S3Key": "provider.zip"},
                    "Handler": "index.handler",
                    "Role": {"Fn::GetAtt": ["ProviderRole", "Arn"]},
                    "Runtime": "nodejs24.x",
                    "Timeout": 120,
                },
            },
            "StreamArnPolicy": {
                "Type": "AWS::IAM::Policy",
                "Properties": {"PolicyDocument": {}, "PolicyName": "p", "Roles": [{"Ref": "ProviderRole"}]},
            },
            "StreamArn": {
                "Type": resource_type,
                "Properties": {
                    "ServiceToken": {"Fn::GetAtt": [PROVIDER, "Arn"]},
                    "Create": json.dumps(describe),
                    "Update": json.dumps(describe),
                    "InstallLatestAwsSdk": True,
                },
                "DependsOn": ["StreamArnPolicy"],
            },
        },
        "Outputs": {"Stream": {"Value": {"Fn::GetAtt": ["StreamArn", "Table.LatestStreamArn"]}}},
    }


def test_custom_aws_describe_table_serves_the_replicas_stream_arn_without_running_its_provider(
    tmp_path: Path,
) -> None:
    home = write_template(tmp_path, global_table_template())
    replica = tmp_path / "replica"
    replica.mkdir()
    with LocalRuntime(options(home)) as runtime:
        deployed = runtime.create_stack(
            StackDefinition(
                "Replica", Template.load(write_template(replica, replica_stack_template())), region=WEST
            )
        )
        west = client(runtime, "dynamodb", WEST).describe_table(TableName="outbox-global")["Table"]
        assert deployed.outputs["Stream"] == west["LatestStreamArn"]
        assert f":{WEST}:" in deployed.outputs["Stream"]
        assert deployed.provisioned.resources["StreamArn"][1].ref == "outbox-global-stream"
        assert deployed.provisioned.functions == []  # the provider is never hosted


def test_custom_aws_call_errors_and_other_custom_types_are_refused_naming_them(tmp_path: Path) -> None:
    with LocalRuntime(options(None)) as runtime:
        missing = write_template(tmp_path, replica_stack_template(parameters={"TableName": "absent"}))
        with pytest.raises(
            ProvisioningError, match=r"DynamoDB\.describeTable failed: ResourceNotFoundException"
        ):
            runtime.create_stack(StackDefinition("Missing", Template.load(missing)))
        other = write_template(tmp_path, replica_stack_template("Custom::Mine"))
        with pytest.raises(UnsupportedResourceError, match="Custom::Mine"):
            runtime.create_stack(StackDefinition("Other", Template.load(other)))


def test_each_region_has_stacks_of_its_own_under_the_same_name(tmp_path: Path) -> None:
    """As `cdk bootstrap` of two regions makes a `CDKToolkit` in each."""
    body = {
        "Resources": {"Queue": {"Type": "AWS::SQS::Queue", "Properties": {}}},
        "Outputs": {"QueueArn": {"Value": {"Fn::GetAtt": ["Queue", "Arn"]}}},
    }
    with LocalRuntime(options(None)) as runtime:
        for region in (EAST, WEST):
            cloudformation = client(runtime, "cloudformation", region)
            cloudformation.create_stack(StackName="Toolkit", TemplateBody=json.dumps(body))
            runtime.cloudformation.wait()
        for region in (EAST, WEST):
            (stack,) = client(runtime, "cloudformation", region).describe_stacks()["Stacks"]
            assert stack["StackName"] == "Toolkit"
            assert stack["StackStatus"] == "CREATE_COMPLETE"
            assert stack["Outputs"][0]["OutputValue"].startswith(f"arn:aws:sqs:{region}:")
        assert set(runtime.stacks) == {"Toolkit", "us-west-2/Toolkit"}
        client(runtime, "cloudformation", WEST).delete_stack(StackName="Toolkit")
        runtime.cloudformation.wait()
        assert set(runtime.stacks) == {"Toolkit"}
        assert client(runtime, "cloudformation", WEST).describe_stacks()["Stacks"] == []
