"""What operations tools ask about the stack, answered by the local runtime running the synthesized app with
the real functions: boto3 clients configured only by `AWS_ENDPOINT_URL`, as the `outbox` CLI's will be, find
the stack's outputs in CloudFormation, the publisher's stream mapping in Lambda and its metrics in CloudWatch.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import boto3
import pytest

from outbox import metrics, outputs
from outbox_local.runtime import LocalRuntime, RuntimeOptions
from tests.support.orders import place_order_over_http
from tests.support.synth import Synthesized


@pytest.mark.usefixtures("fresh_powertools_metrics")
def test_the_stack_mapping_and_publisher_metrics_answer_plain_boto3_on_the_local_endpoint(
    synthesized: Synthesized, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the sample app as `cdk synth` writes it, run locally, and one order placed over HTTP
    options = RuntimeOptions(template_path=synthesized.template_path, background=False)
    with LocalRuntime(options) as runtime:
        assert runtime.api_url is not None
        place_order_over_http(runtime.api_url)

        # When the stream mapping runs the real publisher on the order's event
        runtime.drain_streams()

        # Then clients that know only AWS_ENDPOINT_URL find the stack's outputs through CloudFormation
        monkeypatch.setenv("AWS_ENDPOINT_URL", runtime.endpoint_url)
        (stack,) = boto3.client("cloudformation").describe_stacks(StackName="OutboxStack")["Stacks"]
        found = {output["OutputKey"]: output["OutputValue"] for output in stack["Outputs"]}
        assert found[outputs.OUTBOX_TABLE_NAME] == runtime.outputs[outputs.OUTBOX_TABLE_NAME]
        publisher = found[outputs.PUBLISHER_FUNCTION_NAME]

        # And the publisher's mapping through Lambda, enabled, its last call a success
        lambda_client = boto3.client("lambda")
        (mapping,) = lambda_client.list_event_source_mappings(FunctionName=publisher)["EventSourceMappings"]
        assert mapping["EventSourceArn"] == found[outputs.OUTBOX_TABLE_STREAM_ARN]
        assert (mapping["State"], mapping["LastProcessingResult"]) == ("Enabled", "OK")

        # And the publisher's metrics through CloudWatch: one event published
        now = datetime.now(UTC)
        datapoints = boto3.client("cloudwatch").get_metric_statistics(
            Namespace=metrics.NAMESPACE,
            MetricName=metrics.EVENTS_PUBLISHED,
            Dimensions=[
                {
                    "Name": metrics.SERVICE_DIMENSION,
                    "Value": metrics.service_name("OutboxStack-Outbox", metrics.PUBLISHER),
                }
            ],
            StartTime=now - timedelta(hours=1),
            EndTime=now + timedelta(hours=1),
            Period=60,
            Statistics=["Sum"],
        )["Datapoints"]
        assert sum(point["Sum"] for point in datapoints) == 1.0
