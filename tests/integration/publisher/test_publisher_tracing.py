"""outbox_tracing on real botocore against moto, as on Lambda: what a sampled invocation sends to
X-Ray when tracing is on, and that nothing is sent, nor the X-Ray SDK loaded, when it is off."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.publisher.tracing_scenario import PARENT, ROOT, SECRET

REPOSITORY = Path(__file__).resolve().parents[3]


def scenario(mode: str) -> dict[str, Any]:
    done = subprocess.run(  # noqa: S603 - this interpreter, our own scenario
        [sys.executable, "-m", "tests.integration.publisher.tracing_scenario", mode],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.fixture(scope="module")
def traced() -> dict[str, Any]:
    return scenario("on")


def test_the_handler_its_methods_and_each_aws_call_are_subsegments_of_lambdas_segment(
    traced: dict[str, Any],
) -> None:
    documents = {document["id"]: document for document in traced["documents"]}
    (handler,) = [document for document in documents.values() if document["name"] == "## handler"]
    assert handler["parent_id"] == PARENT
    assert handler["annotations"] == {"ColdStart": True, "Service": "scenario"}
    assert all(document["trace_id"] == ROOT for document in documents.values())
    calls = [document for document in documents.values() if document["namespace"] == "aws"]
    assert [(call["name"], call["aws"]["operation"]) for call in calls] == [
        ("dynamodb", "ListTables"),
        ("dynamodb", "GetItem"),
        ("dynamodb", "PutItem"),
    ]
    publish = documents[calls[0]["parent_id"]]
    assert publish["name"].endswith("publish")
    assert publish["parent_id"] == handler["id"]
    assert publish["annotations"] == {"destination": "sns"}
    assert publish["metadata"] == {"scenario": {"event_ids": ["e-1", "e-2"]}}
    # Each request sent names its own subsegment as the parent of what the service records.
    sent = [call["id"] for call in calls if "http" in call]
    assert traced["headers"] == [f"Root={ROOT};Parent={call};Sampled=1;Lineage=a87bd80c:0" for call in sent]


def test_an_exception_is_recorded_by_its_type_and_an_aws_error_by_its_code_never_their_text(
    traced: dict[str, Any],
) -> None:
    assert SECRET not in traced["raw"]
    by_name = {document["name"].rpartition(".")[2]: document for document in traced["documents"]}
    (parse_error,) = by_name["parse"]["cause"]["exceptions"]
    assert parse_error["type"] == "ValueError"
    assert "message" not in parse_error
    assert list(by_name["parse"]["metadata"]["scenario"].values()) == ["ValueError"]
    (missing,) = [document for document in traced["documents"] if document.get("error")]
    assert missing["http"] == {"response": {"status": 400}}
    (error,) = missing["cause"]["exceptions"]
    assert error["message"] == "ResourceNotFoundException"
    assert error["remote"] is True


def test_with_tracing_off_nothing_is_sent_and_the_x_ray_sdk_is_never_loaded() -> None:
    untraced = scenario("off")
    assert untraced["documents"] == []
    assert not untraced["sdk_imported"]  # its emitter opens a UDP socket at import
    # botocore's own header on Lambda, naming Lambda's segment: no subsegment was opened for the call.
    assert untraced["headers"] == [f"Root={ROOT};Parent={PARENT};Sampled=1;Lineage=a87bd80c:0"] * 2
