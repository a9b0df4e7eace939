"""What the order gate needs to know about an event's predecessor: is it out, or does it hold the aggregate?

The table holds exactly the events that are not out yet, so the answer is the predecessor's row: absent, it
is out (published and settled, or skipped by an operator); PENDING, it is on its way and the aggregate waits;
FAILED, it holds the aggregate until an operator redrives or skips it, unless its route lets later events go
on past poison (`released_at`). A row of an earlier release that kept published rows (PUBLISHED) is out.

What absence cannot tell: an event that was never written (a gap in `seq`) reads as out, and so does a row
another writer deleted. Writers keep the contract (docs/contracts.md, "Outbox row"): commit `seq` n + 1 only
after `seq` n, never delete a row; an inbox consumer in `strict` mode sees a gap and waits for it.

Reads are strongly consistent, in batches of 100 keys (one BatchGetItem call).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum
from typing import Any, Protocol

from outbox.dynamodb import BATCH_GET_MAX_KEYS, batch_get_rows, call
from outbox.errors import OutOfTimeError
from outbox.model import PARTITION_KEY, RELEASED_AT, SORT_KEY, OutboxStatus, RowKey

_NAMES = {"#status": "status", "#pk": PARTITION_KEY, "#sk": SORT_KEY}
_PROJECTION = f"#pk, #sk, #status, {RELEASED_AT}"


class PredecessorState(StrEnum):
    OUT = "out"
    """Not in the table (or PUBLISHED by an earlier release, or FAILED on a route that continues past
    poison): the successor may go."""
    PENDING = "pending"
    FAILED = "failed"

    @property
    def resolved(self) -> bool:
        """The successor may be published."""
        return self is PredecessorState.OUT


def state_of(row: Mapping[str, Any] | None) -> PredecessorState:
    """The gate's view of a row as stored (None: not in the table)."""
    if row is None:
        return PredecessorState.OUT
    status = row.get("status", {}).get("S")
    if status == OutboxStatus.PENDING or "status" not in row:
        return PredecessorState.PENDING  # a row without a status is read as PENDING (OutboxEvent.from_item)
    if status == OutboxStatus.PUBLISHED or RELEASED_AT in row:
        return PredecessorState.OUT
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
    def __init__(self, client: Any, table_name: str) -> None:
        self._client = client
        self._table = table_name
        self.calls = 0

    def states(
        self, keys: Sequence[RowKey], *, may_call: Callable[[], bool] = lambda: True
    ) -> dict[RowKey, PredecessorState]:
        unique = sorted(set(keys))
        found: dict[RowKey, PredecessorState] = {}
        for start in range(0, len(unique), BATCH_GET_MAX_KEYS):
            chunk = unique[start : start + BATCH_GET_MAX_KEYS]
            # DynamoDB answering "not now" for some keys round after round: the gate cannot decide
            # (ThrottledError), so the caller stops.
            rows = batch_get_rows(
                lambda **request: self._call(may_call, **request),
                self._table,
                chunk,
                projection=_PROJECTION,
                names=_NAMES,
            )
            found.update((key, state_of(rows.get(key))) for key in chunk)
        return found

    def _call(self, may_call: Callable[[], bool], **request: Any) -> Any:
        if not may_call():
            raise OutOfTimeError("too little time left for BatchGetItem")
        self.calls += 1
        return call("BatchGetItem", self._client.batch_get_item, **request)
