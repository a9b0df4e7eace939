"""The Orders API handler, driven with API Gateway HTTP API (v2) events against moto: the happy paths,
idempotent replays and how the handler is wired. Its errors: test_orders_api_errors.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest

from orders_api import handler as api
from outbox.model import OutboxEvent
from tests.support.aws import Tables
from tests.support.orders import call, create, outbox_rows, place_body, snapshot

ROOT = Path(__file__).resolve().parents[3]
HEADER = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

# Every test runs inside moto with the deployed tables: the handler must never reach real AWS.
pytestmark = pytest.mark.usefixtures("tables")


# --- Happy paths ------------------------------------------------------------------------------


def test_post_orders_creates_the_order_and_returns_it_with_its_event_id(
    dynamodb: Any, tables: Tables
) -> None:
    # Given the contract's example request
    # When it is posted
    status, body, headers = call("POST", "/orders", body=place_body(), request_id="req-1")

    # Then 201 with the order, its total as a decimal string, and the event_id of its OrderPlaced row
    assert status == 201
    assert body["status"] == "PLACED"
    assert body["version"] == 1
    assert body["total"] == "19.98"
    assert (body["currency"], body["customer_id"]) == ("EUR", "c-1")
    assert body["items"] == [{"sku": "SKU-1", "quantity": 2, "unit_price": "9.99"}]
    assert "last_seq" not in body
    [row] = outbox_rows(dynamodb, tables, body["order_id"])
    event = OutboxEvent.from_item(row)
    assert event.event_id == body["event_id"]
    # And the API Gateway request id became the correlation id
    assert event.correlation_id == "req-1"
    assert headers["X-Correlation-Id"] == "req-1"


def test_a_valid_correlation_header_wins_and_an_invalid_one_is_ignored(dynamodb: Any, tables: Tables) -> None:
    # Given / When two orders, one with a valid X-Correlation-Id and one with an invalid one
    good = create(headers={"X-Correlation-Id": "trace-123"}, request_id="req-a")
    bad = create(headers={"X-Correlation-Id": "has spaces & more"}, request_id="req-b")
    # Then the valid header is used, the invalid one falls back to the request id
    [good_row] = outbox_rows(dynamodb, tables, good["order_id"])
    [bad_row] = outbox_rows(dynamodb, tables, bad["order_id"])
    assert good_row["correlation_id"] == {"S": "trace-123"}
    assert bad_row["correlation_id"] == {"S": "req-b"}


def test_the_event_is_saved_with_the_invocations_trace_and_the_callers_traceparent(
    dynamodb: Any, tables: Tables, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the invocation's X-Ray header, as the Lambda runtime sets it
    monkeypatch.setenv("_X_AMZN_TRACE_ID", f"{HEADER};Lineage=a87bd80c:0")
    # When one order is placed with a caller's W3C traceparent header and one with a malformed one
    traced = create(headers={"traceparent": TRACEPARENT})
    malformed = create(headers={"traceparent": "00-not-a-trace"})
    # Then the first's row holds both, the second's the X-Ray header alone: the malformed header is ignored
    [traced_row] = outbox_rows(dynamodb, tables, traced["order_id"])
    [malformed_row] = outbox_rows(dynamodb, tables, malformed["order_id"])
    assert (traced_row["trace_header"], traced_row["traceparent"]) == ({"S": HEADER}, {"S": TRACEPARENT})
    assert malformed_row["trace_header"] == {"S": HEADER}
    assert "traceparent" not in malformed_row


def test_get_confirm_cancel_walk_the_order_through_its_life(dynamodb: Any, tables: Tables) -> None:
    # Given a placed order
    order_id = create()["order_id"]

    # When it is confirmed, read, then cancelled
    confirm_status, confirmed, _ = call("POST", f"/orders/{order_id}/confirm")
    get_status, read, _ = call("GET", f"/orders/{order_id}")
    cancel_status, cancelled, _ = call("POST", f"/orders/{order_id}/cancel", body={})

    # Then each answer carries the new status and version, and each command its own event
    assert (confirm_status, confirmed["status"], confirmed["version"]) == (200, "CONFIRMED", 2)
    assert (get_status, read["status"], read["version"]) == (200, "CONFIRMED", 2)
    assert "event_id" not in read
    assert (cancel_status, cancelled["status"], cancelled["version"]) == (200, "CANCELLED", 3)
    rows = outbox_rows(dynamodb, tables, order_id)
    assert {row["event_id"]["S"] for row in rows} >= {confirmed["event_id"], cancelled["event_id"]}
    assert sorted(int(row["seq"]["N"]) for row in rows) == [1, 2, 3]


def test_placed_order_can_be_cancelled_directly() -> None:
    # Given a placed order / When it is cancelled
    order_id = create()["order_id"]
    status, body, _ = call("POST", f"/orders/{order_id}/cancel")
    # Then it is CANCELLED at version 2
    assert (status, body["status"], body["version"]) == (200, "CANCELLED", 2)


def test_base64_encoded_bodies_are_decoded() -> None:
    # Given a body API Gateway delivered base64-encoded / When it is posted
    status, body, _ = call("POST", "/orders", body=place_body(), base64_encoded=True)
    # Then it is parsed like any other
    assert (status, body["total"]) == (201, "19.98")


def test_idempotent_replay_returns_the_original_response_and_writes_nothing(
    dynamodb: Any, tables: Tables
) -> None:
    # Given an order created with an Idempotency-Key
    first = create(headers={"Idempotency-Key": "key-1"})
    before = snapshot(dynamodb, tables)

    # When the same request is sent again with the same key (keys in another order: same request)
    reordered = dict(reversed(list(place_body().items())))
    status, body, headers = call("POST", "/orders", body=reordered, headers={"Idempotency-Key": "key-1"})

    # Then the original response comes back, marked as a replay, and nothing was written
    assert (status, body) == (201, first)
    assert headers["Idempotent-Replayed"] == "true"
    assert snapshot(dynamodb, tables) == before


def test_transition_replay_with_the_same_key_returns_the_original(dynamodb: Any, tables: Tables) -> None:
    # Given an order confirmed with a key
    order_id = create()["order_id"]
    _, confirmed, _ = call("POST", f"/orders/{order_id}/confirm", headers={"Idempotency-Key": "c-1"})
    before = snapshot(dynamodb, tables)
    # When the confirm is retried with the key
    status, body, _ = call("POST", f"/orders/{order_id}/confirm", headers={"Idempotency-Key": "c-1"})
    # Then 200 with the original answer rather than 409 invalid_transition, and nothing written
    assert (status, body) == (200, confirmed)
    assert snapshot(dynamodb, tables) == before


def test_importing_the_handler_creates_no_boto3_client() -> None:
    # Given a fresh interpreter that counts boto3 client creations
    script = """
