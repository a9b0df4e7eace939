"""Real boto3 against moto: the tables the stack deploys, created the same way for tests (a template
test, tests/infra/test_infra_tables.py, keeps them equal to the synthesized ones)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

REGION = "us-east-1"


@dataclass(frozen=True)
class Tables:
    orders: str
    outbox: str
    outbox_stream_arn: str


def create_tables(dynamodb: Any, *, orders: str = "orders", outbox: str = "outbox") -> Tables:
    """Orders (pk) and Outbox (aggregate_key, seq; stream NEW_IMAGE; sparse `pending` index), as deployed."""
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
            {"AttributeName": "pending_shard", "AttributeType": "N"},
            {"AttributeName": "occurred_at", "AttributeType": "S"},
        ],
        KeySchema=[
            {"AttributeName": "aggregate_key", "KeyType": "HASH"},
            {"AttributeName": "seq", "KeyType": "RANGE"},
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "pending",
                "KeySchema": [
                    {"AttributeName": "pending_shard", "KeyType": "HASH"},
                    {"AttributeName": "occurred_at", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            }
        ],
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"},
    )
    return Tables(orders, outbox, description["TableDescription"]["LatestStreamArn"])


def scan_all(dynamodb: Any, table: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    arguments: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
    while True:
        page = dynamodb.scan(**arguments)
        items.extend(page["Items"])
        if "LastEvaluatedKey" not in page:
            return items
        arguments["ExclusiveStartKey"] = page["LastEvaluatedKey"]
