"""Releasing an aggregate the order gate holds: an operator redrives or skips the FAILED event it waits
behind (docs/operations.md, "outbox redrive" and "outbox skip").

Each is one transaction that changes the row and appends an entry (action, when, who, why) to the event's
audit record (outbox_ops.audit), which outlives the row, and each changes nothing unless the row is still as
it was read (FAILED, the same generation and event), saying so with a typed error (`ReleaseError`).
A redrive bumps the row's `generation`, so no stale stream record of its earlier life can settle or mark it.

A redrive can publish the event after a later event of its aggregate only if the row was ever released
(poisoned on a route that continues past poison: `first_released_at`, kept through redrives). The table keeps
no published rows to tell whether a later event went out meanwhile, so such a redrive is refused unless the
operator allows it out of order (recorded on the entry). A row never released held its aggregate all along.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum
from typing import Any

from outbox.clock import format_timestamp, utc_now
from outbox.dynamodb import DynamoDBTransactionExecutor, call
from outbox.errors import ConditionFailedError, OutboxError
from outbox.generation import generation_of, stored_generation
from outbox.limits import MAX_ITEM_BYTES, item_size
from outbox.model import (
    AUDIT_KEY_PREFIX,
    ENVELOPE_WAITS,
    FAILED_INDEX_PARTITION_KEY,
    FIRST_RELEASED_AT,
    GENERATION,
    LEASE_OWNER,
    LEASE_UNTIL,
    NEXT_ATTEMPT_AT,
    PARTITION_KEY,
    REDRIVEN_AT,
    RELEASE_REASON,
    RELEASED_AT,
    SORT_KEY,
    SWEEP_FAILURES,
    OutboxStatus,
    RowKey,
    outbox_table,
    string_attribute,
    truncate_error,
)
from outbox.transaction import Transaction

_NAMES = {"#status": "status"}
AUDIT_ENTRIES = "entries"
"""The audit record's list of entries (M: action, at, by, reason, generation; out_of_order, row)."""
_ROOM_FOR_ENTRIES = 16 * 1024
"""Kept free in an audit record when a skipped row is stored in it, for its entries."""


class ReleaseError(OutboxError):
    """The row is not in the state the operation needs; nothing was changed."""


class Action(StrEnum):
    """What an audit entry records."""

    REDRIVE = "redrive"
    SKIP = "skip"


def audit_key(key: RowKey) -> RowKey:
    """Where the audit record of the event at `key` lives (outbox.model.AUDIT_KEY_PREFIX)."""
    return RowKey(AUDIT_KEY_PREFIX + key.aggregate_key, key.seq, key.stored_seq)


def out_of_order_risk(released_at: str | None) -> str | None:
    """Why redriving a FAILED row could publish it after a later event of its aggregate, or None. Its
    `released_at`: when it was first released (`first_released_at`, kept through redrives), else now."""
    released = released_at
    if released is None:
        return None
    return (
        f"it was released at {released} (its route let later events go on past it), and whether a later "
        "event of its aggregate went out since cannot be told: the table keeps no published rows"
    )


def redrive(
    client: Any,
    table: str,
    key: RowKey,
    *,
    reason: str,
    actor: str,
    now: datetime | None = None,
    out_of_order: bool = False,
) -> None:
    """FAILED -> PENDING; the sweeper publishes it (same `event_id`)."""
    who = _who(reason, actor, now)
    row = read_failed(client, table, key)
    first_released = string_attribute(row, FIRST_RELEASED_AT) or string_attribute(row, RELEASED_AT)
    risk = out_of_order_risk(first_released)
    if risk is not None and not out_of_order:
        raise ReleaseError(
            f"{_where(key)}: {risk}; redriving it could publish it after a later event (allow it out of "
            "order to do so anyway); nothing changed"
        )
    values = {
        ":pending": {"S": OutboxStatus.PENDING.value},
        ":zero": {"N": "0"},
        # Set, not added: the condition holds the generation as read, and a value another writer stored as
        # text could not be added to.
        ":next_generation": {"N": str(generation_of(row) + 1)},
        ":at": who["at"],
        ":actor": who["by"],
        ":reason": who["reason"],
    }
    # The release this removes is kept as the first one, where the row does not say it yet (a row another
    # writer saved released): a row ever released stays one through every redrive.
    keep_release = ""
    if first_released is not None:
        keep_release = f", {FIRST_RELEASED_AT} = if_not_exists({FIRST_RELEASED_AT}, :first_released)"
        values[":first_released"] = {"S": first_released}
    transaction = Transaction()
    transaction.update(
        outbox_table(table),
        key.item(),
        f"SET #status = :pending, attempts = :zero, {REDRIVEN_AT} = :at, redriven_by = :actor, "
        f"redrive_reason = :reason, {GENERATION} = :next_generation{keep_release} "
        f"REMOVE {NEXT_ATTEMPT_AT}, {SWEEP_FAILURES}, {ENVELOPE_WAITS}, {LEASE_OWNER}, {LEASE_UNTIL}, "
        f"{RELEASED_AT}, {RELEASE_REASON}, {FAILED_INDEX_PARTITION_KEY}",
        label="row",
        **_as_read(row, values),
    )
    entry: dict[str, Any] = {
        **who,
        "action": {"S": Action.REDRIVE.value},
        "generation": {"N": str(generation_of(row))},
    }
    if risk is not None:
        entry["out_of_order"] = {"BOOL": True}
    _append_entry(transaction, table, key, row, entry)
    _commit(client, transaction, key)


