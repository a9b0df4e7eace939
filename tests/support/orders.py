"""Helpers for Orders tests: a settable clock, predictable ids, API Gateway v2 events, table snapshots."""

from __future__ import annotations

import base64
import itertools
import json
import urllib.request
import uuid
from typing import Any

from orders_api import handler as api
from tests.support.aws import Tables, scan_all
from tests.support.lambda_context import FakeLambdaContext


class SequentialIds:
    """uuid4 stand-in: deterministic, distinct UUIDs."""

    def __init__(self) -> None:
        self._counter = itertools.count(1)

    def __call__(self) -> uuid.UUID:
        return uuid.UUID(int=next(self._counter))


def place_body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "customer_id": "c-1",
        "currency": "EUR",
        "items": [{"sku": "SKU-1", "quantity": 2, "unit_price": "9.99"}],
    }
    body.update(overrides)
    return body


def place_order_over_http(api_url: str, **overrides: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """POST /orders on a running Orders API (a local runtime's): the order it answered (201), and the
    response's headers, names lowercased."""
    request = urllib.request.Request(  # noqa: S310 - a loopback URL the test's runtime serves
        f"{api_url.rstrip('/')}/orders",
        data=json.dumps(place_body(**overrides)).encode(),
        method="POST",
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        assert response.status == 201
        return json.loads(response.read()), {name.lower(): value for name, value in response.headers.items()}


def http_event(
    method: str,
    path: str,
    *,
    body: Any = None,
    raw_body: str | None = None,
    headers: dict[str, str] | None = None,
    request_id: str = "api-request-1",
    base64_encoded: bool = False,
    raw_bytes: bytes | None = None,
) -> dict[str, Any]:
    """An API Gateway HTTP API (payload 2.0) event, as AWS sends it (headers lower-cased). `raw_bytes` is a
    body API Gateway passes base64-encoded, as it does for a binary content type."""
    text = raw_body if raw_body is not None else (None if body is None else json.dumps(body))
    if text is not None and base64_encoded:
        text = base64.b64encode(text.encode()).decode()
    if raw_bytes is not None:
        text, base64_encoded = base64.b64encode(raw_bytes).decode(), True
    all_headers = {"content-type": "application/json", "host": "api.example.com"}
    all_headers.update({name.lower(): value for name, value in (headers or {}).items()})
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": "",
        "headers": all_headers,
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "api",
            "domainName": "api.example.com",
            "domainPrefix": "api",
            "http": {
                "method": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": "192.0.2.1",
                "userAgent": "pytest",
            },
            "requestId": request_id,
            "routeKey": "$default",
            "stage": "$default",
            "time": "29/Nov/2026:12:00:00 +0000",
            "timeEpoch": 1796040000000,
        },
        "body": text,
        "isBase64Encoded": base64_encoded,
    }


def snapshot(dynamodb: Any, tables: Tables) -> dict[str, list[dict[str, Any]]]:
    """Both tables' full contents, order-independent: compare before/after to prove nothing was written."""

    def ordered(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return sorted(items, key=lambda item: json.dumps(item, sort_keys=True))

    return {
        "orders": ordered(scan_all(dynamodb, tables.orders)),
        "outbox": ordered(scan_all(dynamodb, tables.outbox)),
    }


def outbox_rows(dynamodb: Any, tables: Tables, order_id: str) -> list[dict[str, Any]]:
    response = dynamodb.query(
        TableName=tables.outbox,
        KeyConditionExpression="aggregate_key = :key",
        ExpressionAttributeValues={":key": {"S": f"Order#{order_id}"}},
        ConsistentRead=True,
    )
    items: list[dict[str, Any]] = response["Items"]
    return items


def call(method: str, path: str, **kwargs: Any) -> tuple[int, dict[str, Any], dict[str, Any]]:
    """The Orders API handler invoked with an HTTP API event: status, parsed body, headers."""
    response = api.handler(http_event(method, path, **kwargs), FakeLambdaContext())
    return response["statusCode"], json.loads(response["body"]), response["headers"]


def create(**kwargs: Any) -> dict[str, Any]:
    status, body, _ = call("POST", "/orders", body=place_body(), **kwargs)
    assert status == 201, body
    return body
