"""FAILED rows: found through the sparse `failed` index, read from the table, described without payload.

The index holds the FAILED rows (the FAILED mark sets `failed_shard`, a redrive removes it, and the sweeper
adds a FAILED row another writer saved without it), keys only: listing queries its shards and reads the rows
themselves, strongly consistent, in batches of 100, so what an operator acts on is the row as it is now. The
payload is left out unless asked for. An index written only on failure costs two writes per FAILED row, where
listing by a scan would read the whole table on every command: the rare path pays, not every event.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from botocore.exceptions import ClientError

from outbox.aws_errors import error_code
from outbox.dynamodb import BATCH_GET_MAX_KEYS, batch_get_rows, call, translate_client_error
from outbox.generation import generation_of
from outbox.model import (
    DELIVERED_TO,
    FAILED_INDEX_NAME,
    FAILED_INDEX_PARTITION_KEY,
    FAILED_INDEX_SHARDS,
    FIRST_RELEASED_AT,
    PARTITION_KEY,
    RELEASE_REASON,
    RELEASED_AT,
    SORT_KEY,
    OutboxStatus,
    RowKey,
    failed_shard,
    string_attribute,
)
from outbox_ops.audit import LEGACY_ROW_AUDIT, AuditEntry, AuditRecords, entries_of
from outbox_ops.errors import ResourceNotFoundError, RowNotFoundError

_ATTRIBUTES = (
    PARTITION_KEY,
    SORT_KEY,
    "status",
    "event_id",
    "event_type",
    "occurred_at",
    "failed_at",
    "last_error",
    "attempts",
    RELEASED_AT,
    RELEASE_REASON,
    FIRST_RELEASED_AT,
    "generation",
    DELIVERED_TO,
    LEGACY_ROW_AUDIT,
)


@dataclass(frozen=True)
class FailedRow:
    key: RowKey
    event_id: str | None
    event_type: str | None
    occurred_at: str | None
    failed_at: str | None
    last_error: str | None
    """The reason and error code the publisher recorded (never payload data)."""
    attempts: int
    released_at: str | None
    """Set when its route lets the aggregate's later events go on past it: it holds nothing."""
    release_reason: str | None
    first_released_at: str | None
    """Kept through redrives: the row was released once, and its successors may have gone then."""
    generation: int
    delivered_to: tuple[str, ...] = ()
    """The destinations that took the event before it failed: a redrive does not send it to them again."""
    audit: list[AuditEntry] = field(default_factory=list)
    """Operators' actions on the event: its audit record's entries (outbox_ops.audit)."""
    payload: str | None = None
    """Only when asked for (`show_payload`)."""

    @property
    def holds_aggregate(self) -> bool:
        """Unreleased, it keeps every later event of its aggregate back (the order gate)."""
        return self.released_at is None

    @classmethod
    def of(cls, item: Mapping[str, Any]) -> FailedRow | None:
        key = RowKey.stored(item)
        if key is None:
            return None
        return cls(
            key=key,
            event_id=string_attribute(item, "event_id"),
            event_type=string_attribute(item, "event_type"),
            occurred_at=string_attribute(item, "occurred_at"),
            failed_at=string_attribute(item, "failed_at"),
            last_error=string_attribute(item, "last_error"),
            attempts=_integer(item, "attempts"),
            released_at=string_attribute(item, RELEASED_AT),
            release_reason=string_attribute(item, RELEASE_REASON),
            first_released_at=string_attribute(item, FIRST_RELEASED_AT),
            generation=generation_of(item),
            delivered_to=tuple(sorted(item.get(DELIVERED_TO, {}).get("SS", []))),
            audit=entries_of(item, LEGACY_ROW_AUDIT),
            payload=string_attribute(item, "payload"),
        )

    @classmethod
    def if_failed(cls, item: Mapping[str, Any] | None) -> FailedRow | None:
        """The row, if it is FAILED now (and has a readable key)."""
        if item is None or string_attribute(item, "status") != OutboxStatus.FAILED:
            return None
        return cls.of(item)

    def to_json(self) -> dict[str, Any]:
        document = {
            "aggregate_key": self.key.aggregate_key,
            "seq": self.key.seq if not self.key.stored_seq else self.key.stored_seq,
            "event_id": self.event_id,
            "event_type": self.event_type,
            "occurred_at": self.occurred_at,
            "failed_at": self.failed_at,
            "last_error": self.last_error,
            "attempts": self.attempts,
            "holds_aggregate": self.holds_aggregate,
            "released_at": self.released_at,
            "release_reason": self.release_reason,
            "generation": self.generation,
            "delivered_to": list(self.delivered_to),
            "audit": [entry.to_json() for entry in self.audit],
        }
        if self.payload is not None:
            document["payload"] = self.payload
        return document


