"""Lambda's event source mapping read calls on the local endpoint answer the emulator's mappings, with a real
boto3 Lambda client (`outbox_local.event_source_mapping_api`). Streams are driven by `drain_streams`.
"""

from __future__ import annotations

import io
import json
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import botocore.exceptions
import pytest

from outbox_local.event_source_mapping_api import EventSourceMappingApi
from outbox_local.runtime import LocalRuntime
from tests.support.local_templates import options, template, write_template

UNKNOWN_UUID = "00000000-0000-4000-8000-000000000000"


def with_disabled_mapping() -> dict[str, Any]:
    """The test template plus a second mapping, on the environment function, that the template disables."""
    body = template()
    body["Resources"]["DisabledMapping"] = {
        "Type": "AWS::Lambda::EventSourceMapping",
        "Properties": {
            "FunctionName": {"Ref": "EnvFn"},
            "EventSourceArn": {"Fn::GetAtt": ["Items", "StreamArn"]},
            "StartingPosition": "LATEST",
            "Enabled": False,
        },
    }
    return body


@pytest.fixture
def two_mappings(tmp_path: Path) -> Iterator[LocalRuntime]:
    with LocalRuntime(options(write_template(tmp_path, with_disabled_mapping()))) as started:
        yield started


def function_named(runtime: LocalRuntime, logical_id: str) -> tuple[str, str]:
    """(name, ARN) of a template function."""
    assert runtime.host is not None
    spec = runtime.host.find(logical_id)
    return spec.name, spec.arn


def physical_id(runtime: LocalRuntime, logical_id: str) -> str:
    return next(ref for lid, _, ref in runtime.resource_names() if lid == logical_id)


def put_item(runtime: LocalRuntime, item_id: str, behaviour: str) -> None:
    runtime.client("dynamodb").put_item(
        TableName=runtime.outputs["TableName"],
        Item={"pk": {"S": item_id}, "behaviour": {"S": behaviour}},
    )


def last_result(runtime: LocalRuntime, function: str) -> str:
    answer = runtime.client("lambda").list_event_source_mappings(FunctionName=function)
    (mapping,) = answer["EventSourceMappings"]
    return str(mapping["LastProcessingResult"])


def test_list_event_source_mappings_answers_the_template_mappings_in_the_aws_shape(
    two_mappings: LocalRuntime,
) -> None:
    # Given the runtime with an enabled and a disabled mapping
    runtime = two_mappings
    lambda_client = runtime.client("lambda")
    name, arn = function_named(runtime, "StreamFn")
    account_partial_arn = arn.split(":", 4)[-1]  # 123456789012:function:<name>

    # When a tool lists the stream function's mappings by name, by ARN and by partial ARN
    by_name = lambda_client.list_event_source_mappings(FunctionName=name)["EventSourceMappings"]
    by_arn = lambda_client.list_event_source_mappings(FunctionName=arn)["EventSourceMappings"]
    by_partial_arn = lambda_client.list_event_source_mappings(FunctionName=account_partial_arn)

    # Then each answers the one mapping, with the template's settings, as Lambda shapes it
    assert by_name == by_arn == by_partial_arn["EventSourceMappings"]
    (mapping,) = by_name
    stream_arn = runtime.client("dynamodb").describe_table(TableName=runtime.outputs["TableName"])["Table"][
        "LatestStreamArn"
    ]
    on_failure_arn = runtime.client("sqs").get_queue_attributes(
        QueueUrl=runtime.outputs["OnFailureUrl"], AttributeNames=["QueueArn"]
    )["Attributes"]["QueueArn"]
    last_modified = mapping.pop("LastModified")
    uuid = mapping["UUID"]
    assert isinstance(last_modified, datetime)
    assert mapping == {
        "UUID": physical_id(runtime, "Mapping"),  # what `Ref` gives the mapping in the template
        "StartingPosition": "TRIM_HORIZON",
        "BatchSize": 10,
        "MaximumBatchingWindowInSeconds": 1,
        "ParallelizationFactor": 1,
        "EventSourceArn": stream_arn,
        "FilterCriteria": {"Filters": [{"Pattern": json.dumps({"eventName": ["INSERT"]})}]},
        "FunctionArn": arn,
        "LastProcessingResult": "No records processed",
        "State": "Enabled",
        "StateTransitionReason": "User action",
        "DestinationConfig": {"OnFailure": {"Destination": on_failure_arn}},
        "MaximumRecordAgeInSeconds": 3600,
        "BisectBatchOnFunctionError": True,
        "MaximumRetryAttempts": 2,
        "TumblingWindowInSeconds": 0,
        "FunctionResponseTypes": ["ReportBatchItemFailures"],
        "EventSourceMappingArn": f"arn:aws:lambda:us-east-1:123456789012:event-source-mapping:{uuid}",
    }

    # And the disabled mapping is listed as Disabled, with AWS's defaults
    env_name, _ = function_named(runtime, "EnvFn")
    (disabled,) = lambda_client.list_event_source_mappings(FunctionName=env_name)["EventSourceMappings"]
    assert (disabled["State"], disabled["StartingPosition"]) == ("Disabled", "LATEST")
    assert disabled["DestinationConfig"] == {"OnFailure": {}}
    assert (disabled["MaximumRetryAttempts"], disabled["MaximumRecordAgeInSeconds"]) == (-1, -1)
    assert (disabled["BatchSize"], disabled["FunctionResponseTypes"]) == (100, [])
    assert "FilterCriteria" not in disabled

    # And the unfiltered and by-source lists hold both; an unknown function has none
    every = lambda_client.list_event_source_mappings()["EventSourceMappings"]
    assert [m["UUID"] for m in every] == [mapping["UUID"], disabled["UUID"]]
    by_source = lambda_client.list_event_source_mappings(EventSourceArn=stream_arn)["EventSourceMappings"]
    assert len(by_source) == 2
    assert lambda_client.list_event_source_mappings(FunctionName="nothing-here")["EventSourceMappings"] == []


