"""Real boto3 against moto: the tables the stack deploys, created the same way for tests (a template
test, tests/infra/test_infra_tables.py, keeps them equal to the synthesized ones)."""

from __future__ import annotations

import os
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import boto3
from moto.moto_server.threaded_moto_server import ThreadedMotoServer

REGION = "us-east-1"


@dataclass(frozen=True)
class Tables:
    orders: str
    outbox: str
    outbox_stream_arn: str


def create_tables(dynamodb: Any, *, orders: str = "orders", outbox: str = "outbox") -> Tables:
    """Orders (pk) and Outbox (aggregate_key, seq; stream NEW_AND_OLD_IMAGES; the sparse `failed` index), as
    deployed."""
    dynamodb.create_table(
        TableName=orders,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
    )
    description = dynamodb.create_table(
        TableName=outbox,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[
            {"AttributeName": "aggregate_key", "AttributeType": "S"},
            {"AttributeName": "seq", "AttributeType": "N"},
            {"AttributeName": "failed_shard", "AttributeType": "N"},
            {"AttributeName": "failed_at", "AttributeType": "S"},
        ],
        KeySchema=[
            {"AttributeName": "aggregate_key", "KeyType": "HASH"},
            {"AttributeName": "seq", "KeyType": "RANGE"},
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "failed",
                "KeySchema": [
                    {"AttributeName": "failed_shard", "KeyType": "HASH"},
                    {"AttributeName": "failed_at", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            },
        ],
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )
    return Tables(orders, outbox, description["TableDescription"]["LatestStreamArn"])


def event_rows(dynamodb: Any, table: str) -> list[dict[str, Any]]:
    """The events' rows in the outbox table (not its own items: audit records, the sweeper's cursor)."""
    return [item for item in scan_all(dynamodb, table) if not item["aggregate_key"]["S"].startswith("#")]


def scan_all(dynamodb: Any, table: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    arguments: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
    while True:
        page = dynamodb.scan(**arguments)
        items.extend(page["Items"])
        if "LastEvaluatedKey" not in page:
            return items
        arguments["ExclusiveStartKey"] = page["LastEvaluatedKey"]


@contextmanager
def moto_server() -> Iterator[str]:
    """moto's HTTP server on a free loopback port, emptied first; yields its endpoint URL.

    For code that runs in another process (a user's script, a fresh virtual environment) and finds AWS
    through `AWS_ENDPOINT_URL`, as it would find the local runtime.
    """
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        request = urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST")  # noqa: S310
        with urllib.request.urlopen(request, timeout=10):  # noqa: S310 - our own loopback server
            pass
        yield endpoint
    finally:
        server.stop()


def endpoint_environment(endpoint: str) -> dict[str, str]:
    """The environment a process needs to reach `endpoint` with fake credentials, and nothing else."""
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
        "PATH": os.environ.get("PATH", ""),
    }


def endpoint_client(endpoint: str, service: str) -> Any:
    return boto3.client(
        service,
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