def skip(
    client: Any, table: str, key: RowKey, *, reason: str, actor: str, now: datetime | None = None
) -> None:
    """The FAILED row leaves the table unpublished: its aggregate's later events may go."""
    who = _who(reason, actor, now)
    row = read_failed(client, table, key, whole=True)
    transaction = Transaction()
    transaction.delete(outbox_table(table), key.item(), label="row", **_as_read(row, {}))
    entry = {
        **who,
        "action": {"S": Action.SKIP.value},
        "generation": {"N": str(generation_of(row))},
        "row": {"M": _kept(row)},
    }
    _append_entry(transaction, table, key, row, entry)
    _commit(client, transaction, key)


def read_failed(client: Any, table: str, key: RowKey, *, whole: bool = False) -> Mapping[str, Any]:
    """The row at `key`, read consistently, if it is FAILED; raises ReleaseError otherwise."""
    arguments: dict[str, Any] = {"TableName": table, "Key": key.item(), "ConsistentRead": True}
    if not whole:
        arguments["ProjectionExpression"] = (
            f"#status, event_id, {GENERATION}, {RELEASED_AT}, {FIRST_RELEASED_AT}"
        )
        arguments["ExpressionAttributeNames"] = _NAMES
    row: Mapping[str, Any] | None = call("GetItem", client.get_item, **arguments).get("Item")
    if row is None or string_attribute(row, "status") != OutboxStatus.FAILED:
        raise ReleaseError(f"{_where(key)} is not FAILED: nothing changed")
    return row


def _as_read(row: Mapping[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """The condition that the row is still as read: FAILED, the same generation and event."""
    condition = "#status = :failed"
    values = {**values, ":failed": {"S": OutboxStatus.FAILED.value}}
    generation = stored_generation(row)
    if generation is not None:
        # As stored, also a value the outbox cannot read (another writer's): the row stays releasable.
        condition += f" AND {GENERATION} = :generation"
        values[":generation"] = dict(generation)
    else:
        condition += f" AND attribute_not_exists({GENERATION})"
    event_id = string_attribute(row, "event_id")
    if event_id is not None:
        condition += " AND event_id = :event_id"
        values[":event_id"] = {"S": event_id}
    return {"condition": condition, "names": _NAMES, "values": values}


def _append_entry(
    transaction: Transaction, table: str, key: RowKey, row: Mapping[str, Any], entry: Mapping[str, Any]
) -> None:
    values: dict[str, Any] = {":entry": {"L": [{"M": dict(entry)}]}, ":none": {"L": []}}
    expression = f"SET {AUDIT_ENTRIES} = list_append(if_not_exists({AUDIT_ENTRIES}, :none), :entry)"
    event_id = string_attribute(row, "event_id")
    if event_id is not None:
        expression += ", event_id = :event_id"
        values[":event_id"] = {"S": event_id}
    transaction.update(outbox_table(table), audit_key(key).item(), expression, label="audit", values=values)


def _commit(client: Any, transaction: Transaction, key: RowKey) -> None:
    try:
        DynamoDBTransactionExecutor(client).execute(transaction)
    except ConditionFailedError:
        raise ReleaseError(f"{_where(key)} changed meanwhile: nothing changed") from None


def _kept(row: Mapping[str, Any]) -> dict[str, Any]:
    """The skipped row as its audit entry keeps it: whole, or without its payload when the audit record would
    outgrow DynamoDB's item limit."""
    kept = {name: value for name, value in row.items() if name not in (PARTITION_KEY, SORT_KEY)}
    if item_size(kept) <= MAX_ITEM_BYTES - _ROOM_FOR_ENTRIES:
        return kept
    kept.pop("payload", None)
    kept["payload_omitted"] = {"BOOL": True}
    return kept


def _who(reason: str, actor: str, now: datetime | None) -> dict[str, dict[str, str]]:
    if not reason.strip():
        raise ReleaseError("a reason is required")
    if not actor.strip():
        raise ReleaseError("an actor (who releases it) is required")
    return {
        "at": {"S": format_timestamp(now or utc_now())},
        "by": {"S": truncate_error(actor)},
        "reason": {"S": truncate_error(reason)},
    }


def _where(key: RowKey) -> str:
    return f"{key.aggregate_key} seq {key.seq_text}"
