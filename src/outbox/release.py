"""Releasing an aggregate the order gate holds: an operator redrives or skips the event it waits behind.

A FAILED event holds its aggregate's later events (outbox_publisher.gate), and so does a missing one (a gap
in `seq`). Three ways out, each recorded on the row with who did it, when and why:

- `redrive`: the FAILED row becomes PENDING again (same `event_id`, payload as stored now: fix it first if
  it was the payload's fault), its attempts and the sweeper's cutoffs started afresh, its `generation`
  bumped (so no stale stream record of its first life can mark it: outbox.marking). The sweeper publishes
  it, through the gate, then the events behind it. If a later event of its aggregate may be out already
  (the row was released, or a later one was: `out_of_order_risk` says why), redriving it could publish it
  after that event, so that is refused unless `out_of_order=True`.
- `skip`: the FAILED row stays FAILED but is released: the gate lets its successors go. The event itself
  is never published.
- `skip_missing_predecessor`: on the PENDING row that waits behind a gap, record that its missing
  predecessor is released: the gate lets it go. Refused if the predecessor exists after all, or while the
  row below the gap is not out.

Each is one conditional write (a redrive of a released row first reads its aggregate's later rows): it
changes nothing unless the rows are in the state it expects, and says so with a typed error
(`ReleaseError`). Each appends an entry to the row's `audit` list (action, when, who, why), which no
operation ever shortens: the row keeps every redrive and skip of its event for as long as it exists.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from outbox.clock import format_timestamp, parse_timestamp, utc_now
from outbox.dynamodb import ConditionNotMetError, DynamoDBTransactionExecutor, batch_get_rows, call
from outbox.errors import ConditionFailedError, OutboxError
from outbox.model import (
    AUDIT,
    FAILED_INDEX_PARTITION_KEY,
    FIRST_RELEASED_AT,
    GENERATION,
    LEASE_OWNER,
    LEASE_UNTIL,
    NEXT_ATTEMPT_AT,
    PARTITION_KEY,
    PENDING_INDEX_PARTITION_KEY,
    PREDECESSOR_RELEASED_AT,
    REDRIVEN_AT,
    RELEASE_REASON,
    RELEASED_AT,
    RELEASED_BY,
    SORT_KEY,
    SWEEP_FAILURES,
    TTL_ATTRIBUTE,
    OutboxStatus,
    RowKey,
    outbox_table,
    pending_shard,
    string_attribute,
    truncate_error,
)
from outbox.transaction import Transaction

_NAMES = {"#status": "status"}
_AUDITED = f"{AUDIT} = list_append(if_not_exists({AUDIT}, :no_entries), :entry)"


class ReleaseError(OutboxError):
    """The row is not in the state the operation needs; nothing was changed."""


class Action(StrEnum):
    """What an audit entry records."""

    REDRIVE = "redrive"
    SKIP = "skip"
    SKIP_MISSING_PREDECESSOR = "skip_missing_predecessor"


# The shortest retention the publisher allows (PUBLISHED_RETENTION_DAYS >= 1): a later event published after a
# release cannot have expired sooner than this after it.
_SHORTEST_RETENTION = timedelta(days=1)
_CLOCK_MARGIN = timedelta(hours=1)


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
    """FAILED -> PENDING, back in the pending index; the sweeper publishes it (same `event_id`)."""
    now = now or utc_now()
    who = _who(reason, actor, now)
    row = _read(client, table, key)
    if row is None or row.get("status", {}).get("S") != OutboxStatus.FAILED:
        raise ReleaseError(f"{key.aggregate_key} seq {key.seq} is not FAILED: nothing changed")
    released = row.get(RELEASED_AT, {}).get("S")
    first_released = row.get(FIRST_RELEASED_AT, {}).get("S")
    risk = out_of_order_risk(client, table, key, released=released, first_released=first_released, now=now)
    if risk is not None and not out_of_order:
        raise ReleaseError(
            f"{key.aggregate_key} seq {key.seq}: {risk}; redriving it could publish it after a later event "
            "(allow it out of order to do so anyway); nothing changed"
        )
    values = {
        ":pending": {"S": OutboxStatus.PENDING.value},
        ":failed": {"S": OutboxStatus.FAILED.value},
        ":shard": {"N": str(pending_shard(key.aggregate_key))},
        ":zero": {"N": "0"},
        ":one": {"N": "1"},
        **who,
        **_entry(Action.REDRIVE, who, out_of_order=risk is not None),
    }
    expression = (
        f"SET #status = :pending, {PENDING_INDEX_PARTITION_KEY} = :shard, attempts = :zero, "
        f"{REDRIVEN_AT} = :at, redriven_by = :actor, redrive_reason = :reason, {_AUDITED} "
        f"ADD {GENERATION} :one "
        f"REMOVE {TTL_ATTRIBUTE}, {NEXT_ATTEMPT_AT}, {SWEEP_FAILURES}, {LEASE_OWNER}, {LEASE_UNTIL}, "
        f"{RELEASED_AT}, {RELEASED_BY}, {RELEASE_REASON}, {FAILED_INDEX_PARTITION_KEY}"
    )
    if released is None or out_of_order:
        # Unreleased, the row has held its aggregate all along (outbox_publisher.gate): nothing after it went.
        condition = "#status = :failed" + (
            "" if out_of_order else f" AND attribute_not_exists({RELEASED_AT})"
        )
        _update(
            client, table, key, expression=expression, condition=condition, values=values, expected="FAILED"
        )
        return
    # Released, nothing after it yet: the same write takes the release back and checks that no successor
    # appeared meanwhile (one written now waits for this row again).
    values[":released"] = {"S": released}
    transaction = Transaction()
    transaction.condition_check(
        outbox_table(table),
        RowKey(key.aggregate_key, key.seq + 1).item(),
        f"attribute_not_exists({PARTITION_KEY})",
        label="successor",
    )
    transaction.update(
        outbox_table(table),
        key.item(),
        expression,
        label="row",
        condition=f"#status = :failed AND {RELEASED_AT} = :released",
        names=_NAMES,
        values=values,
    )
    try:
        DynamoDBTransactionExecutor(client).execute(transaction)
    except ConditionFailedError as failed:
        what = (
            "a later event was written meanwhile" if failed.action == "successor" else "it changed meanwhile"
        )
        raise ReleaseError(f"{key.aggregate_key} seq {key.seq}: {what}; nothing changed") from None


def out_of_order_risk(
    client: Any,
    table: str,
    key: RowKey,
    *,
    released: str | None,
    first_released: str | None,
    now: datetime,
) -> str | None:
    """Why redriving the FAILED row `key` could publish it after a later event of its aggregate, or None.

    `released` is its `released_at` now, `first_released` its `first_released_at` (kept through redrives).
    A later event may be out when a later row is PUBLISHED, or released itself, or past a released gap; when
    this row is released now and any later row exists (the gate may be publishing it); and when this row was
    ever released longer ago than the shortest retention, less an hour for the operator's clock (a later event
    may have been published and expired since). A row never released, with nothing of that after it, has
    held its aggregate all along."""
    for later, item in _later_rows(client, table, key):
        status = str(item.get("status", {}).get("S", "unknown"))
        if status == OutboxStatus.PUBLISHED:
            return f"seq {later.seq} of its aggregate is PUBLISHED"
        if RELEASED_AT in item or PREDECESSOR_RELEASED_AT in item:
            return f"seq {later.seq} of its aggregate was released, so events after it may be out"
        if released is not None:
            return f"seq {later.seq} of its aggregate exists ({status}) and may be on its way out"
    return _expiry_risk(first_released or released, now)


def _expiry_risk(released: str | None, now: datetime) -> str | None:
    if released is None:
        return None
    try:
        released_at = parse_timestamp(released)
    except ValueError:
        return "its release time cannot be read"
    if now - released_at >= _SHORTEST_RETENTION - _CLOCK_MARGIN:
        return f"it was released at {released}: a later event may have been published and expired since"
    return None


def _later_rows(client: Any, table: str, key: RowKey) -> Iterator[tuple[RowKey, Mapping[str, Any]]]:
    """The aggregate's rows after `key`, in `seq` order, read consistently (keys and release attributes)."""
    arguments: dict[str, Any] = {
        "TableName": table,
        "KeyConditionExpression": "#pk = :pk AND #sk > :seq",
        "ProjectionExpression": f"#pk, #sk, #status, {RELEASED_AT}, {PREDECESSOR_RELEASED_AT}",
        "ExpressionAttributeNames": {**_NAMES, "#pk": PARTITION_KEY, "#sk": SORT_KEY},
        "ExpressionAttributeValues": {":pk": {"S": key.aggregate_key}, ":seq": {"N": str(key.seq)}},
        "ConsistentRead": True,
    }
    while True:
        page = call("Query", client.query, **arguments)
        for item in page.get("Items", []):
            found = RowKey.of(item)
            if found is not None:
                yield found, item
        if "LastEvaluatedKey" not in page:
            return
        arguments["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def skip(
    client: Any, table: str, key: RowKey, *, reason: str, actor: str, now: datetime | None = None
) -> None:
    """Release a FAILED row without publishing it: its aggregate's later events may go."""
    who = _who(reason, actor, now)
    _update(
        client,
        table,
        key,
        expression=f"SET {RELEASED_AT} = :at, {RELEASED_BY} = :actor, {RELEASE_REASON} = :reason, "
        f"{_AUDITED}, {FIRST_RELEASED_AT} = if_not_exists({FIRST_RELEASED_AT}, :at)",
        condition=f"#status = :failed AND attribute_not_exists({RELEASED_AT})",
        values={":failed": {"S": OutboxStatus.FAILED.value}, **who, **_entry(Action.SKIP, who)},
        expected="FAILED and not yet released",
    )


