"""Leases: how the stream publisher and the sweeper keep from publishing one row at the same time.

A path claims a PENDING row before it publishes it: a conditional update that records who holds the row
(`lease_owner`) and until when (`lease_until`). The claim succeeds only if the row is still PENDING, no one
else holds an unexpired lease on it, and it is not backing off (`next_attempt_at`). It returns the row as
stored now, so the claimer publishes the row's current content (and skips the destinations that took it
already), not a stale image of it. A FAILED mark or a park of the row (outbox_publisher.row_updates) then
requires the same owner and drops the lease; a settle deletes the row, lease and all.

The stream publisher claims only rows that reach it late (close to the sweeper's grace); a fresh row is
published without a claim, inside a horizon that ends before the sweeper may look at it
(docs/publisher.md, "Order gate and sweeper"). The sweeper claims every row it publishes. A lease outlives
its holder's invocation by nothing: when the invocation is over, the lease has expired.

On an outbox across regions (outbox_publisher.regions), a claim carries a `Fence`: it refuses a row whose
`taken_by` names a region that still holds the row's origin (Claim.TAKEN), and a taker's claim stamps
`taken_by` with its own region in the same UpdateItem. Conditions are checked against this region's replica
only: the fence holds once the other region's writes replicated (docs/multi-region.md says what that leaves).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum
from typing import Any, NamedTuple, Protocol

from outbox.dynamodb import ConditionNotMetError, call
from outbox.model import (
    DELIVERED_TO,
    ENVELOPE_WAITS,
    IS_PENDING,
    LEASE_OWNER,
    LEASE_UNTIL,
    NEXT_ATTEMPT_AT,
    SWEEP_FAILURES,
    TAKEN_BY,
    OutboxStatus,
    RowKey,
    truncate_error,
)

STREAM_PUBLISHER = "stream-publisher"
"""The lease owner of the stream path: its retries of a shard (new invocations) may claim what it holds."""

_CLAIM_CONDITION = (
    IS_PENDING
    + f" AND (attribute_not_exists({LEASE_UNTIL}) OR {LEASE_UNTIL} < :now OR {LEASE_OWNER} = :owner)"
    f" AND (attribute_not_exists({NEXT_ATTEMPT_AT}) OR {NEXT_ATTEMPT_AT} <= :now)"
)
_HELD_CONDITION = f"{IS_PENDING} AND {LEASE_OWNER} = :owner"
_NAMES = {"#status": "status"}


class Lease(NamedTuple):
    """Who holds a row, until when (a NamedTuple, as outbox.model.RowKey: immutable, cheap to define)."""

    owner: str
    until: datetime

    @property
    def until_epoch(self) -> int:
        return math.ceil(self.until.timestamp())


class Fence(NamedTuple):
    """What a claim on an outbox across regions checks and writes of `taken_by`."""

    accepted: frozenset[str]
    """The `taken_by` values the row may hold: this region, and regions that no longer hold its origin."""
    stamp: str | None = None
    """This region, when it claims the row as the taker of its origin: written to `taken_by`."""


class Claim(StrEnum):
    CLAIMED = "claimed"
    NOT_PENDING = "not_pending"
    """It is FAILED now (or PUBLISHED, as an earlier release left it)."""
    LEASED = "leased"
    """Another path holds it now."""
    BACKING_OFF = "backing_off"
    """The sweeper is waiting before its next attempt."""
    MISSING = "missing"
    """The row is gone: its event is out (settled), or an operator skipped it."""
    TAKEN = "taken"
    """Another region claimed it as the taker of its origin and has not handed the origin back."""


class ClaimResult(NamedTuple):
    """One claim's answer."""

    claim: Claim
    row: Mapping[str, Any] | None = None
    """The row as stored now (after the claim, when claimed; as it was, otherwise)."""


class RowClaimer(Protocol):
    """Port: claims rows and backs them off. Raises an OutboxError if DynamoDB did not answer."""

    def claim(self, key: RowKey, lease: Lease, now: datetime, fence: Fence | None = None) -> ClaimResult:
        """`fence`: on an outbox across regions only (None: the single-region claim, unchanged)."""
        ...

    def back_off(
        self,
        key: RowKey,
        lease: Lease,
        *,
        attempts: int,
        next_attempt_at: datetime,
        error: str,
        delivered_to: frozenset[str] = frozenset(),
        counted: bool = True,
    ) -> bool:
        """Record a failed sweep (`attempts` tries, the destinations that took the event) and when to try
        again, and drop the lease; False if the lease was lost. `counted=False`: the reason and the wait only,
        the failure not counted towards giving up (the event was not tried)."""
        ...

    def release(self, key: RowKey, lease: Lease) -> bool:
        """Drop the lease of a row the holder did not get to (anyone may claim it at once); False if the
        lease was lost already."""
        ...


