"""The UpdateItem form of each mark (outbox.row_marks): one conditional update of one row, the proven way
to mark (outbox.marking sends it for what PartiQL cannot say, and for everything once DynamoDB refuses the
PartiQL form)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from outbox.clock import format_timestamp
from outbox.model import (
    FAILED_INDEX_PARTITION_KEY,
    FIRST_RELEASED_AT,
    GENERATION,
    LEASE_OWNER,
    LEASE_UNTIL,
    NEXT_ATTEMPT_AT,
    PARTITION_KEY,
    PENDING_INDEX_PARTITION_KEY,
    RELEASE_REASON,
    RELEASED_AT,
    TTL_ATTRIBUTE,
    OutboxStatus,
    pending_shard,
    truncate_error,
)
from outbox.row_marks import NOT_RESTORED, Mark, PublishedMark, RestoredMark

_LEFT_PENDING = f"REMOVE {PENDING_INDEX_PARTITION_KEY}, {LEASE_OWNER}, {LEASE_UNTIL}, {NEXT_ATTEMPT_AT}"
_PUBLISHED_UPDATE = (
    f"SET #status = :published, published_at = :published_at, {TTL_ATTRIBUTE} = :expires_at "
    f"ADD attempts :attempts {_LEFT_PENDING}"
)
_FAILED = (
    f"SET #status = :failed, last_error = :last_error, failed_at = :at, {FAILED_INDEX_PARTITION_KEY} = :shard"
)
# A FAILED row is kept for an operator: it loses any TTL and publication time an earlier life left on it (a
# slot another writer rewrote after it was PUBLISHED).
_LEFT_FOR_AN_OPERATOR = f"{_LEFT_PENDING}, {TTL_ATTRIBUTE}, published_at"
_FAILED_UPDATE = f"{_FAILED} ADD attempts :attempts {_LEFT_FOR_AN_OPERATOR}"
_FAILED_AND_RELEASED_UPDATE = (
    f"{_FAILED}, {RELEASED_AT} = :at, {RELEASE_REASON} = :release_reason, "
    f"{FIRST_RELEASED_AT} = if_not_exists({FIRST_RELEASED_AT}, :at) "
    f"ADD attempts :attempts {_LEFT_FOR_AN_OPERATOR}"
)
_CONDITION = "#status = :pending"
_LEASED_CONDITION = f" AND {LEASE_OWNER} = :owner"
_FIRST_GENERATION = f" AND attribute_not_exists({GENERATION})"
_GENERATION = f" AND {GENERATION} = :generation"
_EVENT = " AND event_id = :event_id"
_NAMES = {"#status": "status"}


def update_of(mark: Mark, retention: timedelta) -> tuple[str, str, dict[str, str], dict[str, Any]]:
    """The mark's UpdateItem: its update expression, its condition, and their names and values."""
    if isinstance(mark, RestoredMark):
        return _restore(mark)
    values: dict[str, Any] = {
        ":pending": {"S": OutboxStatus.PENDING.value},
        ":attempts": {"N": str(mark.attempts)},
    }
    condition = _CONDITION
    if mark.lease_owner is not None:
        condition += _LEASED_CONDITION
        values[":owner"] = {"S": mark.lease_owner}
    if mark.generation == 0:
        condition += _FIRST_GENERATION
    else:
        condition += _GENERATION
        values[":generation"] = {"N": str(mark.generation)}
    if mark.event_id is not None:
        condition += _EVENT
        values[":event_id"] = {"S": mark.event_id}
    if isinstance(mark, PublishedMark):
        values[":published"] = {"S": OutboxStatus.PUBLISHED.value}
        values[":published_at"] = {"S": format_timestamp(mark.published_at)}
        values[":expires_at"] = {"N": str(int((mark.published_at + retention).timestamp()))}
        return _PUBLISHED_UPDATE, condition, _NAMES, values
    values[":failed"] = {"S": OutboxStatus.FAILED.value}
    values[":last_error"] = {"S": truncate_error(mark.error)}
    values[":at"] = {"S": format_timestamp(mark.failed_at)}
    values[":shard"] = {"N": str(pending_shard(mark.key.aggregate_key))}
    if mark.release_reason is None:
        return _FAILED_UPDATE, condition, _NAMES, values
    values[":release_reason"] = {"S": truncate_error(mark.release_reason)}
    return _FAILED_AND_RELEASED_UPDATE, condition, _NAMES, values


def _restore(mark: RestoredMark) -> tuple[str, str, dict[str, str], dict[str, Any]]:
    kept = [name for name in mark.image if name not in NOT_RESTORED]
    names = {"#status": "status", "#pk": PARTITION_KEY} | {f"#a{n}": name for n, name in enumerate(kept)}
    values: dict[str, Any] = {f":a{n}": mark.image[name] for n, name in enumerate(kept)}
    values |= {
        ":failed": {"S": OutboxStatus.FAILED.value},
        ":last_error": {"S": truncate_error(mark.error)},
        ":at": {"S": format_timestamp(mark.failed_at)},
        ":shard": {"N": str(pending_shard(mark.key.aggregate_key))},
    }
    restored = "".join(f", #a{n} = :a{n}" for n in range(len(kept)))
    return f"{_FAILED}{restored}", "attribute_not_exists(#pk)", names, values
