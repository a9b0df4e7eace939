"""Adding a FAILED row to the sparse `failed` index, when it is not in it (it lacks one of the index's keys):
a row another writer saved FAILED (a backfill, a copy), or one an earlier release marked before the index
existed. The sweeper does it as its
scan finds them, so `outbox failed list` and `outbox status` see every FAILED row without a scan of their own.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from outbox.clock import format_timestamp
from outbox.dynamodb import ConditionNotMetError, call
from outbox.model import FAILED_INDEX_PARTITION_KEY, FAILED_INDEX_SORT_KEY, OutboxStatus, RowKey, failed_shard


class FailedIndexer(Protocol):
    def add(self, key: RowKey, now: datetime) -> bool:
        """Puts the FAILED row at `key` into the index; False if it is no longer FAILED or is indexed
        already. Raises an OutboxError if DynamoDB did not answer."""
        ...


class DynamoDBFailedIndexer:
    def __init__(self, client: Any, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def add(self, key: RowKey, now: datetime) -> bool:
        try:
            call(
                "UpdateItem",
                self._client.update_item,
                TableName=self._table,
                Key=key.item(),
                # The index is keyed on `failed_at` too: a row without one gets now.
                UpdateExpression="SET #shard = :shard, #at = if_not_exists(#at, :now)",
                ConditionExpression=(
                    "#status = :failed AND (attribute_not_exists(#shard) OR attribute_not_exists(#at))"
                ),
                ExpressionAttributeNames={
                    "#status": "status",
                    "#shard": FAILED_INDEX_PARTITION_KEY,
                    "#at": FAILED_INDEX_SORT_KEY,
                },
                ExpressionAttributeValues={
                    ":failed": {"S": OutboxStatus.FAILED.value},
                    ":shard": {"N": str(failed_shard(key.aggregate_key))},
                    ":now": {"S": format_timestamp(now)},
                },
            )
        except ConditionNotMetError:
            return False
        return True