def skip_missing_predecessor(
    client: Any, table: str, key: RowKey, *, reason: str, actor: str, now: datetime | None = None
) -> None:
    """On the PENDING row `key`: its predecessor (`seq - 1`), never written, is released. Refused if the
    predecessor exists after all (then redrive or skip it), and while the highest row below the gap is not
    out (PENDING, or FAILED and unreleased): releasing the gap would let `key` go before it. One transaction
    checks all three."""
    if key.seq <= 1:
        raise ReleaseError(_no_predecessor(key))
    keys = outbox_table(table)
    transaction = Transaction()
    transaction.condition_check(
        keys, key.predecessor.item(), f"attribute_not_exists({PARTITION_KEY})", label="predecessor"
    )
    below = _highest_below(client, table, key.predecessor)
    if below is not None:
        transaction.condition_check(
            keys,
            below[0].item(),
            f"#status = :published OR attribute_exists({RELEASED_AT})",
            label="below",
            names=_NAMES,
            values={":published": {"S": OutboxStatus.PUBLISHED.value}},
        )
    who = _who(reason, actor, now)
    transaction.update(
        keys,
        key.item(),
        f"SET {PREDECESSOR_RELEASED_AT} = :at, {RELEASED_BY} = :actor, {RELEASE_REASON} = :reason, "
        f"{_AUDITED}",
        label="row",
        condition="#status = :pending",
        names=_NAMES,
        values={
            ":pending": {"S": OutboxStatus.PENDING.value},
            **who,
            **_entry(Action.SKIP_MISSING_PREDECESSOR, who),
        },
    )
    try:
        DynamoDBTransactionExecutor(client).execute(transaction)
    except ConditionFailedError as failed:
        if failed.action == "predecessor":
            why = _predecessor_exists(key)
        elif failed.action == "below" and below is not None:
            why = _below_not_out(key, below[0])
        else:
            why = _not_pending(key)
        raise ReleaseError(f"{why}; nothing changed") from None