class DynamoDBRowClaimer:
    def __init__(self, client: Any, table_name: str) -> None:
        self._client = client
        self._table = table_name
        self.calls = 0

    def claim(self, key: RowKey, lease: Lease, now: datetime, fence: Fence | None = None) -> ClaimResult:
        expression = f"SET {LEASE_OWNER} = :owner, {LEASE_UNTIL} = :until"
        condition = _CLAIM_CONDITION
        values: dict[str, Any] = {
            ":pending": {"S": OutboxStatus.PENDING.value},
            ":owner": {"S": lease.owner},
            ":until": {"N": str(lease.until_epoch)},
            ":now": {"N": str(int(now.timestamp()))},
        }
        if fence is not None:
            takers = sorted(fence.accepted | ({fence.stamp} if fence.stamp else set()))
            names = [f":taker{index}" for index in range(len(takers))]
            values.update({name: {"S": taker} for name, taker in zip(names, takers, strict=True)})
            condition += f" AND (attribute_not_exists({TAKEN_BY}) OR {TAKEN_BY} IN ({', '.join(names)}))"
            if fence.stamp is not None:
                expression += f", {TAKEN_BY} = :stamp"
                values[":stamp"] = {"S": fence.stamp}
        try:
            response = self._update(key, expression, condition, values, ReturnValues="ALL_NEW")
        except ConditionNotMetError as failed:
            return ClaimResult(_why(failed.item, lease, now, fence), failed.item)
        return ClaimResult(Claim.CLAIMED, response.get("Attributes"))

    def back_off(
        self,
        key: RowKey,
        lease: Lease,
        *,
        attempts: int,
        next_attempt_at: datetime,
        error: str,
        delivered_to: frozenset[str] = frozenset(),
        counted: bool = True,
    ) -> bool:
        values: dict[str, Any] = {
            ":pending": {"S": OutboxStatus.PENDING.value},
            ":owner": {"S": lease.owner},
            ":next": {"N": str(math.ceil(next_attempt_at.timestamp()))},
            ":error": {"S": truncate_error(error)},
        }
        added = []
        values[":one"] = {"N": "1"}
        if counted:
            added += ["attempts :attempts", f"{SWEEP_FAILURES} :one"]
            values[":attempts"] = {"N": str(attempts)}
        else:
            added.append(f"{ENVELOPE_WAITS} :one")
        if delivered_to:
            added.append(f"{DELIVERED_TO} :delivered")
            values[":delivered"] = {"SS": sorted(delivered_to)}
        add = f"ADD {', '.join(added)} " if added else ""
        expression = f"SET {NEXT_ATTEMPT_AT} = :next, last_error = :error {add}"
        try:
            self._update(
                key,
                f"{expression}REMOVE {LEASE_OWNER}, {LEASE_UNTIL}",
                _HELD_CONDITION,
                values,
            )
        except ConditionNotMetError:
            return False
        return True

    def release(self, key: RowKey, lease: Lease) -> bool:
        try:
            self._update(
                key,
                f"REMOVE {LEASE_OWNER}, {LEASE_UNTIL}",
                _HELD_CONDITION,
                {":pending": {"S": OutboxStatus.PENDING.value}, ":owner": {"S": lease.owner}},
            )
        except ConditionNotMetError:
            return False
        return True

    def _update(
        self, key: RowKey, expression: str, condition: str, values: dict[str, Any], **extra: Any
    ) -> Any:
        self.calls += 1
        return call(
            "UpdateItem",
            self._client.update_item,
            TableName=self._table,
            Key=key.item(),
            UpdateExpression=expression,
            ConditionExpression=condition,
            ExpressionAttributeNames=_NAMES,
            ExpressionAttributeValues=values,
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
            **extra,
        )


def _why(row: Mapping[str, Any] | None, lease: Lease, now: datetime, fence: Fence | None = None) -> Claim:
    if not row:
        return Claim.MISSING
    if row.get("status", {"S": OutboxStatus.PENDING.value}).get("S") != OutboxStatus.PENDING:
        return Claim.NOT_PENDING
    taker = row.get(TAKEN_BY, {}).get("S")
    if fence is not None and taker is not None and taker not in fence.accepted and taker != fence.stamp:
        return Claim.TAKEN
    next_attempt = row.get(NEXT_ATTEMPT_AT, {}).get("N")
    if next_attempt is not None and float(next_attempt) > now.timestamp():
        return Claim.BACKING_OFF
    return Claim.LEASED
