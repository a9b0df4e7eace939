"""The regions' own items in the outbox table (outbox_publisher.regions, docs/multi-region.md): heartbeats
and `#taken#` records, read and written on DynamoDB, and the stream publisher's cached view of its own
heartbeat.

Every call is one attempt on the caller's invocation client (outbox.aws: short connect and read timeouts), and
none starts with less than `UPDATE_CALL_MS` left of the caller's deadline (OutOfTimeError): as the rows'
updates, each ends inside the invocation. Failures are the library's typed errors (outbox.dynamodb.call).
Reads are strongly consistent, of the replica of the client's region: what was written there or replicated
into it, nothing more. The sweeper reads a taker's `#taken#` records on a store for the taker's region (its
own writes are all in its replica), every other item on its own region's.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any, Protocol

from outbox.clock import Clock, utc_now
from outbox.dynamodb import BATCH_GET_MAX_KEYS, UNPROCESSED_ROUNDS, call
from outbox.errors import OutOfTimeError, ThrottledError
from outbox.model import ORIGIN, TTL_ATTRIBUTE
from outbox_publisher.deadline import Deadline, NoDeadline
from outbox_publisher.dynamodb_rows import UPDATE_CALL_MS
from outbox_publisher.regions import (
    TAKEN_RECORD_DAYS,
    Heartbeat,
    Ownership,
    RegionSettings,
    RegionView,
    TakenRecord,
    heartbeat_key,
    ownership,
    taken_key,
    view_of,
)


class RegionStore(Protocol):
    """Port: the regions' items. Raises an OutboxError when DynamoDB did not answer (or no time was left)."""

    def read_heartbeats(self, regions: Iterable[str], deadline: Deadline) -> list[Heartbeat]: ...

    def write_heartbeat(self, heartbeat: Heartbeat, deadline: Deadline) -> None: ...

    def read_taken(self, aggregate_keys: Collection[str], deadline: Deadline) -> dict[str, TakenRecord]: ...

    def record_taken(
        self,
        aggregate_key: str,
        *,
        origin: str,
        by: str,
        seqs: Collection[int],
        published: bool,
        expires_at: int,
        deadline: Deadline,
    ) -> None:
        """Adds `seqs` to the record's `claimed` (before they are published) or `published` (after)."""
        ...


class DynamoDBRegionStore:
    def __init__(self, client: Any, table_name: str) -> None:
        self._client = client
        self._table = table_name
        self.calls = 0

    def read_heartbeats(self, regions: Iterable[str], deadline: Deadline) -> list[Heartbeat]:
        """Every region's heartbeat in one consistent BatchGetItem; a missing or malformed one is absent."""
        items = self._batch_get([heartbeat_key(region) for region in regions], deadline)
        return [beat for item in items if (beat := Heartbeat.from_item(item)) is not None]

    def write_heartbeat(self, heartbeat: Heartbeat, deadline: Deadline) -> None:
        self._check(deadline)
        self.calls += 1
        call("PutItem", self._client.put_item, TableName=self._table, Item=heartbeat.to_item())

    def read_taken(self, aggregate_keys: Collection[str], deadline: Deadline) -> dict[str, TakenRecord]:
        keys = sorted(set(aggregate_keys))
        records: dict[str, TakenRecord] = {}
        for start in range(0, len(keys), BATCH_GET_MAX_KEYS):
            chunk = [taken_key(key) for key in keys[start : start + BATCH_GET_MAX_KEYS]]
            for item in self._batch_get(chunk, deadline):
                record = TakenRecord.from_item(item)
                if record is not None:
                    records[record.aggregate_key] = record
        return records

    def record_taken(
        self,
        aggregate_key: str,
        *,
        origin: str,
        by: str,
        seqs: Collection[int],
        published: bool,
        expires_at: int,
        deadline: Deadline,
    ) -> None:
        self._check(deadline)
        self.calls += 1
        added = "published" if published else "claimed"
        call(
            "UpdateItem",
            self._client.update_item,
            TableName=self._table,
            Key=taken_key(aggregate_key),
            UpdateExpression=f"SET #origin = :origin, #by = :by, {TTL_ATTRIBUTE} = :expires ADD #seqs :seqs",
            ExpressionAttributeNames={"#origin": ORIGIN, "#by": "by", "#seqs": added},
            ExpressionAttributeValues={
                ":origin": {"S": origin},
                ":by": {"S": by},
                ":expires": {"N": str(expires_at)},
                ":seqs": {"NS": [str(seq) for seq in sorted(set(seqs))]},
            },
        )

    def _batch_get(self, keys: list[dict[str, Any]], deadline: Deadline) -> list[Mapping[str, Any]]:
        request: dict[str, Any] = {self._table: {"Keys": keys, "ConsistentRead": True}}
        items: list[Mapping[str, Any]] = []
        for _ in range(UNPROCESSED_ROUNDS):
            self._check(deadline)
            self.calls += 1
            response = call("BatchGetItem", self._client.batch_get_item, RequestItems=request)
            items.extend(response.get("Responses", {}).get(self._table, []))
            request = response.get("UnprocessedKeys") or {}
            if not request:
                return items
        raise ThrottledError(f"BatchGetItem left {len(request[self._table]['Keys'])} keys unprocessed")

    @staticmethod
    def _check(deadline: Deadline) -> None:
        if deadline.remaining_ms() < UPDATE_CALL_MS:
            raise OutOfTimeError("too little time left for a call on the regions' items")


def taken_expiry(settings: RegionSettings, now: datetime) -> int:
    """The TTL of a `#taken#` record written now (epoch seconds): refreshed by every write."""
    return math.ceil((now + settings.takeover_after + timedelta(days=TAKEN_RECORD_DAYS)).timestamp())


def read_view(store: RegionStore, settings: RegionSettings, now: datetime, deadline: Deadline) -> RegionView:
    return view_of(settings, store.read_heartbeats(settings.regions, deadline), now)


class CachedOwnership:
    """The stream publisher's ownership: its region's heartbeat as its sweeper last wrote it, read at most
    every `max_age` (outbox_publisher.regions.VIEW_MAX_AGE). The publisher writes no heartbeat: it follows
    its sweeper's decisions, and `Ownership.may_stream` refuses a heartbeat older than the fence."""

    def __init__(
        self,
        store: RegionStore,
        settings: RegionSettings,
        *,
        max_age: timedelta,
        clock: Clock = utc_now,
    ) -> None:
        self._store = store
        self._settings = settings
        self._max_age = max_age
        self._clock = clock
        self._read_at: datetime | None = None
        self._ownership: Ownership | None = None

    @property
    def settings(self) -> RegionSettings:
        return self._settings

    def current(self, deadline: Deadline | None = None) -> Ownership:
        """The ownership, read again when older than `max_age`. Raises an OutboxError when it must be read
        and DynamoDB did not answer: the caller hands its records back rather than guess."""
        now = self._clock()
        if self._ownership is None or self._read_at is None or now - self._read_at > self._max_age:
            view = read_view(self._store, self._settings, now, deadline or NoDeadline())
            self._ownership = ownership(view, view.own)
            self._read_at = now
        return self._ownership
