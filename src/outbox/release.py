"""Releasing an aggregate the order gate holds: an operator redrives or skips the event it waits behind.

A FAILED event holds its aggregate's later events (outbox_publisher.gate), and so does a missing one (a gap
in `seq`). Three ways out, each recorded on the row with who did it, when and why:

- `redrive`: the FAILED row becomes PENDING again (same `event_id`, payload as stored now: fix it first if
  it was the payload's fault), its attempts and the sweeper's cutoffs started afresh. The sweeper publishes
  it, through the gate, then the events behind it. A row already released (skipped, or poisoned on a route
  that continues past poison) may have successors out already: redriving it would publish it after them,
  so that takes `out_of_order=True`.
- `skip`: the FAILED row stays FAILED but is released: the gate lets its successors go. The event itself
  is never published.
- `skip_missing_predecessor`: on the PENDING row that waits behind a gap, record that its missing
  predecessor is released: the gate lets it go. Refused if the predecessor exists after all.

Each is one conditional write: it changes nothing unless the rows are in the state it expects, and says so
with a typed error (`ReleaseError`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from outbox.clock import format_timestamp, utc_now
from outbox.dynamodb import ConditionNotMetError, DynamoDBTransactionExecutor, call
from outbox.errors import ConditionFailedError, OutboxError
from outbox.model import (
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
    SWEEP_FAILURES,
    TTL_ATTRIBUTE,
    OutboxStatus,
    RowKey,
    outbox_table,
    pending_shard,
    truncate_error,
)
from outbox.transaction import Transaction

_NAMES = {"#status": "status"}


class ReleaseError(OutboxError):
    """The row is not in the state the operation needs; nothing was changed."""


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
    in_order = "" if out_of_order else f" AND attribute_not_exists({RELEASED_AT})"
    _update(
        client,
        table,
        key,
        expression=f"SET #status = :pending, {PENDING_INDEX_PARTITION_KEY} = :shard, attempts = :zero, "
        f"{REDRIVEN_AT} = :at, redriven_by = :actor, redrive_reason = :reason "
        f"REMOVE {TTL_ATTRIBUTE}, {NEXT_ATTEMPT_AT}, {SWEEP_FAILURES}, {LEASE_OWNER}, {LEASE_UNTIL}, "
        f"{RELEASED_AT}, {RELEASED_BY}, {RELEASE_REASON}",
        condition=f"#status = :failed{in_order}",
        values={
            ":pending": {"S": OutboxStatus.PENDING.value},
            ":failed": {"S": OutboxStatus.FAILED.value},
            ":shard": {"N": str(pending_shard(key.aggregate_key))},
            ":zero": {"N": "0"},
            **_who(reason, actor, now),
        },
        expected="FAILED"
        if out_of_order
        else "FAILED and unreleased (pass out_of_order=True to redrive a released row)",
    )


def skip(
    client: Any, table: str, key: RowKey, *, reason: str, actor: str, now: datetime | None = None
) -> None:
    """Release a FAILED row without publishing it: its aggregate's later events may go."""
    _update(
        client,
        table,
        key,
        expression=f"SET {RELEASED_AT} = :at, {RELEASED_BY} = :actor, {RELEASE_REASON} = :reason",
        condition=f"#status = :failed AND attribute_not_exists({RELEASED_AT})",
        values={":failed": {"S": OutboxStatus.FAILED.value}, **_who(reason, actor, now)},
        expected="FAILED and not yet released",
    )


def skip_missing_predecessor(
    client: Any, table: str, key: RowKey, *, reason: str, actor: str, now: datetime | None = None
) -> None:
    """On the PENDING row `key`: its predecessor (`seq - 1`), never written, is released. Refused if the
    predecessor exists after all (then redrive or skip it): one transaction checks both."""
    if key.seq <= 1:
        raise ReleaseError(f"{key.aggregate_key} seq {key.seq} has no predecessor to release")
    keys = outbox_table(table)
    transaction = Transaction()
    transaction.condition_check(
        keys, key.predecessor.item(), f"attribute_not_exists({PARTITION_KEY})", label="predecessor"
    )
    transaction.update(
        keys,
        key.item(),
        f"SET {PREDECESSOR_RELEASED_AT} = :at, {RELEASED_BY} = :actor, {RELEASE_REASON} = :reason",
        label="row",
        condition="#status = :pending",
        names=_NAMES,
        values={":pending": {"S": OutboxStatus.PENDING.value}, **_who(reason, actor, now)},
    )
    try:
        DynamoDBTransactionExecutor(client).execute(transaction)
    except ConditionFailedError as failed:
        if failed.action == "predecessor":
            raise ReleaseError(
                f"{key.aggregate_key} seq {key.seq - 1} exists, it is not missing: redrive or skip it "
                "instead; nothing changed"
            ) from None
        raise ReleaseError(f"{key.aggregate_key} seq {key.seq} is not PENDING: nothing changed") from None


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
