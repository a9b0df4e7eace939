"""The template `cdk synth -c kms_key=customer` writes runs locally as it is: the one key is provisioned
(moto's KMS), every table, queue and topic is created under it, and events still go from the outbox table
to both inbox consumers' read models (moto stores the key settings; it encrypts nothing)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from outbox import outputs
from outbox_local.runtime import LocalRuntime, RuntimeOptions
from tests.infra.template_queries import resources
from tests.support.aws import scan_all
from tests.support.inbox import cancelled, order_events
from tests.support.synth import Synthesized


@pytest.fixture
def runtime(customer_key: Synthesized) -> Iterator[LocalRuntime]:
    options = RuntimeOptions(
        template_path=customer_key.template_path,
        background=False,
        function_environment={"POWERTOOLS_METRICS_DISABLED": "true"},
    )
    with LocalRuntime(options) as started:
        yield started


def _items(runtime: LocalRuntime, output: str) -> dict[str, dict[str, Any]]:
    table = runtime.outputs[output]
    return {item["pk"]["S"]: item for item in scan_all(runtime.client("dynamodb"), table)}


def test_each_function_keeps_its_environment_under_the_key_the_template_names(
    runtime: LocalRuntime, customer_key: Synthesized
) -> None:
    # Given the customer-key template provisioned locally, and the KmsKeyArn each function sets (if any)
    [key] = runtime.client("kms").list_keys()["Keys"]
    functions = resources(customer_key.template, "AWS::Lambda::Function")
    sets_a_key = {logical_id for logical_id, f in functions.items() if "KmsKeyArn" in f["Properties"]}

    # When each hosted function's spec is read
    assert runtime.host is not None
    hosted = {spec.logical_id: spec.kms_key_arn for spec in runtime.host.functions}

    # Then a function whose template sets KmsKeyArn carries the one key's ARN for its environment (its
    # reference resolved to the provisioned key), and one that sets none carries none
    assert set(hosted) == set(functions)
    assert hosted == {
        logical_id: key["KeyArn"] if logical_id in sets_a_key else None for logical_id in functions
    }


def test_the_customer_key_template_runs_locally_end_to_end(runtime: LocalRuntime) -> None:
    # Given the customer-key template provisioned locally: one key, every table, queue and topic under it
    [key] = runtime.client("kms").list_keys()["Keys"]
    dynamodb, sqs, sns = runtime.client("dynamodb"), runtime.client("sqs"), runtime.client("sns")
    tables = dynamodb.list_tables()["TableNames"]
    assert len(tables) == 4
    for name in tables:
        encryption = dynamodb.describe_table(TableName=name)["Table"]["SSEDescription"]
        assert encryption == {"Status": "ENABLED", "SSEType": "KMS", "KMSMasterKeyArn": key["KeyArn"]}, name
    for url in sqs.list_queues()["QueueUrls"]:
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["KmsMasterKeyId"])["Attributes"]
        assert attributes["KmsMasterKeyId"] == key["KeyArn"], url
    for topic in sns.list_topics()["Topics"]:
        attributes = sns.get_topic_attributes(TopicArn=topic["TopicArn"])["Attributes"]
        assert attributes["KmsMasterKeyId"] == key["KeyArn"], topic

    # When an order's events are written to the outbox table and the streams drained
    placed, confirmed, *_ = order_events("o-1")
    for written in (placed, confirmed, cancelled("o-1", 3)):
        dynamodb.put_item(TableName=runtime.outputs[outputs.OUTBOX_TABLE_NAME], Item=written.to_item())
    runtime.drain_streams()

    # Then both consumers applied them, through the topic and through the bus, as without the key
    summary = _items(runtime, outputs.ORDER_SUMMARY_TABLE_NAME)
    assert summary["order#o-1"]["status"] == {"S": "CANCELLED"}
    assert _items(runtime, outputs.CANCELLATIONS_TABLE_NAME)["cancellation#o-1"]["seq"] == {"N": "3"}
    # And nothing was dead-lettered
    for output in (outputs.ORDER_SUMMARY_DEAD_LETTER_QUEUE_URL, outputs.CANCELLATIONS_DEAD_LETTER_QUEUE_URL):
        depth = sqs.get_queue_attributes(QueueUrl=runtime.outputs[output], AttributeNames=["All"])
        assert depth["Attributes"]["ApproximateNumberOfMessages"] == "0"
