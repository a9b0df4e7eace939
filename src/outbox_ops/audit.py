"""Operators' actions on events, as recorded: one audit record per event an operator redrove or skipped.

The record lives in the outbox table under a key no event can have (outbox_ops.release.audit_key:
`#audit#<aggregate_key>`, the event's seq) and is written in the same transaction as the action, so an action
is never without its entry; it is never shortened, and it stays after the event's row has left the table (a
published or skipped event). An event's record is one read; an aggregate's, one Query; every record, a scan of
the table (which holds only what is not out yet, and these records).

Rows of an earlier release kept their entries on the row itself (`audit`): `outbox failed show` adds those of
a row still FAILED (outbox_ops.failed); this module does not read them, and rows that release kept PUBLISHED
leave with their TTL, entries and all.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from outbox.dynamodb import call
from outbox.model import AUDIT_KEY_PREFIX, PARTITION_KEY, RowKey, string_attribute
from outbox_ops.release import AUDIT_ENTRIES, audit_key

LEGACY_ROW_AUDIT = "audit"
"""Where rows of an earlier release kept their entries."""


@dataclass(frozen=True)
class AuditEntry:
    action: str
    at: str
    by: str
    reason: str
    generation: int | None = None
    out_of_order: bool = False
    row: Mapping[str, Any] | None = None
    """A skip's: the row as it was (DynamoDB JSON), its payload included unless `payload_omitted`."""

    @classmethod
    def of(cls, entry: Mapping[str, Any]) -> AuditEntry:
        fields = entry.get("M", {}) if isinstance(entry, Mapping) else {}
        generation = fields.get("generation", {}).get("N")
        return cls(
            action=str(string_attribute(fields, "action") or "-"),
            at=str(string_attribute(fields, "at") or "-"),
            by=str(string_attribute(fields, "by") or "-"),
            reason=str(string_attribute(fields, "reason") or "-"),
            generation=int(generation) if generation is not None else None,
            out_of_order=bool(fields.get("out_of_order", {}).get("BOOL", False)),
            row=fields.get("row", {}).get("M"),
        )

    def to_json(self, *, show_payload: bool = False) -> dict[str, Any]:
        document: dict[str, Any] = {
            "action": self.action,
            "at": self.at,
            "by": self.by,
            "reason": self.reason,
            "generation": self.generation,
            "out_of_order": self.out_of_order,
        }
        if self.row is not None:
            document["row"] = {
                name: value for name, value in self.row.items() if show_payload or name != "payload"
            }
        return document


@dataclass(frozen=True)
class AuditRecord:
    key: RowKey
    """The event's key (not the record's)."""
    event_id: str | None
    entries: list[AuditEntry] = field(default_factory=list)

    def to_json(self, *, show_payload: bool = False) -> dict[str, Any]:
        return {
            "aggregate_key": self.key.aggregate_key,
            "seq": self.key.stored_seq or self.key.seq,  # as `failed list --json` prints it
            "event_id": self.event_id,
            "entries": [entry.to_json(show_payload=show_payload) for entry in self.entries],
        }


def entries_of(item: Mapping[str, Any] | None, name: str = AUDIT_ENTRIES) -> list[AuditEntry]:
    listed = item.get(name, {}).get("L", []) if item else []
    return [AuditEntry.of(entry) for entry in listed]


class AuditRecords:
    """Reads the audit records of one outbox table."""

    def __init__(self, dynamodb: Any, table: str) -> None:
        self._dynamodb = dynamodb
        self._table = table

    def of_event(self, key: RowKey) -> AuditRecord | None:
        response = call(
            "GetItem",
            self._dynamodb.get_item,
            TableName=self._table,
            Key=audit_key(key).item(),
            ConsistentRead=True,
        )
        item = response.get("Item")
        return _record(item) if item else None

    def select(self, aggregate_key: str | None = None) -> list[AuditRecord]:
        """Every record (a scan), or an aggregate's (a Query), in the order their first entries were made."""
        if aggregate_key is not None:
            items = self._pages(
                "Query",
                self._dynamodb.query,
                KeyConditionExpression="#pk = :pk",
                ExpressionAttributeValues={":pk": {"S": AUDIT_KEY_PREFIX + aggregate_key}},
            )
        else:
            items = self._pages(
                "Scan",
                self._dynamodb.scan,
                FilterExpression="begins_with(#pk, :prefix)",
                ExpressionAttributeValues={":prefix": {"S": AUDIT_KEY_PREFIX}},
            )
        records = [record for record in map(_record, items) if record is not None]
        return sorted(
            records, key=lambda record: (record.entries[0].at if record.entries else "", record.key)
        )

    def _pages(self, operation: str, method: Any, **arguments: Any) -> Iterator[Mapping[str, Any]]:
        arguments |= {
            "TableName": self._table,
            "ExpressionAttributeNames": {"#pk": PARTITION_KEY},
            "ConsistentRead": True,
        }
        while True:
            page = call(operation, method, **arguments)
            yield from page.get("Items", [])
            if "LastEvaluatedKey" not in page:
                return
            arguments["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _record(item: Mapping[str, Any]) -> AuditRecord | None:
    stored = RowKey.stored(item)
    if stored is None or not stored.aggregate_key.startswith(AUDIT_KEY_PREFIX):
        return None
    key = RowKey(stored.aggregate_key.removeprefix(AUDIT_KEY_PREFIX), stored.seq, stored.stored_seq)
    return AuditRecord(key, string_attribute(item, "event_id"), entries_of(item))
