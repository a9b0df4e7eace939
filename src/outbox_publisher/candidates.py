"""What a publishing engine is fed: outbox rows, as the caller (stream or sweeper) found them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from outbox.errors import InvalidOutboxRowError
from outbox.marking import RowKey
from outbox.model import PARTITION_KEY, SORT_KEY, OutboxEvent
from outbox_publisher.poison import PoisonReason, Rejection


@dataclass(frozen=True, slots=True)
class Candidate:
    """One outbox row to publish, as the caller found it."""

    ref: str
    """The caller's identifier (a stream SequenceNumber; a sweeper's own key). Returned, never interpreted."""
    row: Mapping[str, Any]
    """The row as stored (DynamoDB low-level JSON): what the poison queue receives."""
    key: RowKey | None
    event: OutboxEvent | None
    rejection: Rejection | None = None
    source: Mapping[str, str] = field(default_factory=dict)
    """Where the row came from (stream ARN, sequence number...), for the poison message."""

    @classmethod
    def from_row(
        cls,
        ref: str,
        row: Mapping[str, Any],
        *,
        keys: Mapping[str, Any] | None = None,
        source: Mapping[str, str] | None = None,
    ) -> Candidate:
        key = row_key(keys if keys is not None else row)
        try:
            event = OutboxEvent.from_item(row)
        except InvalidOutboxRowError as error:
            code = "InvalidPayload" if error.field == "payload" else "InvalidOutboxRow"
            rejection = Rejection(PoisonReason.INVALID_ROW, code, str(error))
            return cls(ref, row, key, None, rejection, dict(source or {}))
        return cls(ref, row, key, event, None, dict(source or {}))

    @classmethod
    def rejected(
        cls,
        ref: str,
        row: Mapping[str, Any],
        rejection: Rejection,
        *,
        keys: Mapping[str, Any] | None = None,
        source: Mapping[str, str] | None = None,
    ) -> Candidate:
        return cls(ref, row, row_key(keys if keys is not None else row), None, rejection, dict(source or {}))


def row_key(item: Mapping[str, Any]) -> RowKey | None:
    """The row's key, if the item holds a well-formed one (a poison row may not)."""
    try:
        aggregate_key = item[PARTITION_KEY]["S"]
        seq = int(str(item[SORT_KEY]["N"]))
    except (KeyError, TypeError, ValueError):
        return None
    return RowKey(str(aggregate_key), seq)
