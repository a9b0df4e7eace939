"""outbox.xray on real botocore against moto: each AWS call a subsegment, the trace passed on to the service,
and the same documents the X-Ray SDK sends for the same invocation (the SDK is the oracle)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import boto3
import pytest
from aws_lambda_powertools import Tracer
from aws_lambda_powertools.tracing.base import BaseProvider
from botocore.client import BaseClient
from botocore.endpoint import Endpoint
from botocore.exceptions import ClientError, ParamValidationError

from outbox.errors import ConfigurationError
from outbox.xray import PROTOCOL_HEADER, Recorder
from tests.integration.outbox.xray_scenario import PARENT, ROOT

REPOSITORY = Path(__file__).resolve().parents[3]
SAMPLED = {"_X_AMZN_TRACE_ID": f"Root={ROOT};Parent={PARENT};Sampled=1;Lineage=a87bd80c:0"}


def scenario(recorder: str) -> dict[str, Any]:
    done = subprocess.run(  # noqa: S603 - this interpreter, our own scenario
        [sys.executable, "-m", "tests.integration.outbox.xray_scenario", recorder],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


_RANDOM = {"id", "start_time", "end_time"}


def comparable(documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What both must agree on: ids become the names they point at, times and random values are dropped."""
    names = {document["id"]: document["name"] for document in documents}
    shaped = []
    for document in documents:
        kept = {name: value for name, value in document.items() if name not in _RANDOM}
        kept["parent_id"] = names.get(document["parent_id"], document["parent_id"])
        kept.pop("cause", None)
        if "aws" in kept:
            kept["aws"] = {name: value for name, value in kept["aws"].items() if name != "request_id"}
        shaped.append(kept)
    return shaped


def test_an_invocation_is_recorded_as_the_x_ray_sdk_records_it() -> None:
    sdk, ours = scenario("sdk"), scenario("ours")
    assert len(ours["documents"]) == 4  # the handler, its method, and two calls

    assert [document["name"] for document in ours["documents"]] == [
        document["name"] for document in sdk["documents"]
    ]
    for theirs, mine in zip(comparable(sdk["documents"]), comparable(ours["documents"]), strict=True):
        # Where we differ from the SDK, on purpose: a 4XX answer is an error, not also a fault (X-Ray's
        # segment documents: fault is a 5XX); of the request and response parameters the SDK records, we
        # record only those that name a resource (a table, a topic, a queue).
        if theirs.get("http", {}).get("response", {}).get("status", 0) // 100 == 4:
            assert theirs.pop("fault") is True
        if "aws" in theirs:
            assert mine["aws"].items() <= theirs["aws"].items()
            assert {"operation", "region"} <= mine["aws"].keys()
            theirs["aws"] = mine["aws"]
        assert mine == theirs
    for document in ours["documents"]:
        assert document["trace_id"] == ROOT
        assert document["start_time"] <= document["end_time"]
        if document["namespace"] == "aws":
            assert document["aws"]["request_id"]

    # Each call's request names its own subsegment as the parent of what the service records.
    calls = [document["id"] for document in ours["documents"] if document["namespace"] == "aws"]
    assert ours["headers"] == [f"Root={ROOT};Parent={call};Sampled=1;Lineage=a87bd80c:0" for call in calls]
    assert len(sdk["headers"]) == len(ours["headers"])

    (failed,) = [document for document in ours["documents"] if document.get("error")]
    (exception,) = failed["cause"]["exceptions"]
    assert exception["type"] == "ResourceNotFoundException"
    assert exception["remote"] is True


