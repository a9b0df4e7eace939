"""Small hand-written templates for the local runtime's tests, and how to start a runtime on them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from outbox_local.runtime import RuntimeOptions

HANDLERS = Path(__file__).resolve().parents[1] / "integration" / "local" / "handlers"


def function(handler: str, variables: dict[str, Any]) -> dict[str, Any]:
    return {
        "Type": "AWS::Lambda::Function",
        "Properties": {
            "Handler": f"local_test_handlers.{handler}",
            "Runtime": "python3.13",
            "Code": {"S3Bucket": "assets", "S3Key": "code.zip"},
            "Role": {"Fn::GetAtt": ["Role", "Arn"]},
            "Timeout": 30,
            "Environment": {"Variables": variables},
        },
    }


def queue_policy(queue: str) -> dict[str, Any]:
    return {
        "Type": "AWS::SQS::QueuePolicy",
        "Properties": {
            "Queues": [{"Ref": queue}],
            "PolicyDocument": {"Version": "2012-10-17", "Statement": []},
        },
    }


def template(**mapping_overrides: Any) -> dict[str, Any]:
    mapping = {
        "FunctionName": {"Ref": "StreamFn"},
        "EventSourceArn": {"Fn::GetAtt": ["Items", "StreamArn"]},
        "StartingPosition": "TRIM_HORIZON",
        "BatchSize": 10,
        "MaximumBatchingWindowInSeconds": 1,
        "MaximumRetryAttempts": 2,
        "MaximumRecordAgeInSeconds": 3600,
        "BisectBatchOnFunctionError": True,
        "FunctionResponseTypes": ["ReportBatchItemFailures"],
        "FilterCriteria": {"Filters": [{"Pattern": json.dumps({"eventName": ["INSERT"]})}]},
        "DestinationConfig": {"OnFailure": {"Destination": {"Fn::GetAtt": ["OnFailure", "Arn"]}}},
        **mapping_overrides,
    }
    integration_target = {"Fn::Join": ["", ["integrations/", {"Ref": "Integration"}]]}
    return {
        "Parameters": {
            "BootstrapVersion": {
                "Type": "AWS::SSM::Parameter::Value<String>",
                "Default": "/cdk-bootstrap/hnb659fds/version",
            }
        },
        "Resources": {
            "Items": {
                "Type": "AWS::DynamoDB::Table",
                "Properties": {
                    "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
                    "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
                    "BillingMode": "PAY_PER_REQUEST",
                    "StreamSpecification": {"StreamViewType": "NEW_IMAGE"},
                    "TimeToLiveSpecification": {"AttributeName": "expires_at", "Enabled": True},
                },
            },
            "Delivered": {"Type": "AWS::SQS::Queue", "Properties": {}},
            "OnFailure": {"Type": "AWS::SQS::Queue", "Properties": {"MessageRetentionPeriod": 1209600}},
            "TopicConsumer": {"Type": "AWS::SQS::Queue"},
            "BusConsumer": {"Type": "AWS::SQS::Queue"},
            "TopicConsumerPolicy": queue_policy("TopicConsumer"),
            "Topic": {"Type": "AWS::SNS::Topic", "Properties": {"DisplayName": "local"}},
            "Subscription": {
                "Type": "AWS::SNS::Subscription",
                "Properties": {
                    "TopicArn": {"Ref": "Topic"},
                    "Protocol": "sqs",
                    "Endpoint": {"Fn::GetAtt": ["TopicConsumer", "Arn"]},
                    "RawMessageDelivery": True,
                },
            },
            "Bus": {"Type": "AWS::Events::EventBus", "Properties": {"Name": "local-bus"}},
            # EventBusName as a Ref is what crashes moto's own CloudFormation (docs/local.md).
            "BusRule": {
                "Type": "AWS::Events::Rule",
                "Properties": {
                    "EventBusName": {"Ref": "Bus"},
                    "EventPattern": {"source": ["local.tests"]},
                    "Targets": [{"Id": "q", "Arn": {"Fn::GetAtt": ["BusConsumer", "Arn"]}}],
                },
            },
            "Alarm": {
                "Type": "AWS::CloudWatch::Alarm",
                "Properties": {
                    "MetricName": "ApproximateNumberOfMessagesVisible",
                    "Namespace": "AWS/SQS",
                    "Dimensions": [
                        {"Name": "QueueName", "Value": {"Fn::GetAtt": ["OnFailure", "QueueName"]}}
                    ],
                    "Statistic": "Maximum",
                    "Period": 60,
                    "EvaluationPeriods": 1,
                    "Threshold": 0,
                    "ComparisonOperator": "GreaterThanThreshold",
                    "AlarmActions": [{"Ref": "Topic"}],
                },
            },
            "Role": {"Type": "AWS::IAM::Role", "Properties": {"AssumeRolePolicyDocument": {}}},
            "ApiFn": function(
                "api", {"TABLE_NAME": {"Ref": "Items"}, "LOCAL_STACK": {"Fn::Sub": "${AWS::StackName}-api"}}
            ),
            "StreamFn": function("stream", {"DELIVERED_URL": {"Ref": "Delivered"}}),
            "EnvFn": function("environment", {"TABLE_NAME": {"Ref": "Items"}}),
            "Mapping": {"Type": "AWS::Lambda::EventSourceMapping", "Properties": mapping},
            "Api": {
                "Type": "AWS::ApiGatewayV2::Api",
                "Properties": {"Name": "items", "ProtocolType": "HTTP"},
            },
            "Integration": {
                "Type": "AWS::ApiGatewayV2::Integration",
                "Properties": {
                    "ApiId": {"Ref": "Api"},
                    "IntegrationType": "AWS_PROXY",
                    "IntegrationUri": {"Fn::GetAtt": ["ApiFn", "Arn"]},
                    "PayloadFormatVersion": "2.0",
                },
            },
            **{
                f"Route{index}": {
                    "Type": "AWS::ApiGatewayV2::Route",
                    "Properties": {
                        "ApiId": {"Ref": "Api"},
                        "RouteKey": key,
                        "Target": integration_target,
                        "AuthorizationType": "AWS_IAM",
                    },
                }
                for index, key in enumerate(["POST /items", "GET /items/{id}", "GET /echo"])
            },
            "Stage": {
                "Type": "AWS::ApiGatewayV2::Stage",
                "Properties": {"ApiId": {"Ref": "Api"}, "StageName": "$default", "AutoDeploy": True},
            },
            "Permission": {
                "Type": "AWS::Lambda::Permission",
                "Properties": {"Action": "lambda:InvokeFunction", "FunctionName": {"Ref": "ApiFn"}},
            },
        },
        "Outputs": {
            "ApiUrl": {
                "Value": {
                    "Fn::Join": [
                        "",
                        [
                            "https://",
                            {"Ref": "Api"},
                            ".execute-api.",
                            {"Ref": "AWS::Region"},
                            ".amazonaws.com/",
                        ],
                    ]
                }
            },
            "TableName": {"Value": {"Ref": "Items"}},
            "DeliveredUrl": {"Value": {"Ref": "Delivered"}},
            "OnFailureUrl": {"Value": {"Ref": "OnFailure"}},
            "TopicConsumerUrl": {"Value": {"Ref": "TopicConsumer"}},
            "BusConsumerUrl": {"Value": {"Ref": "BusConsumer"}},
            "TopicArn": {"Value": {"Ref": "Topic"}},
            "AlarmName": {"Value": {"Ref": "Alarm"}},
        },
    }


# Not below the test functions' 30 s timeout (Lambda refuses that), and longer than any test: a message a
# failure leaves in flight stays invisible until the test ends.
VISIBILITY_TIMEOUT_S = 60


def queue_template(
    *,
    work: dict[str, Any] | None = None,
    ordered: dict[str, Any] | None = None,
    work_queue: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A standard queue (Work) and a FIFO queue (Ordered), each mapped to the queue handler as CDK's
    `SqsEventSource(queue, batch_size=10, report_batch_item_failures=True)` synthesizes it. The handler puts
    every event it gets on the Seen queue. Overrides replace mapping properties; None removes one."""

    def mapping(queue: str, overrides: dict[str, Any] | None) -> dict[str, Any]:
        properties = {
            "FunctionName": {"Ref": "QueueFn"},
            "EventSourceArn": {"Fn::GetAtt": [queue, "Arn"]},
            "BatchSize": 10,
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
            **(overrides or {}),
        }
        return {
            "Type": "AWS::Lambda::EventSourceMapping",
            "Properties": {key: value for key, value in properties.items() if value is not None},
        }

    return {
        "Resources": {
            "Work": {
                "Type": "AWS::SQS::Queue",
                "Properties": {"VisibilityTimeout": VISIBILITY_TIMEOUT_S, **(work_queue or {})},
            },
            "Ordered": {
                "Type": "AWS::SQS::Queue",
                "Properties": {"FifoQueue": True, "VisibilityTimeout": VISIBILITY_TIMEOUT_S},
            },
            "Seen": {"Type": "AWS::SQS::Queue"},
            "Role": {"Type": "AWS::IAM::Role", "Properties": {"AssumeRolePolicyDocument": {}}},
            "QueueFn": function("queue", {"SEEN_URL": {"Ref": "Seen"}}),
            "WorkMapping": mapping("Work", work),
            "OrderedMapping": mapping("Ordered", ordered),
        },
        "Outputs": {
            "WorkUrl": {"Value": {"Ref": "Work"}},
            "OrderedUrl": {"Value": {"Ref": "Ordered"}},
            "SeenUrl": {"Value": {"Ref": "Seen"}},
        },
    }