def missing_predecessor_refusal(client: Any, table: str, key: RowKey) -> str | None:
    """Why releasing the missing predecessor of the PENDING row `key` would be refused now, or None: what
    `skip_missing_predecessor`'s transaction checks, read without writing (a dry run)."""
    if key.seq <= 1:
        return _no_predecessor(key)
    rows = batch_get_rows(
        lambda **request: call("BatchGetItem", client.batch_get_item, **request),
        table,
        [key.predecessor, key],
        projection="#pk, #sk, #status",
        names={**_NAMES, "#pk": PARTITION_KEY, "#sk": SORT_KEY},
    )
    if key.predecessor in rows:
        return _predecessor_exists(key)
    if string_attribute(rows.get(key), "status") != OutboxStatus.PENDING:
        return _not_pending(key)
    below = _highest_below(client, table, key.predecessor)
    if below is not None and not _out(below[1]):
        return _below_not_out(key, below[0])
    return None


def _no_predecessor(key: RowKey) -> str:
    return f"{key.aggregate_key} seq {key.seq} has no predecessor to release"


def _predecessor_exists(key: RowKey) -> str:
    return f"{key.aggregate_key} seq {key.seq - 1} exists, it is not missing: redrive or skip it instead"


def _not_pending(key: RowKey) -> str:
    return f"{key.aggregate_key} seq {key.seq} is not PENDING: nothing waits behind seq {key.seq - 1}"


