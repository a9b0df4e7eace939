"""The real CDK CLI against a running runtime: `cdk bootstrap`, `cdk deploy` of the sample (its synthesized
assembly, no second synthesis), orders placed, one function's code changed and deployed again (the new code
runs; the stream mapping keeps its position: no event published twice; tables keep their data), then
`cdk destroy`. The CLI is configured only as the docs say: AWS_ENDPOINT_URL and the test credentials."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from outbox_cli.main import main as outbox
from outbox_local.endpoint import environment as local_environment
from outbox_local.runtime import LocalRuntime, RuntimeOptions
from tests.support.assemblies import with_changed_code
from tests.support.local_templates import HANDLERS, queue_template, write_template
from tests.support.orders import place_order_over_http
from tests.support.synth import CDK_CLI, Synthesized, cli_environment

STACK = "OutboxStack"
USER_STACK = "UserStack"
ORDERS_FUNCTION = "OrdersApiHandlerFunction0ABAF884"
VERSION_HEADER = "x-code-version"
NEW_CODE = f'''

_first_handler = handler


def handler(event, context):  # the code deployed the second time: the same, plus a header
    response = _first_handler(event, context)
    response.setdefault("headers", {{}})["{VERSION_HEADER}"] = "2"
    return response
'''
DELIVERY_TIMEOUT_S = 30.0


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[LocalRuntime]:
    """A runtime started with a user's own stack (a queue and its function), as `outbox local up` starts
    it from cdk.out, to deploy the sample beside."""
    template = write_template(tmp_path, queue_template())
    options = RuntimeOptions(
        template_path=template,
        stack_name=USER_STACK,
        code_root=HANDLERS,
        max_environments=1,
        state_dir=tmp_path,
    )
    with LocalRuntime(options) as started:
        yield started


def cdk(runtime: LocalRuntime, *arguments: str) -> str:
    # What `outbox local env` prints, nothing else: the docs' set-up.
    environment = {**cli_environment(), **local_environment(runtime.endpoint_url, runtime.options.region)}
    done = subprocess.run(  # noqa: S603 - the pinned CLI, our arguments
        [str(CDK_CLI), *arguments],
        env=environment,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, f"cdk {' '.join(arguments)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def receive_all(sqs: Any, queue_url: str, expected: int) -> list[str]:
    """Every message body the queue holds, once `expected` arrived and a last receive found no more. (A
    duplicate of an earlier event, the stream read again from its start, would come before the new one.)"""
    bodies: list[str] = []
    deadline = time.monotonic() + DELIVERY_TIMEOUT_S
    while time.monotonic() < deadline:
        waiting = 1 if len(bodies) < expected else 0
        found = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=waiting)
        for message in found.get("Messages", []):
            bodies.append(message["Body"])
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
        if len(bodies) >= expected and not found.get("Messages"):
            return bodies
    return bodies


def test_cdk_bootstrap_deploy_change_deploy_destroy(
    runtime: LocalRuntime, synthesized: Synthesized, tmp_path: Path
) -> None:
    # Given a runtime running a user's own stack, bootstrapped by the real CDK CLI
    assert list(runtime.stacks) == [USER_STACK]
    cdk(runtime, "bootstrap", "aws://123456789012/us-east-1", "--app", str(synthesized.outdir))
    cloudformation = runtime.client("cloudformation")
    assert (
        cloudformation.describe_stacks(StackName="CDKToolkit")["Stacks"][0]["StackStatus"]
        == "CREATE_COMPLETE"
    )

    # When the sample is deployed from its synthesized assembly
    cdk(runtime, "deploy", STACK, "--app", str(synthesized.outdir), "--require-approval", "never")

    # Then the stack runs, its outputs in DescribeStacks, its functions' code from the uploaded assets
    (stack,) = cloudformation.describe_stacks(StackName=STACK)["Stacks"]
    assert stack["StackStatus"] == "CREATE_COMPLETE"
    outputs = {output["OutputKey"]: output["OutputValue"] for output in stack["Outputs"]}
    code_roots = {spec.code_root for spec in runtime.stacks[STACK].provisioned.functions}
    assert all(root is not None and runtime.work_dir in root.parents for root in code_roots)
    # And a queue of ours subscribed to the topic sees every event published, once
    sqs, sns = runtime.client("sqs"), runtime.client("sns")
    ours = sqs.create_queue(QueueName="deploy-test-topic")["QueueUrl"]
    ours_arn = sqs.get_queue_attributes(QueueUrl=ours, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(
        TopicArn=outputs["TopicArn"],
        Protocol="sqs",
        Endpoint=ours_arn,
        Attributes={"RawMessageDelivery": "true"},
    )
    first, headers = place_order_over_http(outputs["ApiUrl"])
    assert VERSION_HEADER not in headers
    before = receive_all(sqs, ours, expected=1)
    assert [json.loads(body)["aggregate_id"] for body in before] == [first["order_id"]]
    # And the deployed stack is operated as on AWS, beside the user's own
    assert list(runtime.stacks) == [USER_STACK, "CDKToolkit", STACK]
    endpoint = ["--endpoint-url", runtime.endpoint_url, "--region", runtime.options.region]
    assert outbox(["status", "--stack", STACK, *endpoint]) == 0

    # When one function's code changes and the app is deployed again
    changed = with_changed_code(
        synthesized.outdir,
        tmp_path / "cdk.out.changed",
        STACK,
        ORDERS_FUNCTION,
        lambda code: (code / "orders_api" / "handler.py").write_text(
            (code / "orders_api" / "handler.py").read_text() + NEW_CODE
        ),
    )
    output = cdk(runtime, "deploy", STACK, "--app", str(changed), "--require-approval", "never")

    # Then the stack is updated in place: the new code answers, the table kept the first order, and the
    # stream mapping went on from where it was: the next order's event is published, the first one's not again
    (stack,) = cloudformation.describe_stacks(StackName=STACK)["Stacks"]
    assert stack["StackStatus"] == "UPDATE_COMPLETE", output
    second, headers = place_order_over_http(outputs["ApiUrl"])
    assert headers.get(VERSION_HEADER) == "2"
    orders = runtime.client("dynamodb").scan(TableName=outputs["OrdersTableName"])["Items"]
    stored = {item["order_id"]["S"] for item in orders if "order_id" in item}
    assert stored >= {first["order_id"], second["order_id"]}
    after = receive_all(sqs, ours, expected=1)
    assert [json.loads(body)["aggregate_id"] for body in after] == [second["order_id"]]

    # When the stack is destroyed
    cdk(runtime, "destroy", STACK, "--app", str(changed), "--force")

    # Then it is gone from CloudFormation and from what the runtime runs, its topic deleted; its tables, which
    # the template retains (DeletionPolicy Retain), stay with their data, as on AWS
    with pytest.raises(ClientError, match="does not exist"):
        cloudformation.describe_stacks(StackName=STACK)
    assert STACK not in runtime.stacks
    assert outputs["TopicArn"] not in [topic["TopicArn"] for topic in sns.list_topics()["Topics"]]
    kept = runtime.client("dynamodb").scan(TableName=outputs["OrdersTableName"])["Items"]
    assert {item["order_id"]["S"] for item in kept if "order_id" in item} == stored
    # And the user's own stack runs on: a message on its queue reaches its function
    (user_stack,) = cloudformation.describe_stacks(StackName=USER_STACK)["Stacks"]
    user_outputs = {output["OutputKey"]: output["OutputValue"] for output in user_stack["Outputs"]}
    sqs.send_message(QueueUrl=user_outputs["WorkUrl"], MessageBody="still here")
    seen = receive_all(sqs, user_outputs["SeenUrl"], expected=1)
    assert [json.loads(body)["Records"][0]["body"] for body in seen] == ["still here"]
