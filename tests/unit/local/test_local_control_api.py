"""The runtime's controls (`/_outbox/`), called as WSGI: arming, listing and clearing faults, refusing a bad
request, and a fault that stops by itself when its time is up."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable
from typing import Any

import pytest

from outbox_local.control_api import ControlApi
from outbox_local.faults import INTERNAL_USER_AGENT, FaultInjector
from tests.support.clock import FakeClock


def moto(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    start_response("200 OK", [])
    return [b"moto"]


def request(app: Any, method: str, path: str, body: object = None) -> tuple[int, Any]:
    data = b"" if body is None else json.dumps(body).encode()
    environ: dict[str, Any] = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "CONTENT_LENGTH": str(len(data)),
        "wsgi.input": io.BytesIO(data),
    }
    status: list[str] = []
    chunks = app(environ, lambda line, _headers: status.append(line))
    text = b"".join(chunks)
    return int(status[0].split()[0]), json.loads(text) if text != b"moto" else "moto"


def test_faults_are_armed_listed_and_cleared_and_other_paths_reach_moto() -> None:
    faults = FaultInjector()
    app = ControlApi(faults, list).wrap(moto)
    assert request(app, "POST", "/_outbox/faults", {"service": "sns", "operation": "*"})[0] == 201
    status, body = request(app, "GET", "/_outbox/faults")
    assert (status, [f["service"] for f in body["faults"]]) == (200, ["sns"])
    assert request(app, "DELETE", "/_outbox/faults") == (200, {"faults": []})
    assert request(app, "GET", "/") == (200, "moto")


@pytest.mark.parametrize(
    "body",
    [
        {"service": "sns"},
        {"service": "sns", "operation": "*", "times": 0},
        {"service": "sns", "operation": "*", "duration_s": -1},
        {"service": "sns", "operation": "*", "duration_s": float("inf")},
        {"service": "sns", "operation": "*", "duration_s": float("nan")},
        {"service": "sns", "operation": "*", "duration_s": True},
        {"service": "sns", "operation": "*", "http_status": 99999},
        {"service": "sns", "operation": "*", "http_status": 200},
        {"service": "sns", "operation": "*", "times": 10**23},
        {"service": "sns", "operation": "*", "colour": "red"},
        ["sns"],
    ],
)
def test_a_bad_arm_request_is_a_400_and_arms_nothing(body: object) -> None:
    faults = FaultInjector()
    app = ControlApi(faults, list).wrap(moto)
    status, answer = request(app, "POST", "/_outbox/faults", body)
    assert status == 400
    assert answer["error"]
    assert faults.rules() == []


def test_a_fault_with_a_duration_stops_by_itself() -> None:
    clock = FakeClock(1_000)
    faults = FaultInjector(clock=clock.seconds)
    faults.arm("sns", "*", duration_s=30)
    [rule] = faults.rules()
    assert (rule["active"], rule["seconds_left"]) == (True, 30.0)
    clock.advance(30)
    [rule] = faults.rules()
    assert rule["active"] is False


def test_a_fault_never_fails_the_runtimes_own_calls() -> None:
    # Given every DynamoDB operation throttled (which includes the streams API the mappings poll)
    faults = FaultInjector()
    faults.arm("dynamodb", "*", error_code="ThrottlingException", http_status=400)
    app = faults.wrap(moto)
    signed = "AWS4-HMAC-SHA256 Credential=testing/20261201/us-east-1/dynamodb/aws4_request"

    def call(user_agent: str) -> str:
        environ = {
            "REQUEST_METHOD": "POST",
            "PATH_INFO": "/",
            "HTTP_AUTHORIZATION": signed,
            "HTTP_X_AMZ_TARGET": "DynamoDBStreams_20120810.GetRecords",
            "HTTP_USER_AGENT": user_agent,
            "wsgi.input": io.BytesIO(b""),
        }
        status: list[str] = []
        b"".join(app(environ, lambda line, _headers: status.append(line)))
        return status[0]

    # When a function's client and the runtime's own (the mapping's poller) call GetRecords
    # Then the function's is throttled, the runtime's is not: the outage reaches the functions only
    assert call("Boto3/1.44 md/Botocore#1.44").startswith("400")
    assert call(f"Boto3/1.44 md/Botocore#1.44 {INTERNAL_USER_AGENT}").startswith("200")