def write_template(directory: Path, body: dict[str, Any]) -> Path:
    path = directory / "template.json"
    path.write_text(json.dumps(body), encoding="utf-8")
    return path


def options(path: Path | None, **overrides: Any) -> RuntimeOptions:
    settings: dict[str, Any] = {"code_root": HANDLERS, "background": False, "retry_delay_s": 0.0, **overrides}
    return RuntimeOptions(template_path=path, **settings)


REPOSITORY = Path(__file__).resolve().parents[2]


@dataclass
class LocalUp:
    """`outbox local up` running in its own process, as a developer starts it, once it said it is ready."""

    process: subprocess.Popen[str]
    printed: str

    @property
    def endpoint(self) -> str:
        found = re.search(r"AWS endpoint\s+(http://127\.0\.0\.1:\d+)", self.printed)
        assert found, self.printed
        return found.group(1)


def venv_outbox() -> list[str]:
    """The venv's `outbox` script, as the docs start it (what it prints names the script it ran as)."""
    script = Path(sys.executable).parent / "outbox"
    return [str(script)] if script.exists() else [sys.executable, "-m", "outbox_cli.main"]


@contextmanager
def running_local_up(
    arguments: Sequence[str], *, environment: Mapping[str, str], cwd: Path, command: Sequence[str] = ()
) -> Iterator[LocalUp]:
    """`outbox local up ARGUMENTS` on free ports in its own process (`command`, default the venv's script),
    once it printed `ready`; killed on the way out if it still runs."""
    process = subprocess.Popen(  # noqa: S603 - our own CLI, fixed arguments
        [*(command or venv_outbox()), "local", "up", *arguments, "--aws-port", "0", "--api-port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(environment),
        cwd=cwd,
    )
    try:
        assert process.stdout is not None
        assert process.stderr is not None
        printed = []
        for line in process.stdout:
            printed.append(line)
            if line.startswith("ready"):
                break
        said, last = "".join(printed), printed[-1] if printed else ""
        assert last.startswith("ready"), said + process.stderr.read()
        yield LocalUp(process, said)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@contextmanager
def local_up(template_path: Path) -> Iterator[LocalUp]:
    """Start `outbox local up` on free ports with the test handlers importable."""
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPOSITORY), str(HANDLERS)])}
    with running_local_up(["--template", str(template_path)], environment=environment, cwd=REPOSITORY) as up:
        yield up