def test_a_call_is_a_subsegment_of_the_work_around_it_naming_its_table_never_its_item(aws: None) -> None:
    sent: list[bytes] = []
    recorder = Recorder(emit=sent.append, environ=SAMPLED)
    recorder.patch(["botocore"])
    recorder.patch(["botocore"])  # once is enough: a second patch records no second subsegment
    try:
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        dynamodb.create_table(
            TableName="orders",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        sent.clear()
        with recorder.in_subsegment("## handler"):
            dynamodb.put_item(TableName="orders", Item={"pk": {"S": "secret-order-id"}})
            dynamodb.batch_get_item(RequestItems={"orders": {"Keys": [{"pk": {"S": "secret-order-id"}}]}})
    finally:
        recorder.unpatch()
    put, batch, handler = (json.loads(datagram[len(PROTOCOL_HEADER) :]) for datagram in sent)
    assert put["name"] == batch["name"] == "dynamodb"
    assert put["parent_id"] == batch["parent_id"] == handler["id"]
    assert put["aws"] | {"request_id": "-"} == {
        "operation": "PutItem",
        "region": "us-east-1",
        "table_name": "orders",
        "request_id": "-",
    }
    assert batch["aws"]["table_names"] == ["orders"]
    assert put["http"] == {"response": {"status": 200}}
    assert not {"error", "fault", "throttle", "cause"} & put.keys()
    assert b"secret-order-id" not in b"".join(sent)


def test_a_call_failing_before_an_answer_is_a_fault_of_our_own(aws: None) -> None:
    sent: list[bytes] = []
    recorder = Recorder(emit=sent.append, environ=SAMPLED)
    recorder.patch(["botocore"])
    try:
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        with pytest.raises(ParamValidationError):
            dynamodb.get_item(TableName="orders")  # no Key: botocore refuses it before sending
        with pytest.raises(ClientError):
            dynamodb.get_item(TableName="missing", Key={"pk": {"S": "a"}})
    finally:
        recorder.unpatch()
    refused, missing = (json.loads(datagram[len(PROTOCOL_HEADER) :]) for datagram in sent)
    assert refused["fault"] is True
    assert "http" not in refused
    assert refused["cause"]["exceptions"][0]["type"] == "ParamValidationError"
    assert refused["cause"]["exceptions"][0]["remote"] is False
    assert missing["error"] is True
    assert "fault" not in missing
    assert missing["http"] == {"response": {"status": 400}}
    assert missing["cause"]["exceptions"][0]["remote"] is True
    assert recorder.current() is None


def test_an_unsampled_invocation_calls_aws_untouched(aws: None) -> None:
    sent: list[bytes] = []
    headers: list[Any] = []
    recorder = Recorder(
        emit=sent.append, environ={"_X_AMZN_TRACE_ID": f"Root={ROOT};Parent={PARENT};Sampled=0"}
    )
    recorder.patch(["botocore"])
    try:
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        dynamodb.meta.events.register("before-send", lambda request, **_: headers.append(request.headers))
        dynamodb.list_tables()
    finally:
        recorder.unpatch()
    assert sent == []
    assert "X-Amzn-Trace-Id" not in headers[0]  # off Lambda botocore adds none; we added none either


def test_unpatching_restores_botocore() -> None:
    make_api_call, prepare_request = BaseClient._make_api_call, Endpoint.prepare_request
    recorder = Recorder(emit=lambda datagram: None, environ=SAMPLED)
    recorder.patch(["botocore"])
    assert BaseClient._make_api_call is not make_api_call
    recorder.unpatch()
    assert (BaseClient._make_api_call, Endpoint.prepare_request) == (make_api_call, prepare_request)
    with pytest.raises(ConfigurationError):
        recorder.patch(["sqlite3"])
    assert BaseClient._make_api_call is make_api_call


def test_no_exception_text_is_recorded_as_it_may_quote_the_request(
    aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[bytes] = []
    recorder = Recorder(emit=sent.append, environ=SAMPLED)
    monkeypatch.setattr(Tracer, "_config", dict(Tracer._default_config))  # Powertools' shared config
    tracer = Tracer(service="test", disabled=False, auto_patch=False, provider=cast(BaseProvider, recorder))
    recorder.patch(["botocore"])
    dynamodb = boto3.client("dynamodb", region_name="us-east-1")

    @tracer.capture_method  # and its error recorded as metadata, Powertools' default
    def put(value: Any) -> None:
        dynamodb.put_item(TableName="orders", Item={"pk": {"S": value}})

    @tracer.capture_method
    def get() -> None:
        dynamodb.get_item(TableName="missing", Key={"pk": {"S": "secret-order-id"}})

    try:
        with pytest.raises(ParamValidationError, match="secret-order-id"):  # botocore quotes the value
            put(b"secret-order-id")
        with pytest.raises(ClientError):
            get()
    finally:
        recorder.unpatch()
    documents = [json.loads(datagram[len(PROTOCOL_HEADER) :]) for datagram in sent]
    assert b"secret-order-id" not in b"".join(sent)
    refused, put_doc, missing, get_doc = documents
    assert refused["cause"]["exceptions"][0]["type"] == put_doc["cause"]["exceptions"][0]["type"]
    assert list(put_doc["metadata"]["test"].values()) == ["ParamValidationError"]
    assert missing["cause"]["exceptions"][0]["message"] == "ResourceNotFoundException"
    assert list(get_doc["metadata"]["test"].values()) == ["ResourceNotFoundException"]
