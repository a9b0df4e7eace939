"""`outbox purge-published`: delete PUBLISHED rows past their retention, for a table whose TTL is off.

DynamoDB's TTL deletes a PUBLISHED row after its `expires_at` (set when it was published, retention from the
publisher's configuration), for free. Where TTL is disabled, rows pile up; this deletes what TTL would have:
PUBLISHED rows whose `expires_at` has passed and that were published more than `older_than` ago. It never
deletes a row before its `expires_at`, so the order gate's reading of a missing predecessor
(outbox.predecessors, which counts on retention) stays right, and it never touches a PENDING or FAILED row.

PUBLISHED rows are in no index, so this is the one operation that scans the table (paginated, keys and three
small attributes only; read capacity: the whole table once). Deletes go 25 at a time (BatchWriteItem), each
unprocessed entry retried with backoff; a PUBLISHED row never changes again, so an unconditional delete of one
seen PUBLISHED is safe.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from outbox.clock import format_timestamp, utc_now
from outbox.dynamodb import call
from outbox.model import PARTITION_KEY, SORT_KEY, TTL_ATTRIBUTE, OutboxStatus, RowKey
from outbox_ops.errors import OperationError

_BATCH = 25
_ROUNDS = 6


@dataclass
class PurgeReport:
    dry_run: bool
    scanned: int = 0
    deleted: int = 0
    eligible: int = 0
    """PUBLISHED, past `expires_at` and older than asked: deleted (or, in a dry run, would be)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "scanned": self.scanned,
            "eligible": self.eligible,
            "deleted": self.deleted,
        }


def purge_published(
    dynamodb: Any,
    table: str,
    *,
    older_than: timedelta,
    dry_run: bool,
    now: datetime | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> PurgeReport:
    if older_than <= timedelta(0):
        raise OperationError("--older-than must be positive")
    now = now or utc_now()
    report = PurgeReport(dry_run)
    arguments: dict[str, Any] = {
        "TableName": table,
        "ProjectionExpression": "#pk, #sk",
        "FilterExpression": "#status = :published AND #ttl <= :now AND published_at < :cutoff",
        "ExpressionAttributeNames": {
            "#pk": PARTITION_KEY,
            "#sk": SORT_KEY,
            "#status": "status",
            "#ttl": TTL_ATTRIBUTE,
        },
        "ExpressionAttributeValues": {
            ":published": {"S": OutboxStatus.PUBLISHED.value},
            ":now": {"N": str(int(now.timestamp()))},
            ":cutoff": {"S": format_timestamp(now - older_than)},
        },
    }
    while True:
        page = call("Scan", dynamodb.scan, **arguments)
        report.scanned += int(page.get("ScannedCount", 0))
        keys = [key for key in (RowKey.of(item) for item in page.get("Items", [])) if key is not None]
        report.eligible += len(keys)
        if not dry_run:
            for start in range(0, len(keys), _BATCH):
                report.deleted += _delete(dynamodb, table, keys[start : start + _BATCH], sleep)
        if "LastEvaluatedKey" not in page:
            return report
        arguments["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _delete(dynamodb: Any, table: str, keys: list[RowKey], sleep: Callable[[float], None]) -> int:
    requests: list[dict[str, Any]] = [{"DeleteRequest": {"Key": key.item()}} for key in keys]
    for round_ in range(_ROUNDS):
        response = call("BatchWriteItem", dynamodb.batch_write_item, RequestItems={table: requests})
        requests = (response.get("UnprocessedItems") or {}).get(table, [])
        if not requests:
            return len(keys)
        sleep(min(5.0, 0.1 * 2**round_))
    raise OperationError(
        f"DynamoDB left {len(requests)} deletes unprocessed after {_ROUNDS} rounds (throttled): run the "
        "command again; it only deletes what is still there"
    )