import boto3.session
created = []
original = boto3.session.Session.client
def counting(self, *args, **kwargs):
    created.append(args)
    return original(self, *args, **kwargs)
boto3.session.Session.client = counting
import orders_api.handler
print(len(created))
"""
    # When it imports the handler module (as Lambda does at cold start)
    result = subprocess.run(  # noqa: S603 - fixed interpreter and script
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={"PYTHONPATH": f"{ROOT / 'functions'}:{ROOT}", "AWS_DEFAULT_REGION": "us-east-1", "PATH": ""},
        capture_output=True,
        text=True,
        check=True,
    )
    # Then no client was created
    assert result.stdout.strip() == "0", result.stderr


def test_two_invocations_share_one_client_and_one_service(
    monkeypatch: pytest.MonkeyPatch, tables: Tables
) -> None:
    # Given a cold handler and a count of boto3 client creations
    created: list[str] = []
    original = boto3.session.Session.client

    def counting(self: Any, service_name: str, *args: Any, **kwargs: Any) -> Any:
        created.append(service_name)
        return original(self, service_name, *args, **kwargs)

    monkeypatch.setattr(boto3.session.Session, "client", counting)

    # When two requests are handled
    order_id = create()["order_id"]
    service_after_first = api.get_service()
    status, _, _ = call("GET", f"/orders/{order_id}")

    # Then one DynamoDB client and one service served both
    assert status == 200
    assert created == ["dynamodb"]
    assert api.get_service() is service_after_first