def _below_not_out(key: RowKey, below: RowKey) -> str:
    return (
        f"{key.aggregate_key} seq {below.seq}, below the gap, is not out (PENDING, or FAILED and not "
        f"released): seq {key.seq} must wait for it; redrive or skip it first"
    )


def _out(row: Mapping[str, Any]) -> bool:
    """PUBLISHED, or released: what lets the events after it go (the condition `skip_missing_predecessor`
    checks on the row below the gap)."""
    return string_attribute(row, "status") == OutboxStatus.PUBLISHED or RELEASED_AT in row


def _highest_below(client: Any, table: str, key: RowKey) -> tuple[RowKey, Mapping[str, Any]] | None:
    """The aggregate's highest row below `key` (its key, status and release), read consistently, or None."""
    page = call(
        "Query",
        client.query,
        TableName=table,
        KeyConditionExpression="#pk = :pk AND #sk < :seq",
        ProjectionExpression=f"#pk, #sk, #status, {RELEASED_AT}",
        ExpressionAttributeNames={**_NAMES, "#pk": PARTITION_KEY, "#sk": SORT_KEY},
        ExpressionAttributeValues={":pk": {"S": key.aggregate_key}, ":seq": {"N": str(key.seq)}},
        ConsistentRead=True,
        ScanIndexForward=False,
        Limit=1,
    )
    for item in page.get("Items", []):
        found = RowKey.of(item)
        if found is not None:
            return found, item
    return None


def _who(reason: str, actor: str, now: datetime | None) -> dict[str, dict[str, str]]:
    if not reason.strip():
        raise ReleaseError("a reason is required")
    if not actor.strip():
        raise ReleaseError("an actor (who releases it) is required")
    return {
        ":at": {"S": format_timestamp(now or utc_now())},
        ":actor": {"S": truncate_error(actor)},
        ":reason": {"S": truncate_error(reason)},
    }


def _entry(action: Action, who: dict[str, dict[str, str]], *, out_of_order: bool = False) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "action": {"S": action.value},
        "at": who[":at"],
        "by": who[":actor"],
        "reason": who[":reason"],
    }
    if out_of_order:
        entry["out_of_order"] = {"BOOL": True}
    return {":entry": {"L": [{"M": entry}]}, ":no_entries": {"L": []}}


def _read(client: Any, table: str, key: RowKey) -> dict[str, Any] | None:
    response = call(
        "GetItem",
        client.get_item,
        TableName=table,
        Key=key.item(),
        ConsistentRead=True,
        ProjectionExpression=f"#status, {RELEASED_AT}, {FIRST_RELEASED_AT}",
        ExpressionAttributeNames=_NAMES,
    )
    item: dict[str, Any] | None = response.get("Item")
    return item


def _update(
    client: Any,
    table: str,
    key: RowKey,
    *,
    expression: str,
    condition: str,
    values: dict[str, Any],
    expected: str,
) -> None:
    try:
        call(
            "UpdateItem",
            client.update_item,
            TableName=table,
            Key=key.item(),
            UpdateExpression=expression,
            ConditionExpression=condition,
            ExpressionAttributeNames=_NAMES,
            ExpressionAttributeValues=values,
        )
    except ConditionNotMetError:
        raise ReleaseError(f"{key.aggregate_key} seq {key.seq} is not {expected}: nothing changed") from None
