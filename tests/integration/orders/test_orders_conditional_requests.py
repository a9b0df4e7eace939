"""ETag and If-Match at the Orders API, and what each command costs DynamoDB, on moto: every answer's status
and body, both tables before and after, and the calls the repository's client made, counted with botocore's
own hooks (bench.counting, the benchmark's counter)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from bench.counting import CallCounter
from orders.repository import DynamoDBOrderRepository
from orders.service import OrderService
from orders_api import handler as api
from outbox_local.http_api import HttpApiServer, Route
from outbox_local.invocation import InvocationResult
from tests.support.aws import REGION, Tables
from tests.support.lambda_context import FakeLambdaContext
from tests.support.orders import call, create, outbox_rows, place_body, snapshot

TRANSACTION = {"dynamodb.TransactWriteItems": 1}


@pytest.fixture
def counter(tables: Tables) -> Iterator[CallCounter]:
    """The handler's service on a client of its own whose every call is counted (the tables' snapshots use
    another client: they are not counted)."""
    counted = CallCounter()
    client = counted.attach(boto3.client("dynamodb", region_name=REGION))
    api.set_service(
        OrderService(DynamoDBOrderRepository(client, orders_table=tables.orders, outbox_table=tables.outbox))
    )
    yield counted
    api.set_service(None)


def calls(counter: CallCounter) -> dict[str, int]:
    return {f"{service}.{operation}": count for (service, operation), count in counter.counts.items()}


def placed(counter: CallCounter) -> str:
    order_id: str = create()["order_id"]
    counter.reset()
    return order_id


def refused(
    dynamodb: Any, tables: Tables, counter: CallCounter, path: str, *, status: int, code: str, **kwargs: Any
) -> dict[str, Any]:
    """A refusal: its status and typed error body, and neither table changed."""
    before = snapshot(dynamodb, tables)
    counter.reset()
    actual, body, _ = call("POST", path, **kwargs)
    assert (actual, body["error"]["code"]) == (status, code), body
    assert body["error"]["message"]
    assert snapshot(dynamodb, tables) == before
    return body


# --- ETag ----------------------------------------------------------------------------------------------


def test_every_answer_with_an_order_carries_its_version_as_a_strong_etag(counter: CallCounter) -> None:
    # Given / When an order is placed, read, confirmed and read again
    _, placed_body, placed_headers = call("POST", "/orders", body=place_body())
    order_id = placed_body["order_id"]
    _, _, read_headers = call("GET", f"/orders/{order_id}")
    _, _, confirmed_headers = call("POST", f"/orders/{order_id}/confirm")
    _, reread, reread_headers = call("GET", f"/orders/{order_id}")
    # Then each ETag is the order's version, quoted
    assert [placed_headers["ETag"], read_headers["ETag"], confirmed_headers["ETag"]] == ['"1"', '"1"', '"2"']
    assert reread_headers["ETag"] == f'"{reread["version"]}"' == '"2"'


# --- If-Match: one TransactWriteItems, no read -------------------------------------------------------


def test_a_confirm_with_if_match_is_one_transaction(
    dynamodb: Any, tables: Tables, counter: CallCounter
) -> None:
    # Given a placed order, read by the client at ETag "1"
    order_id = placed(counter)
    before = {item["pk"]["S"]: item for item in snapshot(dynamodb, tables)["orders"]}[f"ORDER#{order_id}"]

    # When it is confirmed with If-Match: "1"
    status, body, headers = call("POST", f"/orders/{order_id}/confirm", headers={"If-Match": '"1"'})

    # Then one DynamoDB call, and the answer holds what the command knows, with the new ETag
    assert calls(counter) == TRANSACTION
    assert status == 200
    assert set(body) == {"order_id", "status", "version", "updated_at", "event_id"}
    assert (body["status"], body["version"], headers["ETag"]) == ("CONFIRMED", 2, '"2"')
    # And the order changed only in its status, version, seq and time; its lines and customer are kept
    _, stored, _ = call("GET", f"/orders/{order_id}")
    assert (stored["status"], stored["version"], stored["updated_at"]) == ("CONFIRMED", 2, body["updated_at"])
    item = dynamodb.get_item(TableName=tables.orders, Key={"pk": {"S": f"ORDER#{order_id}"}})["Item"]
    assert {
        name: value
        for name, value in item.items()
        if name not in {"status", "version", "last_seq", "updated_at"}
    } == {
        name: value
        for name, value in before.items()
        if name not in {"status", "version", "last_seq", "updated_at"}
    }
    assert item["last_seq"] == {"N": "2"}
    # And the event is exactly what the read path writes
    row = next(row for row in outbox_rows(dynamodb, tables, order_id) if row["seq"] == {"N": "2"})
    assert row["event_id"]["S"] == body["event_id"]
    assert row["event_type"]["S"] == "OrderConfirmed"
    assert json.loads(row["payload"]["S"]) == {
        "order_id": order_id,
        "previous_status": "PLACED",
        "status": "CONFIRMED",
        "version": 2,
    }


@pytest.mark.parametrize("confirm_first", [False, True])
def test_a_cancel_with_if_match_is_one_transaction_and_names_the_status_it_left(
    dynamodb: Any, tables: Tables, counter: CallCounter, confirm_first: bool
) -> None:
    # Given a placed (version 1) or confirmed (version 2) order
    order_id = placed(counter)
    if confirm_first:
        call("POST", f"/orders/{order_id}/confirm")
        counter.reset()
    version = 2 if confirm_first else 1
    # When it is cancelled with its ETag
    status, body, _ = call("POST", f"/orders/{order_id}/cancel", headers={"If-Match": f'"{version}"'})
    # Then one call, and the event says which status it left
    assert calls(counter) == TRANSACTION
    assert (status, body["status"], body["version"]) == (200, "CANCELLED", version + 1)
    row = next(
        row for row in outbox_rows(dynamodb, tables, order_id) if row["seq"] == {"N": str(version + 1)}
    )
    assert json.loads(row["payload"]["S"])["previous_status"] == ("CONFIRMED" if confirm_first else "PLACED")


def test_a_stale_if_match_is_412_in_one_call_and_writes_nothing(
    dynamodb: Any, tables: Tables, counter: CallCounter
) -> None:
    # Given an order confirmed since the client read it at "1"
    order_id = placed(counter)
    call("POST", f"/orders/{order_id}/confirm")
    # When the client cancels with If-Match: "1" / Then 412 precondition_failed, nothing written
    body = refused(
        dynamodb,
        tables,
        counter,
        f"/orders/{order_id}/cancel",
        status=412,
        code="precondition_failed",
        headers={"If-Match": '"1"'},
    )
    assert "field" not in body["error"]
    # And the refused transaction said which version is stored: nothing read
    assert calls(counter) == TRANSACTION


def test_a_stale_if_match_with_an_unused_key_reads_no_idempotency_record(
    dynamodb: Any, tables: Tables, counter: CallCounter
) -> None:
    # Given an order confirmed since "1"
    order_id = placed(counter)
    call("POST", f"/orders/{order_id}/confirm")
    # When a cancel with If-Match "1" and a fresh key is refused: on the order's entry, not the key's
    refused(
        dynamodb,
        tables,
        counter,
        f"/orders/{order_id}/cancel",
        status=412,
        code="precondition_failed",
        headers={"If-Match": '"1"', "Idempotency-Key": "fresh-1"},
    )
    # Then the transaction only: the key's entry passed, so there is no stored answer to read
    assert calls(counter) == TRANSACTION


@pytest.mark.parametrize(
    "header",
    [
        'W/"1"',  # a weak tag never matches
        '"abc"',  # never issued
        '"2"',  # a version the order is not at (yet)
    ],
)
def test_if_match_naming_no_current_version_is_412(
    dynamodb: Any, tables: Tables, counter: CallCounter, header: str
) -> None:
    order_id = placed(counter)
    path = f"/orders/{order_id}/confirm"
    refused(
        dynamodb, tables, counter, path, status=412, code="precondition_failed", headers={"If-Match": header}
    )


def test_at_its_version_a_cancelled_order_is_still_an_invalid_transition(
    dynamodb: Any, tables: Tables, counter: CallCounter
) -> None:
    # Given an order cancelled at version 2
    order_id = placed(counter)
    call("POST", f"/orders/{order_id}/cancel")
    # When it is cancelled again with its current ETag / Then 409 invalid_transition, as without If-Match
    refused(
        dynamodb,
        tables,
        counter,
        f"/orders/{order_id}/cancel",
        status=409,
        code="invalid_transition",
        headers={"If-Match": '"2"'},
    )
    # And one call: the refused transaction returned the order as stored
    assert calls(counter) == TRANSACTION


def test_if_match_on_an_unknown_order_is_404(dynamodb: Any, tables: Tables, counter: CallCounter) -> None:
    refused(
        dynamodb,
        tables,
        counter,
        "/orders/nope/confirm",
        status=404,
        code="order_not_found",
        headers={"If-Match": '"1"'},
    )


@pytest.mark.parametrize("header", ["1", '"1', "W/1", '"1",', '*, "1"', '"a b"', "", '"' + "9" * 1100 + '"'])
def test_a_malformed_if_match_is_400_on_the_header_before_any_call(
    dynamodb: Any, tables: Tables, counter: CallCounter, header: str
) -> None:
    order_id = placed(counter)
    body = refused(
        dynamodb,
        tables,
        counter,
        f"/orders/{order_id}/confirm",
        status=400,
        code="validation_error",
        headers={"If-Match": header},
    )
    assert body["error"]["field"] == "If-Match"
    assert calls(counter) == {}


@pytest.mark.parametrize("header", ["*", '"9", "1"'])
def test_a_wildcard_or_a_list_reads_then_writes_and_answers_the_whole_order(
    counter: CallCounter, header: str
) -> None:
    order_id = placed(counter)
    status, body, headers = call("POST", f"/orders/{order_id}/confirm", headers={"If-Match": header})
    assert (status, body["status"], body["total"], headers["ETag"]) == (200, "CONFIRMED", "19.98", '"2"')
    assert calls(counter) == {"dynamodb.GetItem": 1, "dynamodb.TransactWriteItems": 1}


def test_if_match_is_judged_before_expected_version(
    dynamodb: Any, tables: Tables, counter: CallCounter
) -> None:
    order_id = placed(counter)
    path = f"/orders/{order_id}/confirm"
    refused(
        dynamodb,
        tables,
        counter,
        path,
        status=412,
        code="precondition_failed",
        headers={"If-Match": '"2"'},
        body={"expected_version": 1},
    )
    refused(
        dynamodb,
        tables,
        counter,
        path,
        status=409,
        code="version_conflict",
        headers={"If-Match": '"1"'},
        body={"expected_version": 2},
    )


def test_without_if_match_a_confirm_still_reads_then_writes(counter: CallCounter) -> None:
    order_id = placed(counter)
    status, body, _ = call("POST", f"/orders/{order_id}/confirm")
    assert (status, body["total"]) == (200, "19.98")
    assert calls(counter) == {"dynamodb.GetItem": 1, "dynamodb.TransactWriteItems": 1}


# --- Idempotency-Key: in the transaction; read only when a replay -----------------------------------------


def test_a_key_adds_no_call_and_its_replay_is_answered_from_the_refused_transaction(
    dynamodb: Any, tables: Tables, counter: CallCounter
) -> None:
    # Given an order placed with a key: one call
    status, first, _ = call("POST", "/orders", body=place_body(), headers={"Idempotency-Key": "place-1"})
    assert status == 201
    assert calls(counter) == TRANSACTION
    before = snapshot(dynamodb, tables)
    counter.reset()
    # When it is replayed
    status, again, headers = call(
        "POST", "/orders", body=place_body(), headers={"Idempotency-Key": "place-1"}
    )
    # Then the original answer, from the transaction cancelled on the record (its item came back): one call
    assert (status, again, headers["Idempotent-Replayed"]) == (201, first, "true")
    assert calls(counter) == TRANSACTION
    assert snapshot(dynamodb, tables) == before


def test_a_conditional_confirm_with_a_key_is_one_call_and_so_is_its_replay(
    dynamodb: Any, tables: Tables, counter: CallCounter
) -> None:
    order_id = placed(counter)
    headers = {"If-Match": '"1"', "Idempotency-Key": "confirm-1"}
    status, first, _ = call("POST", f"/orders/{order_id}/confirm", headers=headers)
    assert (status, calls(counter)) == (200, TRANSACTION)
    before = snapshot(dynamodb, tables)
    counter.reset()
    status, again, replay_headers = call("POST", f"/orders/{order_id}/confirm", headers=headers)
    assert (status, again, replay_headers["Idempotent-Replayed"]) == (200, first, "true")
    assert calls(counter) == TRANSACTION
    assert snapshot(dynamodb, tables) == before


def test_a_replayed_confirm_without_if_match_answers_after_reading_its_record(
    dynamodb: Any, tables: Tables, counter: CallCounter
) -> None:
    # Given a confirm with a key: the order's read and the transaction (the key adds nothing)
    order_id = placed(counter)
    status, first, _ = call("POST", f"/orders/{order_id}/confirm", headers={"Idempotency-Key": "confirm-2"})
    assert (status, calls(counter)) == (200, {"dynamodb.GetItem": 1, "dynamodb.TransactWriteItems": 1})
    before = snapshot(dynamodb, tables)
    counter.reset()
    # When it is retried: the order is CONFIRMED, which would be a 409, so the key's record is read
    status, again, headers = call(
        "POST", f"/orders/{order_id}/confirm", headers={"Idempotency-Key": "confirm-2"}
    )
    assert (status, again, headers["Idempotent-Replayed"]) == (200, first, "true")
    assert calls(counter) == {"dynamodb.GetItem": 2}
    assert snapshot(dynamodb, tables) == before


@pytest.mark.parametrize(
    "retry",
    [
        {"If-Match": '"2"'},  # the same key with another precondition
        {},  # the same key without it
    ],
)
def test_a_key_used_with_if_match_conflicts_with_another_request(
    dynamodb: Any, tables: Tables, counter: CallCounter, retry: dict[str, str]
) -> None:
    order_id = placed(counter)
    call("POST", f"/orders/{order_id}/confirm", headers={"If-Match": '"1"', "Idempotency-Key": "confirm-3"})
    refused(
        dynamodb,
        tables,
        counter,
        f"/orders/{order_id}/confirm",
        status=409,
        code="idempotency_key_reused",
        headers={**retry, "Idempotency-Key": "confirm-3"},
    )


def test_a_place_key_reused_on_a_conditional_cancel_conflicts(
    dynamodb: Any, tables: Tables, counter: CallCounter
) -> None:
    create(headers={"Idempotency-Key": "shared"})
    order_id = placed(counter)
    refused(
        dynamodb,
        tables,
        counter,
        f"/orders/{order_id}/cancel",
        status=409,
        code="idempotency_key_reused",
        headers={"If-Match": '"1"', "Idempotency-Key": "shared"},
    )


# --- Through the local HTTP API: the headers both ways, over a socket ----------------------------------


def test_the_local_http_api_passes_etag_and_if_match_through(counter: CallCounter) -> None:
    # Given the local runtime's HTTP API in front of the handler
    def invoke(_arn: str, event: dict[str, Any]) -> InvocationResult:
        return InvocationResult(payload=api.handler(event, FakeLambdaContext()))

    server = HttpApiServer("api", invoke)
    for method, path in (("POST", "/orders"), ("GET", "/orders/{id}"), ("POST", "/orders/{id}/cancel")):
        server.add_route(Route(f"{method} {path}", "arn:aws:lambda:us-east-1:123456789012:function:api"))
    server.start()
    try:
        order_id = placed(counter)

        def send(method: str, path: str, headers: dict[str, str]) -> tuple[int, dict[str, str]]:
            request = urllib.request.Request(  # noqa: S310 - our own local server
                server.url + path, method=method, headers=headers, data=b"" if method == "POST" else None
            )
            try:
                with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - our own local server
                    return response.status, dict(response.headers)
            except urllib.error.HTTPError as error:
                return error.code, dict(error.headers)

        # When the order is read, then cancelled with its ETag, then again with the stale one
        _, read = send("GET", f"/orders/{order_id}", {})
        cancelled, cancel_headers = send("POST", f"/orders/{order_id}/cancel", {"If-Match": read["ETag"]})
        stale, _ = send("POST", f"/orders/{order_id}/cancel", {"If-Match": read["ETag"]})
    finally:
        server.stop()
    # Then the ETag came out, If-Match went in, and the second cancel was refused on it
    assert read["ETag"] == '"1"'
    assert (cancelled, cancel_headers["ETag"]) == (200, '"2"')
    assert stale == 412
