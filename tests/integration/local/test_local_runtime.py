"""The local runtime end to end on a moto server: provisioning, the HTTP API, the stream emulator, faults,
and clean shutdown. Streams are driven step by step (`drain_streams`), never by sleeping.
"""

from __future__ import annotations

import json
import socket
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import botocore.exceptions
import pytest
from aws_lambda_powertools.utilities.parser.models import (
    APIGatewayProxyEventV2Model,
    DynamoDBStreamLambdaOnFailureDestinationModel,
)

from outbox_local.errors import ProvisioningError, UnsupportedResourceError
from outbox_local.queues import receive_all
from outbox_local.runtime import LocalRuntime, RuntimeOptions
from tests.support.local_templates import options, template, write_template
from tests.support.orders import http_event
from tests.support.synth import Synthesized


def call(runtime: LocalRuntime, method: str, path: str, body: Any = None, **headers: str) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(  # noqa: S310 - loopback
        f"{runtime.api_url}{path}",
        data=data,
        method=method,
        headers={"content-type": "application/json", **headers},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def queue_bodies(runtime: LocalRuntime, url: str) -> list[str]:
    return [message["Body"] for message in receive_all(runtime.client("sqs"), url)]


def put_items(runtime: LocalRuntime, *behaviours: tuple[str, str]) -> None:
    for item_id, behaviour in behaviours:
        status, _ = call(runtime, "POST", "/items", {"id": item_id, "behaviour": behaviour})
        assert status == 201


def test_the_template_is_provisioned_including_what_moto_cloudformation_skips(runtime: LocalRuntime) -> None:
    # Given the runtime started on the hand-written template (a Ref bus name, a subscription, an alarm)
    outputs = runtime.outputs

    # When messages go through the topic and the bus
    runtime.client("sns").publish(TopicArn=outputs["TopicArn"], Message="via-topic")
    runtime.client("events").put_events(
        Entries=[{"Source": "local.tests", "DetailType": "T", "Detail": "{}", "EventBusName": "local-bus"}]
    )

    # Then the subscription and the rule deliver to their queues, and the alarm exists
    assert queue_bodies(runtime, outputs["TopicConsumerUrl"]) == ["via-topic"]
    assert json.loads(queue_bodies(runtime, outputs["BusConsumerUrl"])[0])["source"] == "local.tests"
    alarms = runtime.client("cloudwatch").describe_alarms(AlarmNames=[outputs["AlarmName"]])["MetricAlarms"]
    assert alarms[0]["AlarmActions"] == [outputs["TopicArn"]]
    table = runtime.client("dynamodb").describe_table(TableName=outputs["TableName"])["Table"]
    assert table["StreamSpecification"] == {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"}
    # And the API URL output points at the local server, not at execute-api
    assert outputs["ApiUrl"] == f"{runtime.api_url}/"


def test_http_requests_become_payload_v2_events_and_responses_map_back(runtime: LocalRuntime) -> None:
    # Given an item created over HTTP
    status, created = call(runtime, "POST", "/items", {"id": "a-1"})
    assert status == 201
    assert created["request_id"]  # the handler got a Lambda-like context

    # When it is read back by a path-parameter route, and an echo route is called with a repeated query key
    status, body = call(runtime, "GET", "/items/a-1")
    echo_status, echo = call(
        runtime, "GET", "/echo?x=1&x=2&y=", **{"X-Custom": "Value", "Cookie": "a=1; b=2"}
    )

    # Then the event has the API Gateway v2 shape and the response is mapped from the handler's answer
    assert (status, body) == (200, {"id": "a-1"})
    assert echo_status == 200
    event = echo["event"]
    APIGatewayProxyEventV2Model.model_validate(event)
    assert event["routeKey"] == "GET /echo"
    assert event["rawQueryString"] == "x=1&x=2&y="
    assert event["queryStringParameters"] == {"x": "1,2", "y": ""}
    assert event["headers"]["x-custom"] == "Value"
    assert event["cookies"] == ["a=1", "b=2"]
    assert event["requestContext"]["http"]["method"] == "GET"
    assert 0 < echo["remaining_ms"] <= 30_000


def test_the_api_answers_404_for_unknown_routes_and_500_when_the_function_fails(
    runtime: LocalRuntime,
) -> None:
    # Given the runtime, When calling a route the template lacks and a request that makes the handler raise
    missing = call(runtime, "DELETE", "/items/a-1")
    failed = call(runtime, "POST", "/items", {"id": "x", "behaviour": "api-raise"})

    # Then API Gateway's answers come back
    assert missing == (404, {"message": "Not Found"})
    assert failed == (500, {"message": "Internal Server Error"})


def test_stream_records_reach_the_function_and_partial_failures_are_retried_then_sent_to_on_failure(
    runtime: LocalRuntime,
) -> None:
    # Given MaximumRetryAttempts 2 with ReportBatchItemFailures, and a batch whose second record always fails
    put_items(runtime, ("i-1", "ok"), ("i-2", "fail"), ("i-3", "ok"))

    # When the mapping drains the stream
    runtime.drain_streams()

    # Then i-1 was delivered once; i-3, after the failure, was re-sent with every retry (AWS re-sends from the
    # lowest failure); after the retries the failed range went to the on-failure destination as metadata
    delivered = queue_bodies(runtime, runtime.outputs["DeliveredUrl"])
    assert delivered.count("i-1") == 1
    assert delivered.count("i-3") == 3
    (metadata,) = [json.loads(body) for body in queue_bodies(runtime, runtime.outputs["OnFailureUrl"])]
    parsed = DynamoDBStreamLambdaOnFailureDestinationModel.model_validate(metadata)
    assert parsed.request_context.condition == "RetryAttemptsExhausted"
    assert parsed.request_context.approximate_invoke_count == 3
    assert parsed.ddb_stream_batch_info.batch_size == 2  # i-2 and i-3: the failing suffix
    stream_arn = runtime.client("dynamodb").describe_table(TableName=runtime.outputs["TableName"])["Table"][
        "LatestStreamArn"
    ]
    assert parsed.ddb_stream_batch_info.stream_arn == stream_arn


def test_bisect_isolates_a_record_that_makes_the_function_raise(runtime: LocalRuntime) -> None:
    # Given BisectBatchOnFunctionError and a batch with a record that makes the function raise
    put_items(runtime, ("b-1", "ok"), ("b-2", "ok"), ("b-3", "raise"), ("b-4", "ok"))

    # When the mapping drains the stream
    runtime.drain_streams()

    # Then every other record was delivered and only the raising one was given up
    assert sorted(set(queue_bodies(runtime, runtime.outputs["DeliveredUrl"]))) == ["b-1", "b-2", "b-4"]
    (metadata,) = [json.loads(body) for body in queue_bodies(runtime, runtime.outputs["OnFailureUrl"])]
    assert metadata["DDBStreamBatchInfo"]["batchSize"] == 1
    assert metadata["responseContext"]["functionError"] == "Unhandled"
    assert runtime.mappings[0].stats().discarded_records == 1


def test_filter_criteria_keep_modify_records_from_the_function(runtime: LocalRuntime) -> None:
    # Given an INSERT-only filter, an inserted item that is then modified
    put_items(runtime, ("m-1", "ok"))
    runtime.client("dynamodb").update_item(
        TableName=runtime.outputs["TableName"],
        Key={"pk": {"S": "m-1"}},
        UpdateExpression="SET note = :n",
        ExpressionAttributeValues={":n": {"S": "changed"}},
    )

    # When the mapping drains the stream, Then only the INSERT reached the function
    runtime.drain_streams()
    assert queue_bodies(runtime, runtime.outputs["DeliveredUrl"]) == ["m-1"]
    assert runtime.mappings[0].stats().invocations == 1


def test_functions_get_their_template_environment_and_never_the_host_credentials(
    runtime: LocalRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a developer's real profile in the host environment
    monkeypatch.setenv("AWS_PROFILE", "production")

    # When a function reports its environment
    environment = runtime.invoke("EnvFn", {}).payload

    # Then it sees its resolved variables and the local endpoint, not the profile; the host keeps its own
    assert environment["TABLE_NAME"] == runtime.outputs["TableName"]
    assert environment["AWS_ENDPOINT_URL"] == runtime.endpoint_url
    assert environment["AWS_LAMBDA_FUNCTION_NAME"].startswith("OutboxStack-EnvFn-")
    assert "AWS_PROFILE" not in environment
    import os

    assert os.environ["AWS_PROFILE"] == "production"


@pytest.mark.parametrize(
    ("service", "operation", "send"),
    [
        ("sns", "Publish", lambda rt: rt.client("sns").publish(TopicArn=rt.outputs["TopicArn"], Message="m")),
        (
            "events",
            "PutEvents",
            lambda rt: rt.client("events").put_events(
                Entries=[{"Source": "s", "DetailType": "d", "Detail": "{}"}]
            ),
        ),
    ],
    ids=["query-protocol", "json-protocol"],
)
def test_an_armed_fault_answers_with_a_real_aws_error_until_disarmed(
    runtime: LocalRuntime, service: str, operation: str, send: Any
) -> None:
    # Given a fault armed on one operation
    rule = runtime.faults.arm(service, operation, error_code="InternalError", http_status=500)

    # When the operation is called, Then botocore sees AWS's error (after its 3 attempts in all)
    with pytest.raises(botocore.exceptions.ClientError) as raised:
        send(runtime)
    assert raised.value.response["Error"]["Code"] == "InternalError"
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500
    assert rule.injected == 3

    # When disarmed, Then the call succeeds again
    runtime.faults.disarm(rule)
    send(runtime)


def test_a_fault_limited_to_a_number_of_requests_then_lets_them_through(runtime: LocalRuntime) -> None:
    # Given a fault for one request only, When the client calls (botocore retries), Then the retry succeeds
    rule = runtime.faults.arm("sns", "Publish", error_code="Throttling", http_status=400, times=1)
    runtime.client("sns").publish(TopicArn=runtime.outputs["TopicArn"], Message="after one throttle")
    assert rule.injected == 1
    assert runtime.faults.wait_for_injections(rule, 1, timeout_s=0)


def _free(port: int) -> bool:
    """Whether a new server could listen on the port (closed connections may linger in TIME_WAIT: allowed)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
            probe.listen()
        except OSError:
            return False
        return True


def test_shutdown_stops_every_thread_and_frees_every_port(tmp_path: Path) -> None:
    # Given a runtime with its background poller, HTTP API and AWS endpoint, used once
    before = set(threading.enumerate())
    runtime = LocalRuntime(options(write_template(tmp_path, template()), background=True))
    runtime.start()
    call(runtime, "POST", "/items", {"id": "s-1"})
    assert runtime.wait_until_idle(timeout_s=30)
    ports = [int(runtime.endpoint_url.rsplit(":", 1)[1]), int(str(runtime.api_url).rsplit(":", 1)[1])]

    # When it stops
    runtime.stop()

    # Then no thread it started is left and both ports can be bound again
    leftover = [t for t in threading.enumerate() if t not in before]
    for thread in leftover:
        thread.join(timeout=5)  # a request thread may still be returning its last response
    assert [t.name for t in leftover if t.is_alive()] == []
    assert all(_free(port) for port in ports)


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        ({"Custom": {"Type": "Custom::Thing", "Properties": {}}}, UnsupportedResourceError, "Custom::Thing"),
        (
            {"Q": {"Type": "AWS::SQS::Queue", "Properties": {"Unheard": 1}}},
            UnsupportedResourceError,
            "Unheard",
        ),
        (
            {
                "NodeFn": {
                    "Type": "AWS::Lambda::Function",
                    "Properties": {"Handler": "index.handler", "Runtime": "nodejs20.x", "Code": {}},
                }
            },
            UnsupportedResourceError,
            "nodejs20.x",
        ),
        (
            {"T": {"Type": "AWS::DynamoDB::Table", "Properties": {"KeySchema": []}}},
            ProvisioningError,
            r"T \(AWS::DynamoDB::Table\)",
        ),
        (
            {
                "Async": {
                    "Type": "AWS::Lambda::EventInvokeConfig",
                    "Properties": {"FunctionName": {"Ref": "StreamFn"}, "Qualifier": "$LATEST"},
                }
            },
            UnsupportedResourceError,
            "only MaximumRetryAttempts 0",
        ),
    ],
    ids=["unknown-type", "unknown-property", "non-python-runtime", "service-refuses", "async-retries"],
)
def test_what_the_runtime_cannot_run_stops_start_up_loudly(
    tmp_path: Path, change: dict[str, Any], error: type[Exception], message: str
) -> None:
    # Given a template with something the runtime cannot run faithfully
    body = template()
    body["Resources"].update(change)
    before = set(threading.enumerate())

    # When the runtime starts, Then it refuses with a clear error and leaves nothing running
    with pytest.raises(error, match=message), LocalRuntime(options(write_template(tmp_path, body))):
        pass
    assert [t for t in threading.enumerate() if t not in before and t.is_alive()] == []


def test_a_runtime_started_again_after_stop_runs_each_mapping_once(tmp_path: Path) -> None:
    # Given a runtime that was started and stopped once
    runtime = LocalRuntime(options(write_template(tmp_path, template())))
    runtime.start()
    runtime.stop()

    # When it is started again and a record is written
    with runtime:
        put_items(runtime, ("r-1", "ok"))
        runtime.drain_streams()

        # Then only this start's mapping runs, and the record is delivered once
        assert len(runtime.mappings) == 1
        assert queue_bodies(runtime, runtime.outputs["DeliveredUrl"]) == ["r-1"]


def test_each_function_of_the_synthesized_app_runs_its_own_asset(synthesized: Synthesized) -> None:
    # Given the sample app as `cdk synth` writes it, each function with its own asset, run locally
    with LocalRuntime(RuntimeOptions(template_path=synthesized.template_path, background=False)) as runtime:
        assert runtime.host is not None
        api = next(spec for spec in runtime.host.functions if spec.handler == "orders_api.handler.handler")
        publisher = next(
            spec for spec in runtime.host.functions if spec.handler.startswith("outbox_publisher")
        )

        # When each is invoked (an unknown order; an empty stream batch)
        missing = runtime.invoke(api.name, http_event("GET", "/orders/4bd1b02f-0000-4000-8000-000000000000"))
        empty = runtime.invoke(publisher.name, {"Records": []})

        # Then both answered, and every module of the shipped packages each loaded came from its own asset
        assert missing.payload["statusCode"] == 404
        assert empty.payload == {"batchItemFailures": []}
        for spec in (api, publisher):
            files = runtime.host.modules_of(spec.name)
            assert {name.partition(".")[0] for name in files} >= {"outbox"}
            assert all(str(file).startswith(str(spec.code_root)) for file in files.values()), spec.name
