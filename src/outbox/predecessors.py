"""What the order gate needs to know about an event's predecessor: is it out, or does it hold the aggregate?

The gate publishes event `seq` of an aggregate only once event `seq - 1` is resolved: PUBLISHED, released by
an operator, or gone with its TTL after being published. A predecessor that is PENDING or FAILED holds the
aggregate; one that was never written (a gap in `seq`) holds it too, visibly.

A missing row is told apart from an expired one by its lower neighbours: rows are published in `seq` order,
so their TTLs (published_at + retention) expire in `seq` order too. If the highest row below the missing one
is still there and not yet past its own expiry, the missing one cannot have expired: it was never written.
If no lower row is left at all, or the highest one is past its expiry (TTL deletion is lazy and unordered),
the missing row is taken as expired. So a writer whose FIRST event of an aggregate has `seq` > 1 is not
detected here (there is nothing below to compare with); every later gap is.

Reads are strongly consistent, in batches of 100 keys (one BatchGetItem call); only a missing predecessor
costs one more read (a Query for its highest lower neighbour).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from outbox.clock import Clock, utc_now
from outbox.dynamodb import translate_client_error
from outbox.errors import AwsUnavailableError, ThrottledError
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
_UNPROCESSED_ROUNDS = 3
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

    def states(self, keys: Sequence[RowKey]) -> dict[RowKey, PredecessorState]: ...


class DynamoDBPredecessorReader:
    def __init__(self, client: Any, table_name: str, *, clock: Clock = utc_now) -> None:
        self._client = client
        self._table = table_name
        self._clock = clock
        self.calls = 0

    def states(self, keys: Sequence[RowKey]) -> dict[RowKey, PredecessorState]:
        unique = sorted(set(keys))
        found: dict[RowKey, PredecessorState] = {}
        for start in range(0, len(unique), MAX_KEYS_PER_CALL):
            chunk = unique[start : start + MAX_KEYS_PER_CALL]
            rows = self._batch_get(chunk)
            for key in chunk:
                row = rows.get(key)
                found[key] = state_of(row) if row is not None else self._missing(key)
        return found

    def _batch_get(self, keys: Sequence[RowKey]) -> dict[RowKey, Mapping[str, Any]]:
        rows: dict[RowKey, Mapping[str, Any]] = {}
        request: dict[str, Any] = {
            self._table: {
                "Keys": [key.item() for key in keys],
                "ConsistentRead": True,
                "ProjectionExpression": _PROJECTION,
                "ExpressionAttributeNames": _NAMES,
            }
        }
        for _ in range(_UNPROCESSED_ROUNDS):
            response = self._call("BatchGetItem", self._client.batch_get_item, RequestItems=request)
            for row in response.get("Responses", {}).get(self._table, []):
                key = RowKey.of(row)
                if key is not None:
                    rows[key] = row
            request = response.get("UnprocessedKeys") or {}
            if not request:
                return rows
        # DynamoDB keeps answering "not now" for some keys: the gate cannot decide, so the caller stops.
        raise ThrottledError("BatchGetItem left keys unprocessed")

    def _missing(self, key: RowKey) -> PredecessorState:
        response = self._call(
            "Query",
            self._client.query,
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
        neighbour = lower[0]
        expires_at = neighbour.get(TTL_ATTRIBUTE, {}).get("N")
        published = state_of(neighbour) is PredecessorState.PUBLISHED
        if published and expires_at is not None and float(expires_at) <= self._now().timestamp():
            return PredecessorState.EXPIRED
        return PredecessorState.MISSING

    def _now(self) -> datetime:
        return self._clock()

    def _call(self, operation: str, method: Any, **arguments: Any) -> Any:
        self.calls += 1
        try:
            return method(**arguments)
        except ClientError as error:
            raise translate_client_error(error, operation) from error
        except BotoCoreError as error:
            raise AwsUnavailableError(f"{operation} did not answer: {type(error).__name__}") from error
