"""The publisher function and its stream mapping."""

import json
from typing import Any

import pytest

from tests.infra.template_queries import function_by_handler, only

PUBLISHER_HANDLER = "outbox_publisher.handler.handler"


def test_stream_mapping_has_the_safe_defaults(template: dict[str, Any]) -> None:
    # Given the synthesized stack
    # When the one event source mapping is read
    _, mapping = only(template, "AWS::Lambda::EventSourceMapping", "OutboxPublisherStreamMapping")
    props = mapping["Properties"]
    publisher_id, _ = function_by_handler(template, PUBLISHER_HANDLER)
    on_failure_id, _ = only(template, "AWS::SQS::Queue", "OutboxFailureQueuesOnFailureQueue")
    outbox_id, _ = only(template, "AWS::DynamoDB::Table", "OutboxTable")

    # Then it reads the Outbox stream from the oldest record into the publisher...
    assert props["EventSourceArn"] == {"Fn::GetAtt": [outbox_id, "StreamArn"]}
    assert props["FunctionName"] == {"Ref": publisher_id}
    assert props["StartingPosition"] == "TRIM_HORIZON"
    # ...reports partial failures and bisects failing batches...
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert props["BisectBatchOnFunctionError"] is True
    # ...gives up after bounded retries and record age (never -1, never the stream's 24 h)...
    assert props["MaximumRetryAttempts"] == 10
    assert props["MaximumRecordAgeInSeconds"] == 3600
    # ...batches, keeps one poller per shard, and sends what it gives up on to the queue
    assert props["BatchSize"] == 100
    assert props["MaximumBatchingWindowInSeconds"] == 1
    assert props["ParallelizationFactor"] == 1
    assert props["DestinationConfig"] == {
        "OnFailure": {"Destination": {"Fn::GetAtt": [on_failure_id, "Arn"]}}
    }
    assert props["Enabled"] is True


def test_stream_mapping_delivers_inserts_and_only_the_changes_that_can_break_the_row_contract(
    template: dict[str, Any],
) -> None:
    # Given the stream mapping
    _, mapping = only(template, "AWS::Lambda::EventSourceMapping", "OutboxPublisherStreamMapping")

    # When its filter criteria are parsed
    patterns = [json.loads(f["Pattern"]) for f in mapping["Properties"]["FilterCriteria"]["Filters"]]

    # Then INSERTs reach the function, and MODIFYs only where a pending event may have been replaced (no
    # MODIFY from a FAILED mark or a redrive); no REMOVE at all: a settle is a delete, so every published
    # event's row leaves with a REMOVE the publisher must not be invoked for (nor for a TTL deletion of a row
    # an earlier release kept). What each lets through on moto's records:
    # tests/integration/publisher/test_publisher_writer_contract.py
    assert patterns == [
        {"eventName": ["INSERT"]},
        {
            "eventName": ["MODIFY"],
            "dynamodb": {
                "OldImage": {"status": {"S": ["PENDING", "PUBLISHED"]}},
                "NewImage": {"status": {"S": ["PENDING"]}},
            },
        },
    ]
    assert not [pattern for pattern in patterns if "REMOVE" in pattern["eventName"]]


def test_publisher_function_runtime_packaging_and_environment(template: dict[str, Any]) -> None:
    # Given the synthesized stack
    # When the publisher function is found by its handler
    _, function = function_by_handler(template, PUBLISHER_HANDLER)
    props = function["Properties"]
    env = props["Environment"]["Variables"]

    # Then it is Python 3.13 on arm64 with tracing, its own log group and the Powertools layer
    assert props["Runtime"] == "python3.13"
    assert props["Architectures"] == ["arm64"]
    assert props["TracingConfig"] == {"Mode": "Active"}
    assert "LogGroup" in props["LoggingConfig"]
    assert props["Code"]["S3Key"].endswith(".zip")
    # And it gets the documented environment contract (no OUTBOX_ROUTES by default; no retention setting: the
    # table keeps no published row)
    assert set(env) == {
        "OUTBOX_TABLE_NAME",
        "TOPIC_ARN",
        "EVENT_BUS_NAME",
        "EVENT_SOURCE",
        "POISON_QUEUE_URL",
        "SWEEP_GRACE_SECONDS",
        "POWERTOOLS_SERVICE_NAME",
        "POWERTOOLS_METRICS_NAMESPACE",
        "POWERTOOLS_LOG_LEVEL",
    }
    assert env["POWERTOOLS_SERVICE_NAME"] == "OutboxStack-Outbox-publisher"
    assert env["POWERTOOLS_METRICS_NAMESPACE"] == "Outbox"
    assert env["EVENT_SOURCE"] == "outbox.orders"
    assert env["SWEEP_GRACE_SECONDS"] == "60"
    # No reservation: the mapping already bounds concurrency to shards x parallelization factor
    assert "ReservedConcurrentExecutions" not in props


def test_every_function_uses_the_pinned_powertools_layer_or_the_override(template: dict[str, Any]) -> None:
    # Given the layer parameter and condition
    parameter = template["Parameters"]["PowertoolsLayerArn"]
    condition = template["Conditions"]["UsePinnedPowertoolsLayer"]

    # When each function's layers are read
    layers = [
        f["Properties"]["Layers"]
        for f in template["Resources"].values()
        if f["Type"] == "AWS::Lambda::Function"
    ]

    # Then an empty parameter selects the SSM-resolved, version-pinned public layer
    assert parameter["Type"] == "String"
    assert parameter["Default"] == ""
    assert condition == {"Fn::Equals": [{"Ref": "PowertoolsLayerArn"}, ""]}
    expected = {
        "Fn::If": [
            "UsePinnedPowertoolsLayer",
            "{{resolve:ssm:/aws/service/powertools/python/arm64/python3.13/3.37.0}}",
            {"Ref": "PowertoolsLayerArn"},
        ]
    }
    assert layers == [[expected]] * 5


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("retry_attempts", -1),
        ("parallelization_factor", 0),
        ("parallelization_factor", 11),
        ("batch_size", 0),
        ("batch_size", 10_001),
    ],
)
def test_stream_settings_reject_unbounded_or_out_of_range_values(field: str, value: int) -> None:
    # Given the stream mapping props
    from outbox_cdk.publisher import StreamMappingProps

    # When a value outside Lambda's bounds (or infinite) is passed
    kwargs: dict[str, Any] = {field: value}

    # Then construction fails before any template exists
    with pytest.raises(ValueError, match=field):
        StreamMappingProps(**kwargs)


def test_stream_settings_reject_infinite_record_age() -> None:
    # Given the stream mapping props
    from aws_cdk import Duration

    from outbox_cdk.publisher import StreamMappingProps

    # When the record age is unbounded (more than a week)
    # Then construction fails
    with pytest.raises(ValueError, match="max_record_age"):
        StreamMappingProps(max_record_age=Duration.days(8))
