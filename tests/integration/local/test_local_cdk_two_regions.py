"""The real CDK CLI deploying one app into two regions of a running runtime: `cdk bootstrap` of both (a
`CDKToolkit` in each), a home stack holding a `TableV2` with a replica (an `AWS::DynamoDB::GlobalTable`) and a
replica region's stack reading its replica's stream ARN with an `AwsCustomResource` (`Custom::AWS`); then a
write in one region replicated into the other."""

from __future__ import annotations

import dataclasses
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from outbox_cli.local import describe
from outbox_cli.local import options as local_options
from outbox_cli.main import build_parser
from outbox_local.endpoint import LOCAL_CREDENTIALS
from outbox_local.endpoint import environment as local_environment
from outbox_local.errors import TemplateError
from outbox_local.runtime import LocalRuntime, RuntimeOptions
from tests.support.synth import CDK_CLI, cli_environment

EAST, WEST = "us-east-1", "us-west-2"
TABLE = "outbox-two-regions"


def synthesize(out: Path) -> None:
    """The app, synthesized in process (as `cdk synth` would write it)."""
    # Imported here: aws_cdk starts Node, which only this test needs.
    import aws_cdk as cdk
    from aws_cdk import aws_dynamodb as dynamodb
    from aws_cdk import custom_resources

    app = cdk.App(outdir=str(out))
    home = cdk.Stack(app, "Home", env=cdk.Environment(account="123456789012", region=EAST))
    table = dynamodb.TableV2(
        home,
        "Outbox",
        table_name=TABLE,
        partition_key=dynamodb.Attribute(name="aggregate_key", type=dynamodb.AttributeType.STRING),
        sort_key=dynamodb.Attribute(name="seq", type=dynamodb.AttributeType.NUMBER),
        dynamo_stream=dynamodb.StreamViewType.NEW_AND_OLD_IMAGES,
        replicas=[dynamodb.ReplicaTableProps(region=WEST)],
        removal_policy=cdk.RemovalPolicy.DESTROY,
    )
    cdk.CfnOutput(home, "Stream", value=table.table_stream_arn or "")
    replica = cdk.Stack(app, "Replica", env=cdk.Environment(account="123456789012", region=WEST))
    call = custom_resources.AwsSdkCall(
        service="DynamoDB",
        action="describeTable",
        parameters={"TableName": TABLE},
        physical_resource_id=custom_resources.PhysicalResourceId.of(f"{TABLE}-stream"),
        output_paths=["Table.LatestStreamArn"],
    )
    stream = custom_resources.AwsCustomResource(
        replica,
        "StreamArn",
        on_create=call,
        on_update=call,
        install_latest_aws_sdk=False,
        policy=custom_resources.AwsCustomResourcePolicy.from_sdk_calls(
            resources=custom_resources.AwsCustomResourcePolicy.ANY_RESOURCE
        ),
    )
    cdk.CfnOutput(replica, "Stream", value=stream.get_response_field("Table.LatestStreamArn"))
    app.synth()


@pytest.fixture(scope="module")
def cdk_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("app") / "cdk.out"
    synthesize(out)
    return out


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[LocalRuntime]:
    options = RuntimeOptions(template_path=None, state_dir=tmp_path / "state", replication_lag_s=0.2)
    with LocalRuntime(options) as started:
        yield started


def cdk(runtime: LocalRuntime, *arguments: str) -> str:
    environment = {**cli_environment(), **local_environment(runtime.endpoint_url, EAST)}
    done = subprocess.run(  # noqa: S603 - the pinned CLI, our arguments
        [str(CDK_CLI), *arguments], env=environment, capture_output=True, text=True, timeout=180, check=False
    )
    assert done.returncode == 0, f"cdk {' '.join(arguments)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def client(runtime: LocalRuntime, service: str, region: str) -> Any:
    return boto3.client(service, endpoint_url=runtime.endpoint_url, region_name=region, **LOCAL_CREDENTIALS)


def test_one_app_deployed_into_two_regions_with_a_global_table(runtime: LocalRuntime, cdk_out: Path) -> None:
    out = cdk_out
    cdk(runtime, "bootstrap", f"aws://123456789012/{EAST}", f"aws://123456789012/{WEST}")
    cdk(runtime, "deploy", "--app", str(out), "Home", "Replica", "--require-approval", "never")

    for region, name in ((EAST, "Home"), (WEST, "Replica")):
        stacks = client(runtime, "cloudformation", region).describe_stacks()["Stacks"]
        assert {stack["StackName"] for stack in stacks} == {"CDKToolkit", name}
        (stack,) = [stack for stack in stacks if stack["StackName"] == name]
        (output,) = stack["Outputs"]
        described = client(runtime, "dynamodb", region).describe_table(TableName=TABLE)["Table"]
        assert output["OutputValue"] == described["LatestStreamArn"]

    client(runtime, "dynamodb", EAST).put_item(
        TableName=TABLE, Item={"aggregate_key": {"S": "Order#1"}, "seq": {"N": "1"}}
    )
    west = client(runtime, "dynamodb", WEST)
    deadline = time.monotonic() + 10
    while west.scan(TableName=TABLE)["Count"] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert west.scan(TableName=TABLE)["Count"] == 1

    cdk(runtime, "destroy", "--app", str(out), "Replica", "Home", "--force")
    for region in (EAST, WEST):
        assert TABLE not in client(runtime, "dynamodb", region).list_tables()["TableNames"]


def test_local_up_all_stacks_starts_each_stack_of_cdk_out_in_its_region(
    cdk_out: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(cdk_out.parent)
    arguments = build_parser().parse_args(["local", "up", "--all-stacks", "--no-state", "--in-process"])
    started = dataclasses.replace(local_options(arguments, background=False), aws_port=0, api_port=0)
    assert (started.stack_name, started.region) == ("Home", EAST)
    assert [(more.name, more.region) for more in started.more_stacks] == [("Replica", WEST)]
    with LocalRuntime(started) as runtime:
        assert set(runtime.stacks) == {"Home", "us-west-2/Replica"}
        banner = describe(runtime)
        assert "  Resources     1 global table, no HTTP API" in banner
        assert f"  Regions       us-east-1, us-west-2: {TABLE} replicated after 1 s" in banner
        assert "  Other stacks  Replica in us-west-2 (`outbox status --stack NAME --region REGION`" in banner
        west = client(runtime, "dynamodb", WEST)
        assert (
            runtime.stacks["us-west-2/Replica"].outputs["Stream"]
            == west.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
        )
        client(runtime, "dynamodb", EAST).put_item(
            TableName=TABLE, Item={"aggregate_key": {"S": "Order#1"}, "seq": {"N": "1"}}
        )
        runtime.drain_streams()
        assert west.scan(TableName=TABLE)["Count"] == 1


def test_all_stacks_refuses_a_template_of_its_own(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    arguments = build_parser().parse_args(["local", "up", "--all-stacks", "--template", "x.template.json"])
    with pytest.raises(TemplateError, match=r"--all-stacks starts cdk\.out.s stacks"):
        local_options(arguments, background=False)
    with pytest.raises(TemplateError, match=r"no manifest\.json"):
        local_options(build_parser().parse_args(["local", "up", "--all-stacks"]), background=False)
