"""Unit tests of the runtime's pure parts: template resolution, the HTTP API mapping, the function host,
schedules and the fault injector's request matching. No server, no network.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from outbox_local.errors import (
    FunctionNotFoundError,
    TemplateError,
    UnresolvableReferenceError,
    UnsupportedResourceError,
)
from outbox_local.faults import FaultInjector
from outbox_local.functions import FunctionHost, FunctionSpec
from outbox_local.http_api import Route, to_http_response
from outbox_local.invocation import InvocationResult
from outbox_local.provisioning import Provisioner
from outbox_local.schedules import ScheduleRunner, rate_seconds
from outbox_local.template import ResolvedResource, Resolver, Template, physical_name
from tests.support.clock import FakeClock

BODY: dict[str, Any] = {
    "Parameters": {
        "Env": {"Type": "String", "Default": "dev"},
        "Ssm": {"Type": "AWS::SSM::Parameter::Value<String>", "Default": "/p"},
    },
    "Conditions": {"IsDev": {"Fn::Equals": [{"Ref": "Env"}, "dev"]}},
    "Mappings": {"Sizes": {"dev": {"Memory": 128}}},
    "Resources": {
        "Table": {"Type": "AWS::DynamoDB::Table", "Properties": {}},
        "Fn": {
            "Type": "AWS::Lambda::Function",
            "DependsOn": "Table",
            "Properties": {"Env": {"Fn::GetAtt": ["Queue", "Arn"]}},
        },
        "Queue": {"Type": "AWS::SQS::Queue", "Properties": {"Name": {"Fn::Sub": "${Table}-q"}}},
    },
}


def resolver() -> Resolver:
    resolved = Resolver(Template.from_body(BODY), region="eu-west-1", stack_name="S")
    resolved.resources["Table"] = ResolvedResource(ref="t-name", attributes={"Arn": "arn:t"})
    return resolved


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ({"Ref": "Table"}, "t-name"),
        ({"Fn::GetAtt": ["Table", "Arn"]}, "arn:t"),
        ({"Fn::GetAtt": "Table.Arn"}, "arn:t"),
        ({"Fn::Join": ["-", ["a", {"Ref": "AWS::Region"}]]}, "a-eu-west-1"),
        ({"Fn::Sub": "${AWS::StackName}/${Table}/${Table.Arn}/${!Literal}"}, "S/t-name/arn:t/${Literal}"),
        ({"Fn::Sub": ["${X}-${AWS::AccountId}", {"X": "x"}]}, "x-123456789012"),
        ({"Fn::Select": [1, {"Fn::Split": [",", "a,b,c"]}]}, "b"),
        ({"Fn::If": ["IsDev", "yes", "no"]}, "yes"),
        ({"Fn::If": ["IsDev", {"Ref": "AWS::NoValue"}, "no"]}, None),
        ({"Fn::FindInMap": ["Sizes", {"Ref": "Env"}, "Memory"]}, 128),
        ({"Ref": "Ssm"}, "local-ssm-value:/p"),
        ([{"Ref": "AWS::NoValue"}, 1], [1]),
        ({"a": {"Ref": "AWS::NoValue"}, "b": 2}, {"b": 2}),
        ({"Fn::Not": [{"Fn::Or": [False, {"Fn::And": [True, True]}]}]}, False),
    ],
)
def test_intrinsic_functions_resolve_against_local_resources(expression: object, expected: object) -> None:
    assert resolver().resolve(expression) == expected


@pytest.mark.parametrize(
    "expression",
    [
        {"Ref": "Missing"},
        {"Fn::GetAtt": ["Missing", "Arn"]},
        {"Fn::GetAtt": ["Table", "StreamArn"]},
        {"Fn::ImportValue": "x"},
        {"Fn::If": ["NoSuchCondition", 1, 2]},
        {"Fn::FindInMap": ["Sizes", "prod", "Memory"]},
    ],
)
def test_what_cannot_be_resolved_raises(expression: object) -> None:
    with pytest.raises(UnresolvableReferenceError):
        resolver().resolve(expression)


def test_a_parameter_without_default_or_value_is_an_error() -> None:
    with pytest.raises(UnresolvableReferenceError):
        Resolver(
            Template.from_body({"Parameters": {"P": {"Type": "String"}}, "Resources": {}}),
            region="r",
            stack_name="s",
        )


def test_resources_come_in_dependency_order_and_cycles_are_refused() -> None:
    # Given Fn depends on Table (DependsOn) and Queue (GetAtt), Queue on Table (Sub)
    order = [r.logical_id for r in Template.from_body(BODY).in_dependency_order()]
    assert order.index("Table") < order.index("Queue") < order.index("Fn")
    # Given a cycle, Then it is refused
    cyclic = {"Resources": {"A": {"Type": "T", "DependsOn": "B"}, "B": {"Type": "T", "DependsOn": "A"}}}
    with pytest.raises(TemplateError, match="circular"):
        Template.from_body(cyclic).in_dependency_order()
    with pytest.raises(TemplateError, match="unknown resource"):
        Template.from_body({"Resources": {"A": {"Type": "T", "DependsOn": "Z"}}}).in_dependency_order()


@pytest.mark.parametrize("body", [[], {"Resources": []}, {"Resources": {"A": {"NoType": 1}}}])
def test_a_body_that_is_not_a_template_is_refused(body: object) -> None:
    with pytest.raises(TemplateError):
        _ = Template.from_body(body).resources


def test_loading_reports_missing_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(TemplateError, match="make synth"):
        Template.load(tmp_path / "none.json")
    broken = tmp_path / "broken.json"
    broken.write_text("{", encoding="utf-8")
    with pytest.raises(TemplateError, match="not JSON"):
        Template.load(broken)


def test_generated_names_are_stable_and_within_limits() -> None:
    name = physical_name("OutboxStack", "A" * 100, 80, suffix=".fifo")
    assert name == physical_name("OutboxStack", "A" * 100, 80, suffix=".fifo")
    assert len(name) <= 80
    assert name.endswith(".fifo")


# --- HTTP API ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("route_key", "method", "path", "expected"),
    [
        ("GET /orders/{id}", "GET", "/orders/a%20b", {"id": "a b"}),
        ("GET /orders/{id}", "POST", "/orders/1", None),
        ("ANY /files/{proxy+}", "PUT", "/files/a/b", {"proxy": "a/b"}),
        ("POST /orders", "POST", "/orders", {}),
        ("POST /orders", "POST", "/orders/1", None),
        ("$default", "GET", "/anything", {}),
    ],
)
def test_routes_match_like_api_gateway(route_key: str, method: str, path: str, expected: object) -> None:
    assert Route(route_key, "arn").match(method, path) == expected


def test_exact_routes_win_over_variables_and_default_comes_last() -> None:
    routes = sorted(
        [Route("$default", "a"), Route("GET /orders/{id}", "b"), Route("GET /orders/new", "c")],
        key=lambda r: r.specificity,
    )
    assert [r.route_key for r in routes] == ["GET /orders/new", "GET /orders/{id}", "$default"]


@pytest.mark.parametrize(
    ("result", "status", "body", "content_type"),
    [
        (InvocationResult(payload={"statusCode": 204}), 204, b"", "application/json"),
        (
            InvocationResult(
                payload={"statusCode": 200, "body": "hi", "headers": {"content-type": "text/plain"}}
            ),
            200,
            b"hi",
            "text/plain",
        ),
        (
            InvocationResult(payload={"statusCode": 200, "body": "aGk=", "isBase64Encoded": True}),
            200,
            b"hi",
            None,
        ),
        (InvocationResult(payload={"ok": True}), 200, b'{"ok": true}', "application/json"),
        (InvocationResult(payload="plain"), 200, b"plain", "application/json"),
        (InvocationResult(payload={"statusCode": "x"}), 500, b'{"message": "Internal Server Error"}', None),
        (
            InvocationResult(error_type="E", error_message="m"),
            500,
            b'{"message": "Internal Server Error"}',
            None,
        ),
    ],
)
def test_lambda_responses_map_to_http_by_the_payload_v2_rules(
    result: InvocationResult, status: int, body: bytes, content_type: str | None
) -> None:
    response = to_http_response(result)
    assert (response.status, response.body) == (status, body)
    if content_type:
        assert (
            dict(response.headers).get("Content-Type") or dict(response.headers).get("content-type")
        ) == content_type


# --- function host ---------------------------------------------------------------------------------------


def spec(handler: Any, timeout_s: float = 3.0) -> FunctionSpec:
    return FunctionSpec(
        "Fn", "fn", "arn:aws:lambda:r:1:function:fn", "m.h", None, timeout_s, handler_override=handler
    )


def test_the_host_reports_handler_errors_timeouts_and_unserializable_results_as_lambda_does() -> None:
    clock = FakeClock(0)

    def slow(event: Any, context: Any) -> dict[str, int]:
        clock.advance(3.5)
        return {"ok": 1}

    host = FunctionHost({}, clock=clock.seconds)
    host.register(spec(slow, timeout_s=3))
    # A handler that outlives its timeout failed, even though it returned
    assert host.invoke("fn", {}).error_type == "Sandbox.Timedout"

    host = FunctionHost({})
    host.register(spec(lambda event, context: 1 / 0))
    assert host.invoke("fn", {}).error_type == "ZeroDivisionError"
    host = FunctionHost({})
    host.register(spec(lambda event, context: {1, 2}))
    assert host.invoke("fn", {}).error_type == "Runtime.MarshalError"
    host = FunctionHost({})
    host.register(FunctionSpec("Fn", "fn", "arn:fn", "no_such_module_here.h", None))
    assert host.invoke("arn:fn:live", {}).error_type == "Runtime.ImportModuleError"
    with pytest.raises(FunctionNotFoundError):
        host.invoke("other", {})


def test_the_context_counts_down_the_remaining_time() -> None:
    seen: list[int] = []
    clock = FakeClock(100)
    host = FunctionHost({}, clock=clock.seconds)

    def handler(event: Any, context: Any) -> None:
        clock.advance(1.25)
        seen.append(context.get_remaining_time_in_millis())
        assert context.function_name == "fn"
        assert context.aws_request_id

    host.register(spec(handler, timeout_s=3))
    assert not host.invoke("fn", {}).failed
    assert seen == [1750]


# --- schedules and faults --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "seconds"), [("rate(1 minute)", 60), ("rate(5 minutes)", 300), ("rate(2 hours)", 7200)]
)
def test_rate_expressions(expression: str, seconds: int) -> None:
    assert rate_seconds(expression) == seconds


@pytest.mark.parametrize("expression", ["cron(0 12 * * ? *)", "rate(1 minutes)", "rate(5 minute)", "rate(x)"])
def test_unsupported_or_invalid_schedules_are_refused(expression: str) -> None:
    with pytest.raises(UnsupportedResourceError):
        rate_seconds(expression)


def test_schedules_fire_on_their_interval_divided_by_the_speedup() -> None:
    # Given rate(1 minute) sped up 60 times, on a fake clock
    clock = FakeClock(0)
    fired: list[tuple[str, Any]] = []

    def invoke(arn: str, event: Any) -> InvocationResult:
        fired.append((arn, event))
        return InvocationResult()

    runner = ScheduleRunner(
        invoke,
        clock.seconds,
        region="r",
        speedup=60,
    )
    runner.add("rule", "arn:rule", "rate(1 minute)", "arn:fn")
    # When less than a second passed, Then nothing fired; after it, one scheduled event did
    clock.advance(0.9)
    assert runner.tick() == 0
    clock.advance(0.1)
    assert runner.tick() == 1
    assert fired[0][1]["detail-type"] == "Scheduled Event"
    assert fired[0][1]["resources"] == ["arn:rule"]
    assert runner.seconds_until_next() == 1.0
    with pytest.raises(ValueError, match="positive"):
        ScheduleRunner(lambda a, e: InvocationResult(), lambda: 0.0, region="r", speedup=0)


def test_the_fault_injector_matches_service_and_operation_and_leaves_the_body_readable() -> None:
    # Given a fault on SNS Publish
    faults = FaultInjector()
    rule = faults.arm("sns", "Publish", error_code="Throttling", http_status=400, times=1)
    seen: list[bytes] = []

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        seen.append(environ["wsgi.input"].read())
        start_response("200 OK", [])
        return [b"ok"]

    wrapped = faults.wrap(app)
    body = b"Action=Publish&Message=x"
    environ = {
        "HTTP_AUTHORIZATION": "AWS4-HMAC-SHA256 Credential=AK/20260101/us-east-1/sns/aws4_request, ...",
        "CONTENT_LENGTH": str(len(body)),
    }
    statuses: list[str] = []

    # When two requests arrive, Then the first gets the AWS error document and the second reaches moto intact
    first = b"".join(wrapped({**environ, "wsgi.input": io.BytesIO(body)}, lambda s, h: statuses.append(s)))
    wrapped({**environ, "wsgi.input": io.BytesIO(body)}, lambda s, h: statuses.append(s))
    assert b"<Code>Throttling</Code>" in first
    assert statuses == ["400 Injected", "200 OK"]
    assert seen == [body]
    assert rule.injected == 1
    json_request = {
        "HTTP_X_AMZ_TARGET": "AWSEvents.PutEvents",
        "HTTP_AUTHORIZATION": "",
        "wsgi.input": io.BytesIO(),
    }
    faults.arm("", "PutEvents", error_code="InternalException", http_status=500)
    answer = json.loads(b"".join(wrapped(json_request, lambda s, h: statuses.append(s))))
    assert answer == {"__type": "InternalException", "message": "Injected fault: the service is unavailable"}
    faults.disarm()
    assert not faults.wait_for_injections(rule, 2, timeout_s=0)


# --- stream mapping provisioning ---------------------------------------------------------------------------

STREAM = "arn:aws:dynamodb:us-east-1:123456789012:table/T/stream/2026-01-01T00:00:00.000"


def provision_mapping(**properties: Any) -> Any:
    mapping = {"FunctionName": "fn", "EventSourceArn": STREAM, **properties}
    body = {"Resources": {"Mapping": {"Type": "AWS::Lambda::EventSourceMapping", "Properties": mapping}}}
    template = Template.from_body(body)

    def no_clients(service: str) -> Any:
        raise AssertionError(f"a stream mapping needs no {service} call")

    resolver = Resolver(template, region="us-east-1", stack_name="S")
    return Provisioner(template, resolver, no_clients).provision()


def test_a_valid_stream_mapping_keeps_its_starting_position_and_settings() -> None:
    # Given a mapping with AWS-valid values, When provisioned, Then its settings are what the template says
    stack = provision_mapping(StartingPosition="LATEST", BatchSize=10_000, MaximumRecordAgeInSeconds=-1)
    (mapping,) = stack.mappings
    assert mapping.starting_position == "LATEST"
    assert mapping.settings.batch_size == 10_000


def test_string_booleans_mean_what_they_say() -> None:
    # Given booleans written as CloudFormation strings ("false" is truthy to Python's bool)
    stack = provision_mapping(StartingPosition="LATEST", Enabled="false", BisectBatchOnFunctionError="true")

    # When provisioned, Then the mapping is disabled and bisects
    (mapping,) = stack.mappings
    assert mapping.enabled is False
    assert mapping.settings.bisect_batch_on_function_error is True


@pytest.mark.parametrize(
    "properties",
    [
        {},
        {"StartingPosition": "AT_TIMESTAMP"},
        {"StartingPosition": "TRIM_HORIZON", "BatchSize": 0},
        {"StartingPosition": "TRIM_HORIZON", "BatchSize": 10_001},
        {"StartingPosition": "TRIM_HORIZON", "MaximumBatchingWindowInSeconds": 301},
        {"StartingPosition": "TRIM_HORIZON", "MaximumRetryAttempts": -2},
        {"StartingPosition": "TRIM_HORIZON", "MaximumRecordAgeInSeconds": 604_801},
        {"StartingPosition": "TRIM_HORIZON", "ParallelizationFactor": 11},
        {"StartingPosition": "TRIM_HORIZON", "BatchSize": "many"},
        {"StartingPosition": "TRIM_HORIZON", "FunctionResponseTypes": ["ReportItemFailures"]},
        {"StartingPosition": "TRIM_HORIZON", "BisectBatchOnFunctionError": "maybe"},
        {"StartingPosition": "TRIM_HORIZON", "Enabled": ["false"]},
    ],
    ids=[
        "no-starting-position",
        "at-timestamp",
        "batch-size-0",
        "batch-size-over-max",
        "window-over-max",
        "retries-below-min",
        "record-age-over-max",
        "parallelization-over-max",
        "batch-size-not-a-number",
        "unknown-response-type",
        "bisect-not-a-boolean",
        "enabled-not-a-boolean",
    ],
)
def test_a_stream_mapping_aws_would_refuse_stops_start_up(properties: dict[str, Any]) -> None:
    # Given a DynamoDB stream mapping with a value AWS does not accept, When provisioned, Then it is refused
    with pytest.raises(UnsupportedResourceError, match="Mapping"):
        provision_mapping(**properties)
