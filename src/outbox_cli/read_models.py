"""The sample consumers' read models beside what the Orders table says: what `outbox demo` compares.

Items as DynamoDB stores them (low-level format). The Orders table holds `ORDER#{id}` items; the
order-summary consumer's table `order#{id}` summaries; the cancellations consumer's `cancellation#{id}`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

Summary = tuple[str, str, str, str, int]
"""(customer_id, currency, total, status, last_seq) of one order."""


def summaries_from_orders(items: Iterable[Mapping[str, Any]]) -> dict[str, Summary]:
    """What the summary of each order must say: the order as the Orders table has it."""
    return {item["order_id"]["S"]: _summary(item) for item in items if item["pk"]["S"].startswith("ORDER#")}


def summaries(items: Iterable[Mapping[str, Any]]) -> dict[str, Summary]:
    """The order-summary consumer's read model (its inbox records left out)."""
    return {item["order_id"]["S"]: _summary(item) for item in items if item["pk"]["S"].startswith("order#")}


def _summary(item: Mapping[str, Any]) -> Summary:
    """Both tables name these attributes alike."""
    return (
        item["customer_id"]["S"],
        item["currency"]["S"],
        item["total"]["S"],
        item["status"]["S"],
        int(item["last_seq"]["N"]),
    )


def cancelled_orders(items: Iterable[Mapping[str, Any]]) -> set[str]:
    return {
        item["order_id"]["S"]
        for item in items
        if item["pk"]["S"].startswith("ORDER#") and item["status"]["S"] == "CANCELLED"
    }


def cancellations(items: Iterable[Mapping[str, Any]]) -> set[str]:
    return {item["order_id"]["S"] for item in items if item["pk"]["S"].startswith("cancellation#")}
