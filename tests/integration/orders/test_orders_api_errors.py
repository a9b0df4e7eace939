"""The Orders API's errors, driven with API Gateway HTTP API (v2) events against moto: every case checks
its status, its error body and that neither table changed."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from orders.repository import DynamoDBOrderRepository
from orders.service import OrderService
from orders_api import handler as api
from tests.support.aws import Tables
from tests.support.orders import call, create, place_body, snapshot

ROOT = Path(__file__).resolve().parents[3]

# Every test runs inside moto with the deployed tables: the handler must never reach real AWS.
pytestmark = pytest.mark.usefixtures("tables")


# --- Errors: status, body, and both tables unchanged -----------------------------------------


def assert_error(
    dynamodb: Any,
    tables: Tables,
    method: str,
    path: str,
    *,
    status: int,
    code: str,
    field: str | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    before = snapshot(dynamodb, tables)
    actual_status, body, _ = call(method, path, **kwargs)
    assert actual_status == status, body
    assert body["error"]["code"] == code
    assert body["error"].get("field") == field
    assert body["error"]["message"]
    assert snapshot(dynamodb, tables) == before
    return body


def _items(count: int) -> list[dict[str, Any]]:
    return [{"sku": f"SKU-{n}", "quantity": 1, "unit_price": "1.00"} for n in range(count)]


INVALID_BODIES: list[tuple[str, Any, str]] = [
    ("not-an-object", [place_body()], "body"),
    ("customer-missing", {"currency": "EUR", "items": _items(1)}, "customer_id"),
    ("customer-not-string", place_body(customer_id=42), "customer_id"),
    ("customer-bad-charset", place_body(customer_id="c 1<script>"), "customer_id"),
    ("customer-too-long", place_body(customer_id="c" * 65), "customer_id"),
    ("currency-missing", {"customer_id": "c-1", "items": _items(1)}, "currency"),
    ("currency-lowercase", place_body(currency="eur"), "currency"),
    ("currency-too-long", place_body(currency="EURO"), "currency"),
    ("items-missing", {"customer_id": "c-1", "currency": "EUR"}, "items"),
    ("items-not-list", place_body(items={"sku": "SKU-1"}), "items"),
    ("items-empty", place_body(items=[]), "items"),
    ("items-too-many", place_body(items=_items(51)), "items"),
    ("item-not-object", place_body(items=["SKU-1"]), "items[0]"),
    ("item-unknown-field", place_body(items=[{**_items(1)[0], "discount": "1"}]), "items[0].discount"),
    ("sku-missing", place_body(items=[{"quantity": 1, "unit_price": "1.00"}]), "items[0].sku"),
    ("sku-bad", place_body(items=[{"sku": "", "quantity": 1, "unit_price": "1.00"}]), "items[0].sku"),
    ("sku-duplicate", place_body(items=[_items(1)[0], _items(1)[0]]), "items[1].sku"),
    ("quantity-zero", place_body(items=[{**_items(1)[0], "quantity": 0}]), "items[0].quantity"),
    ("quantity-too-big", place_body(items=[{**_items(1)[0], "quantity": 1001}]), "items[0].quantity"),
    ("quantity-string", place_body(items=[{**_items(1)[0], "quantity": "2"}]), "items[0].quantity"),
    ("quantity-fraction", place_body(items=[{**_items(1)[0], "quantity": 1.5}]), "items[0].quantity"),
    ("quantity-bool", place_body(items=[{**_items(1)[0], "quantity": True}]), "items[0].quantity"),
    ("price-missing", place_body(items=[{"sku": "A", "quantity": 1}]), "items[0].unit_price"),
    ("price-number", place_body(items=[{**_items(1)[0], "unit_price": 9.99}]), "items[0].unit_price"),
    ("price-zero", place_body(items=[{**_items(1)[0], "unit_price": "0.00"}]), "items[0].unit_price"),
    ("price-negative", place_body(items=[{**_items(1)[0], "unit_price": "-1.00"}]), "items[0].unit_price"),
    ("price-3-decimals", place_body(items=[{**_items(1)[0], "unit_price": "9.999"}]), "items[0].unit_price"),
    ("price-exponent", place_body(items=[{**_items(1)[0], "unit_price": "1e3"}]), "items[0].unit_price"),
    (
        "price-too-big",
        place_body(items=[{**_items(1)[0], "unit_price": "1000000.01"}]),
        "items[0].unit_price",
    ),
    (
        "price-decimals-for-jpy",
        place_body(currency="JPY", items=[{**_items(1)[0], "unit_price": "100.5"}]),
        "items[0].unit_price",
    ),
    ("unknown-field", place_body(coupon="FREE"), "coupon"),
]


@pytest.mark.parametrize(
    ("body", "field"), [(b, f) for _, b, f in INVALID_BODIES], ids=[i for i, _, _ in INVALID_BODIES]
)
def test_invalid_create_body_is_400_naming_the_field_and_writes_nothing(
    dynamodb: Any, tables: Tables, body: Any, field: str
) -> None:
    # Given / When an invalid body is posted, even with an Idempotency-Key / Then 400 naming the field
    assert_error(
        dynamodb,
        tables,
        "POST",
        "/orders",
        body=body,
        headers={"Idempotency-Key": "k"},
        status=400,
        code="validation_error",
        field=field,
    )


@pytest.mark.parametrize(
    "raw_body",
    [
        "{not json",
        '{"customer_id": "c-1", "customer_id": "c-2", "currency": "EUR", "items": []}',
        '{"customer_id": "c-1", "currency": "EUR", "items": [{"sku": "A", "quantity": NaN}]}',
        "",
        json.dumps(place_body(note="x" * (16 * 1024))),
    ],
    ids=["malformed", "duplicate-key", "nan", "empty", "over-16KiB"],
)
def test_unparseable_or_oversized_body_is_400_on_body(dynamodb: Any, tables: Tables, raw_body: str) -> None:
    # Given / When / Then: the body as a whole is refused before anything else
    assert_error(
        dynamodb,
        tables,
        "POST",
        "/orders",
        raw_body=raw_body,
        status=400,
        code="validation_error",
        field="body",
    )


def test_invalid_idempotency_key_is_400(dynamodb: Any, tables: Tables) -> None:
    # Given / When a key with characters outside the allowed set / Then 400 on the header
    assert_error(
        dynamodb,
        tables,
        "POST",
        "/orders",
        body=place_body(),
        headers={"Idempotency-Key": "no spaces allowed"},
        status=400,
        code="validation_error",
        field="Idempotency-Key",
    )


def test_same_idempotency_key_with_another_body_is_409(dynamodb: Any, tables: Tables) -> None:
    # Given an order created with key "k"
    create(headers={"Idempotency-Key": "k"})
    # When the key is reused for a different order / Then 409 and nothing written
    assert_error(
        dynamodb,
        tables,
        "POST",
        "/orders",
        body=place_body(customer_id="c-2"),
        headers={"Idempotency-Key": "k"},
        status=409,
        code="idempotency_key_reused",
    )


def test_unknown_order_is_404_on_every_route(dynamodb: Any, tables: Tables) -> None:
    # Given no order "missing" / When it is read, confirmed or cancelled / Then 404 each time
    for method, path in [
        ("GET", "/orders/missing"),
        ("POST", "/orders/missing/confirm"),
        ("POST", "/orders/missing/cancel"),
    ]:
        assert_error(dynamodb, tables, method, path, status=404, code="order_not_found")


def test_malformed_order_id_is_400(dynamodb: Any, tables: Tables) -> None:
    # Given / When an id no order can have / Then 400 naming order_id
    assert_error(
        dynamodb, tables, "GET", "/orders/bad$id", status=400, code="validation_error", field="order_id"
    )


def test_disallowed_transition_is_409(dynamodb: Any, tables: Tables) -> None:
    # Given a cancelled order
    order_id = create()["order_id"]
    call("POST", f"/orders/{order_id}/cancel")
    # When it is confirmed or cancelled again / Then 409 invalid_transition, nothing written
    for action in ("confirm", "cancel"):
        assert_error(
            dynamodb, tables, "POST", f"/orders/{order_id}/{action}", status=409, code="invalid_transition"
        )


def test_stale_expected_version_is_409(dynamodb: Any, tables: Tables) -> None:
    # Given an order at version 1 / When confirmed with expected_version 2 / Then 409 version_conflict
    order_id = create()["order_id"]
    assert_error(
        dynamodb,
        tables,
        "POST",
        f"/orders/{order_id}/confirm",
        body={"expected_version": 2},
        status=409,
        code="version_conflict",
    )


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"expected_version": "1"}, "expected_version"),
        ({"expected_version": 0}, "expected_version"),
        ({"reason": "x"}, "reason"),
        ([], "body"),
    ],
)
def test_invalid_transition_body_is_400(dynamodb: Any, tables: Tables, body: Any, field: str) -> None:
    # Given a placed order / When its confirm body is invalid / Then 400 naming the field
    order_id = create()["order_id"]
    assert_error(
        dynamodb,
        tables,
        "POST",
        f"/orders/{order_id}/confirm",
        body=body,
        status=400,
        code="validation_error",
        field=field,
    )


def test_unknown_route_is_404(dynamodb: Any, tables: Tables) -> None:
    # Given / When / Then
    assert_error(dynamodb, tables, "DELETE", "/orders/x", status=404, code="route_not_found")


class _ThrottledClient:
    """A DynamoDB client that is throttled on every call."""

    def _throttle(self, operation: str) -> ClientError:
        return ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, operation)

    def get_item(self, **_: Any) -> Any:
        raise self._throttle("GetItem")

    def transact_write_items(self, **_: Any) -> Any:
        raise self._throttle("TransactWriteItems")


def test_throttled_store_is_503_with_retry_after(dynamodb: Any, tables: Tables) -> None:
    # Given a service whose DynamoDB throttles every call
    client = _ThrottledClient()
    api.set_service(
        OrderService(DynamoDBOrderRepository(client, orders_table="orders", outbox_table="outbox"))
    )
    # When an order is placed / Then 503, retryable, nothing written
    before = snapshot(dynamodb, tables)
    status, body, headers = call("POST", "/orders", body=place_body())
    assert (status, body["error"]["code"], headers["Retry-After"]) == (503, "service_unavailable", "1")
    assert snapshot(dynamodb, tables) == before


def test_unexpected_failure_is_a_generic_500(
    monkeypatch: pytest.MonkeyPatch, dynamodb: Any, tables: Tables
) -> None:
    # Given a deployment that lost its configuration (the service is built on first use)
    monkeypatch.delenv("OUTBOX_TABLE_NAME")
    # When a request arrives / Then 500 without internals in the body
    body = assert_error(
        dynamodb, tables, "POST", "/orders", body=place_body(), status=500, code="internal_error"
    )
    assert "OUTBOX" not in json.dumps(body)


# --- Cold start: clients are created lazily, once --------------------------------------------


class _BuggyClient:
    """A DynamoDB client with a bug on every write that fails quoting the data it read, as Python's own
    conversions do (`int("abc")`: "invalid literal for int() with base 10: 'abc'")."""

    def __init__(self, quoted: str) -> None:
        self._quoted = quoted

    def transact_write_items(self, **_: Any) -> Any:
        return int(self._quoted)


def test_an_unexpected_failure_is_logged_by_where_and_what_never_by_its_message(
    dynamodb: Any, tables: Tables, function_log: Callable[[], str]
) -> None:
    # Given a service whose store fails with an error that quotes request data
    quoted = "customer-secret-4111111111111111"
    client = _BuggyClient(quoted)
    api.set_service(
        OrderService(DynamoDBOrderRepository(client, orders_table="orders", outbox_table="outbox"))
    )
    # When an order is placed
    status, body, _ = call("POST", "/orders", body=place_body())
    # Then a generic 500, and one log line saying what failed and where, without the quoted value
    assert (status, body["error"]["code"]) == (500, "internal_error")
    lines = [json.loads(line) for line in function_log().splitlines()]
    [line] = [line for line in lines if line["message"] == "unhandled error"]
    assert line["error_type"] == "ValueError"
    assert any("transact_write_items" in frame for frame in line["stack"])
    assert "exception" not in line
    assert quoted not in function_log()
