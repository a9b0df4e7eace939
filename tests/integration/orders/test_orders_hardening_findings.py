"""Regression tests for the hardening review's findings, each named after what it found: before its fix,
each of these failed."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from outbox.errors import InvalidEventError
from outbox.model import OutboxEvent
from tests.support.aws import Tables
from tests.support.orders import call, place_body, snapshot

pytestmark = pytest.mark.usefixtures("tables")


def test_a_non_utf8_body_sent_as_binary_is_400_not_500(dynamodb: Any, tables: Tables) -> None:
    # Given a POST /orders whose body API Gateway passes base64-encoded (application/octet-stream), not UTF-8
    before = snapshot(dynamodb, tables)
    # When the API handles it
    status, body, _ = call(
        "POST", "/orders", raw_bytes=b"\xff\xfe{", headers={"content-type": "application/octet-stream"}
    )
    # Then it is a 400 on the body, and nothing was written
    assert status == 400
    assert body["error"] == {"code": "validation_error", "message": "is not UTF-8 text", "field": "body"}
    assert snapshot(dynamodb, tables) == before


@pytest.mark.parametrize(
    "price",
    ["\u0669.\u0669\u0669", "\uff19.\uff19\uff19", "1\u0660"],
    ids=["arabic-indic", "fullwidth", "mixed"],
)
def test_a_unit_price_in_non_ascii_digits_is_refused(dynamodb: Any, tables: Tables, price: str) -> None:
    # Given an order whose unit price is written in digits other than ASCII ones
    before = snapshot(dynamodb, tables)
    order = place_body(items=[{"sku": "SKU-1", "quantity": 1, "unit_price": price}])
    # When it is placed
    status, body, _ = call("POST", "/orders", body=order)
    # Then it is refused on that field (it was stored as 9.99 before), and nothing was written
    assert status == 400
    assert body["error"]["field"] == "items[0].unit_price"
    assert snapshot(dynamodb, tables) == before


@pytest.mark.parametrize(
    "occurred_at", ["\u0662\u0660\u0662\u0666-11-29T12:00:00.123Z", "2026-11-29T12:00:00.\uff11\uff12\uff13Z"]
)
def test_an_occurred_at_in_non_ascii_digits_is_refused(occurred_at: str) -> None:
    # Given an event whose timestamp uses Arabic-Indic or fullwidth digits
    # When it is built
    # Then it is refused on occurred_at, never forwarded to consumers
    with pytest.raises(InvalidEventError) as error:
        OutboxEvent(
            aggregate_type="Order",
            aggregate_id="o-1",
            seq=1,
            event_type="OrderPlaced",
            payload={},
            event_id="00000000-0000-4000-8000-000000000001",
            occurred_at=occurred_at,
        )
    assert error.value.field == "occurred_at"


def test_unknown_body_key_names_are_not_written_to_the_logs(
    dynamodb: Any, tables: Tables, function_log: Callable[[], str]
) -> None:
    # Given an order with an unknown key whose name is personal data
    order = {**place_body(), "jane.doe@example.com": "x"}
    # When it is refused
    status, body, _ = call("POST", "/orders", body=order)
    # Then the client is told which key, but the function's log never names it
    assert status == 400
    assert body["error"]["field"] == "jane.doe@example.com"
    assert "request rejected" in function_log()
    assert "jane.doe" not in function_log()


def test_a_key_with_a_lone_surrogate_is_refused_and_the_rejection_still_logged(
    dynamodb: Any, tables: Tables, function_log: Callable[[], str]
) -> None:
    # Given a body whose unknown key holds a lone surrogate (valid JSON, not encodable as UTF-8)
    raw = json.dumps(place_body())[:-1] + ', "\\ud800": 1}'
    # When it is refused
    status, body, _ = call("POST", "/orders", raw_body=raw)
    # Then the answer is a 400, and the "request rejected" line was written (encoding it raised before)
    assert status == 400
    assert body["error"]["code"] == "validation_error"
    assert "request rejected" in function_log()