@dataclass(frozen=True)
class FailedFilter:
    """Which FAILED rows: all, or those matching every criterion given."""

    event_ids: frozenset[str] = frozenset()
    aggregate_key: str | None = None
    event_type: str | None = None
    error_contains: str | None = None

    def matches(self, row: FailedRow) -> bool:
        return (
            (not self.event_ids or row.event_id in self.event_ids)
            and (self.aggregate_key is None or row.key.aggregate_key == self.aggregate_key)
            and (self.event_type is None or row.event_type == self.event_type)
            and (self.error_contains is None or self.error_contains in (row.last_error or ""))
        )


class FailedRows:
    """Reads FAILED rows of one outbox table."""

    def __init__(self, dynamodb: Any, table: str) -> None:
        self._dynamodb = dynamodb
        self._table = table

    def select(self, where: FailedFilter | None = None, *, show_payload: bool = False) -> list[FailedRow]:
        """The FAILED rows matching `where`, oldest failure first, read from the table now."""
        where = where or FailedFilter()
        shards = [failed_shard(where.aggregate_key)] if where.aggregate_key else range(FAILED_INDEX_SHARDS)
        keys = [
            key
            for shard in shards
            for page in self._pages(shard)
            for key in (RowKey.stored(item) for item in page.get("Items", []))
            if key is not None and (where.aggregate_key is None or key.aggregate_key == where.aggregate_key)
        ]
        rows = (FailedRow.if_failed(item) for item in self.items(keys, show_payload=show_payload).values())
        matching = [row for row in rows if row is not None and where.matches(row)]
        return sorted(matching, key=lambda row: (row.failed_at or "", row.key))

    def find(self, event_id: str, *, show_payload: bool = False) -> FailedRow:
        """The FAILED row of `event_id`, with the entries of its audit record."""
        rows = self.select(FailedFilter(event_ids=frozenset({event_id})), show_payload=show_payload)
        if not rows:
            raise RowNotFoundError(
                f"no FAILED row has event_id {event_id} (an event published or skipped has left the table: "
                "outbox audit lists what operators did)"
            )
        row = rows[0]
        record = AuditRecords(self._dynamodb, self._table).of_event(row.key)
        return replace(row, audit=row.audit + (record.entries if record is not None else []))

    def items(self, keys: Sequence[RowKey], *, show_payload: bool = False) -> dict[RowKey, Mapping[str, Any]]:
        """The rows at `keys` as stored now, whatever their status (without payload unless asked for)."""
        found: dict[RowKey, Mapping[str, Any]] = {}
        unique = sorted(set(keys))
        for start in range(0, len(unique), BATCH_GET_MAX_KEYS):
            found.update(self._batch_get(unique[start : start + BATCH_GET_MAX_KEYS], show_payload))
        return found

    def _pages(self, shard: int) -> Iterator[Mapping[str, Any]]:
        arguments: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": FAILED_INDEX_NAME,
            "KeyConditionExpression": "#shard = :shard",
            "ExpressionAttributeNames": {"#shard": FAILED_INDEX_PARTITION_KEY},
            "ExpressionAttributeValues": {":shard": {"N": str(shard)}},
        }
        while True:
            try:
                page = self._dynamodb.query(**arguments)
            except ClientError as error:
                raise self._not_found(error) or translate_client_error(error, "Query") from error
            yield page
            if "LastEvaluatedKey" not in page:
                return
            arguments["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _not_found(self, error: ClientError) -> ResourceNotFoundError | None:
        """The index or the table is not there: AWS says ValidationException for a missing index, moto (and
        so the local runtime) ResourceNotFoundException; both name the index in their message."""
        code, message = error_code(error), str(error.response.get("Error", {}).get("Message", ""))
        if code in {"ValidationException", "ResourceNotFoundException"} and "index" in message.lower():
            return ResourceNotFoundError(
                f"table {self._table} has no `{FAILED_INDEX_NAME}` index (the sparse index on "
                f"`{FAILED_INDEX_PARTITION_KEY}` through which FAILED rows are found): outbox_cdk.Outbox "
                "builds it; for a table of your own, add it with outbox_cdk.add_failed_index(table), deploy"
            )
        if code == "ResourceNotFoundException":
            return ResourceNotFoundError(
                f"table {self._table} not found in this account and region: check --table, --stack, --region"
            )
        return None

    def _batch_get(self, keys: Sequence[RowKey], show_payload: bool) -> dict[RowKey, Mapping[str, Any]]:
        attributes = (*_ATTRIBUTES, "payload") if show_payload else _ATTRIBUTES
        names = {f"#a{index}": name for index, name in enumerate(attributes)}
        return batch_get_rows(
            lambda **request: call("BatchGetItem", self._dynamodb.batch_get_item, **request),
            self._table,
            keys,
            projection=", ".join(names),
            names=names,
        )


def _integer(item: Mapping[str, Any], name: str) -> int:
    try:
        return int(float(item.get(name, {}).get("N", "0")))
    except (TypeError, ValueError):
        return 0
