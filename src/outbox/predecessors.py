"""What the order gate needs to know about an event's predecessor: is it out, or does it hold the aggregate?

The gate publishes event `seq` of an aggregate only once event `seq - 1` is resolved: PUBLISHED, released by
an operator, or gone with its TTL after being published. A predecessor that is PENDING or FAILED holds the
aggregate; one that was never written (a gap in `seq`) holds it too, visibly.

A missing row is told apart from an expired one by its highest lower neighbour: the gate publishes in `seq`
order, so the missing row, had it been written and published, was published after that neighbour was
resolved, and expires no earlier than `published_retention` after that. The neighbour says when: a PUBLISHED
one by its own expiry (`expires_at`), a released FAILED one (skipped, or poisoned on a route that continues)
by `released_at` + retention. Before then, the missing row cannot have expired: it was never written. After
(TTL deletion is lazy and unordered), or with no lower row left at all, it is taken as expired. A neighbour
still PENDING or FAILED and unreleased has no successor out, so the missing row was never written. A writer
whose FIRST event of an aggregate has `seq` > 1 is not detected here (there is nothing below to compare
with); every later gap is. Rows deleted by hand defeat this: never delete an aggregate's rows but by TTL.

Reads are strongly consistent, in batches of 100 keys (one BatchGetItem call); only a missing predecessor
costs one more read (a Query for its highest lower neighbour).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, Protocol

from outbox.clock import Clock, parse_timestamp, utc_now
from outbox.dynamodb import batch_get_rows, call
from outbox.errors import OutOfTimeError
from outbox.marking import DEFAULT_PUBLISHED_RETENTION
from outbox.model import (
    PARTITION_KEY,
    RELEASED_AT,
    SORT_KEY,
    TTL_ATTRIBUTE,
    OutboxStatus,
    RowKey,
)

MAX_KEYS_PER_CALL = 100
"""BatchGetItem's limit."""
_NAMES = {"#status": "status", "#pk": PARTITION_KEY, "#sk": SORT_KEY}
_PROJECTION = f"#pk, #sk, #status, {TTL_ATTRIBUTE}, {RELEASED_AT}"


class PredecessorState(StrEnum):
    PUBLISHED = "published"
    RELEASED = "released"
    """FAILED, then released: skipped by an operator, or its route lets later events continue past it."""
    EXPIRED = "expired"
    """Gone: published and deleted by its TTL, as far as the table can tell (see the module docstring)."""
    PENDING = "pending"
    FAILED = "failed"
    MISSING = "missing"
    """Never written: a gap in `seq`."""

    @property
    def resolved(self) -> bool:
        """The successor may be published."""
        return self in {PredecessorState.PUBLISHED, PredecessorState.RELEASED, PredecessorState.EXPIRED}


def state_of(row: Mapping[str, Any]) -> PredecessorState:
    """The gate's view of a stored row."""
    status = row.get("status", {}).get("S")
    if status == OutboxStatus.PUBLISHED:
        return PredecessorState.PUBLISHED
    if status == OutboxStatus.PENDING:
        return PredecessorState.PENDING
    if RELEASED_AT in row:
        return PredecessorState.RELEASED
    # FAILED, or a status this library does not know: either way it holds its aggregate, visibly.
    return PredecessorState.FAILED


class PredecessorReader(Protocol):
    """Port: the state of each of these rows, read now. Raises an OutboxError if DynamoDB did not answer."""

    def states(
        self, keys: Sequence[RowKey], *, may_call: Callable[[], bool] = lambda: True
    ) -> dict[RowKey, PredecessorState]:
        """`may_call`: asked before each DynamoDB call; False stops the read (OutOfTimeError)."""
        ...


class DynamoDBPredecessorReader:
    def __init__(
        self,
        client: Any,
        table_name: str,
        *,
        clock: Clock = utc_now,
        published_retention: timedelta = DEFAULT_PUBLISHED_RETENTION,
    ) -> None:
        self._client = client
        self._table = table_name
        self._clock = clock
        self._retention = published_retention
        self.calls = 0

    def states(
        self, keys: Sequence[RowKey], *, may_call: Callable[[], bool] = lambda: True
    ) -> dict[RowKey, PredecessorState]:
        unique = sorted(set(keys))
        found: dict[RowKey, PredecessorState] = {}
        for start in range(0, len(unique), MAX_KEYS_PER_CALL):
            chunk = unique[start : start + MAX_KEYS_PER_CALL]
            rows = self._batch_get(chunk, may_call)
            for key in chunk:
                row = rows.get(key)
                found[key] = state_of(row) if row is not None else self._missing(key, may_call)
        return found

    def _batch_get(
        self, keys: Sequence[RowKey], may_call: Callable[[], bool]
    ) -> dict[RowKey, Mapping[str, Any]]:
        # DynamoDB answering "not now" for some keys round after round: the gate cannot decide
        # (ThrottledError), so the caller stops.
        return batch_get_rows(
            lambda **request: self._call("BatchGetItem", self._client.batch_get_item, may_call, **request),
            self._table,
            keys,
            projection=_PROJECTION,
            names=_NAMES,
        )

    def _missing(self, key: RowKey, may_call: Callable[[], bool]) -> PredecessorState:
        response = self._call(
            "Query",
            self._client.query,
            may_call,
            TableName=self._table,
            KeyConditionExpression="#pk = :key AND #sk < :seq",
            ExpressionAttributeNames=_NAMES,
            ExpressionAttributeValues={":key": {"S": key.aggregate_key}, ":seq": {"N": str(key.seq)}},
            ProjectionExpression=_PROJECTION,
            ScanIndexForward=False,
            Limit=1,
            ConsistentRead=True,
        )
        lower = response.get("Items", [])
        if not lower:
            return PredecessorState.EXPIRED
        earliest_expiry = self._earliest_successor_expiry(lower[0])
        if earliest_expiry is not None and earliest_expiry <= self._clock():
            return PredecessorState.EXPIRED
        return PredecessorState.MISSING

    def _earliest_successor_expiry(self, neighbour: Mapping[str, Any]) -> datetime | None:
        """The earliest a successor of `neighbour` can have expired; None if none can have been published."""
        state = state_of(neighbour)
        try:
            if state is PredecessorState.PUBLISHED:
                return datetime.fromtimestamp(float(neighbour[TTL_ATTRIBUTE]["N"]), UTC)
            if state is PredecessorState.RELEASED:
                return parse_timestamp(str(neighbour[RELEASED_AT]["S"])) + self._retention
        except (KeyError, TypeError, ValueError):
            return None  # not written by this library's rules: hold, visibly, rather than guess
        return None

    def _call(
        self, operation: str, method: Callable[..., Any], may_call: Callable[[], bool], **arguments: Any
    ) -> Any:
        if not may_call():
            raise OutOfTimeError(f"too little time left for {operation}")
        self.calls += 1
        return call(operation, method, **arguments)