def test_get_event_source_mapping_answers_one_mapping_and_404_for_an_unknown_uuid(
    two_mappings: LocalRuntime,
) -> None:
    # Given the runtime's mappings
    lambda_client = two_mappings.client("lambda")
    listed = lambda_client.list_event_source_mappings()["EventSourceMappings"]

    # When each is read by its UUID, Then it is the listed one
    for mapping in listed:
        got = lambda_client.get_event_source_mapping(UUID=mapping["UUID"])
        got.pop("ResponseMetadata")
        assert got == mapping

    # When an unknown UUID is read, Then Lambda's 404 error comes back
    with pytest.raises(lambda_client.exceptions.ResourceNotFoundException) as raised:
        lambda_client.get_event_source_mapping(UUID=UNKNOWN_UUID)
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    assert raised.value.response["Error"]["Message"] == "The resource you requested does not exist."


def test_the_wire_answer_carries_last_modified_as_epoch_seconds(two_mappings: LocalRuntime) -> None:
    # Given a mapping, When its configuration is read without an SDK
    mapping_uuid = physical_id(two_mappings, "Mapping")
    url = f"{two_mappings.endpoint_url}/2015-03-31/event-source-mappings/{mapping_uuid}"
    with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 - loopback
        answer = json.loads(response.read())
        content_type = response.headers["Content-Type"]

    # Then it is JSON whose LastModified is a number of seconds (when this runtime start created it)
    assert content_type == "application/json"
    assert isinstance(answer["LastModified"], float)
    assert abs(answer["LastModified"] - two_mappings.clock()) < 600
    assert answer["UUID"] == mapping_uuid


def test_last_processing_result_follows_what_the_emulator_did(runtime: LocalRuntime) -> None:
    name, _ = function_named(runtime, "StreamFn")
    # Given a mapping that has invoked nothing yet
    assert last_result(runtime, name) == "No records processed"

    # When a record is processed successfully, Then the result is OK
    put_item(runtime, "ok-1", "ok")
    runtime.drain_streams()
    assert last_result(runtime, name) == "OK"

    # When the function raises on a record until the mapping gives it up, Then the last call failed
    put_item(runtime, "raise-1", "raise")
    runtime.drain_streams()
    assert runtime.mappings[0].stats().discarded_records == 1
    assert last_result(runtime, name) == "PROBLEM: Function call failed"

    # When the function returns with a partial batch failure, Then the call itself succeeded
    put_item(runtime, "fail-1", "fail")
    runtime.drain_streams()
    assert last_result(runtime, name) == "OK"


def test_pages_follow_marker_and_max_items(two_mappings: LocalRuntime) -> None:
    # Given two mappings, When they are listed one per page
    lambda_client = two_mappings.client("lambda")
    first = lambda_client.list_event_source_mappings(MaxItems=1)
    second = lambda_client.list_event_source_mappings(MaxItems=1, Marker=first["NextMarker"])

    # Then each page holds one, the last has no NextMarker, and botocore's paginator walks them
    assert len(first["EventSourceMappings"]) == len(second["EventSourceMappings"]) == 1
    assert "NextMarker" not in second
    paginator = lambda_client.get_paginator("list_event_source_mappings")
    pages = paginator.paginate(PaginationConfig={"PageSize": 1})
    walked = [mapping["UUID"] for page in pages for mapping in page["EventSourceMappings"]]
    assert walked == [m["UUID"] for m in first["EventSourceMappings"] + second["EventSourceMappings"]]

    # When the marker is not one the runtime gave, Then Lambda's parameter error comes back
    with pytest.raises(botocore.exceptions.ClientError) as raised:
        lambda_client.list_event_source_mappings(Marker="not-a-marker")
    assert raised.value.response["Error"]["Code"] == "InvalidParameterValueException"


def test_requests_other_than_the_two_reads_reach_moto_untouched() -> None:
    # Given the layer in front of an app that records what reaches it
    reached: list[tuple[dict[str, Any], bytes]] = []

    def moto(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        reached.append((environ, environ["wsgi.input"].read()))
        start_response("200 OK", [])
        return [b"moto"]

    app = EventSourceMappingApi().wrap(moto)
    requests = [
        ("POST", "/2015-03-31/event-source-mappings/", b'{"FunctionName": "f"}'),  # create
        ("PUT", f"/2015-03-31/event-source-mappings/{UNKNOWN_UUID}", b'{"BatchSize": 5}'),  # update
        ("DELETE", f"/2015-03-31/event-source-mappings/{UNKNOWN_UUID}", b""),
        ("GET", "/2015-03-31/functions/", b""),
        ("GET", "/2015-03-31/event-source-mappings/x/extra", b""),
    ]
    for method, path, body in requests:
        environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "wsgi.input": io.BytesIO(body)}

        # When the request passes the layer, Then moto gets the very same request, body included
        assert list(app(environ, lambda *_: None)) == [b"moto"]
        assert reached[-1] == (environ, body)
    assert len(reached) == len(requests)
