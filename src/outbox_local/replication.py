"""Replication between the replicas of a DynamoDB global table, one moto table per region under one name, as
global tables (version 2019.11.21, multi-region eventual consistency) replicate on AWS:

- asynchronous: a write reaches the other replicas `lag_s` after it was made (AWS: typically about a second),
  never before; per item, with no order across items (`order` shuffles each step's deliveries);
- last writer wins by the write's time, deletes included: a write that arrives after a newer one (or after a
  newer delete) of its item is dropped, so nothing is resurrected. The write times are kept here, per replica
  and item, never as attributes on the items (real global tables of this version add none);
- every replica's stream carries every write, wherever it was made: a replicated write lands in its replica
  through an ordinary boto3 write, so moto's stream records it as DynamoDB Streams would; a write that changes
  nothing, or that lost to a newer one, is not made (AWS writes no record for it);
- no echo: a replicated write, read back from its replica's stream, is not replicated again;
- `cut(region)` holds every write into and out of the region (they queue, as they would while a region is cut
  off) until `restore(region)`.

How: each replica's stream is read in this process (`outbox_local.moto_streams.InProcessStreams`, the named
module that reads moto's streams as the stream mappings do: record times with moto's microseconds, where
GetRecords over HTTP answers milliseconds, and no serializing). A record that is not the echo of a write made
here is a local write: its time is its `ApproximateCreationDateTime`, and it is queued for every other
replica. A delivery first reads the target's
item (consistently) and writes only if that item is still the version last known here: otherwise a local
write there is not read yet, and the delivery waits a step (that write, once read, may be the newer one). The
write itself is conditional on the item being what was just read, so a local write racing it makes it fail
and wait, never lost. What a condition cannot express: a local write landing between that read and the write
that keeps every attribute and adds one this table's stream never carried before (overwritten).

Driven step by step (`step()`, `drain()`: tests, the reliability harness) or on a thread of its own
(`start()`/`stop()`: the runtime). Its state (`state()`/`resume()`) is plain data a snapshot can hold.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from outbox_local.errors import LocalRuntimeError
from outbox_local.replica_items import (
    Delivery,
    Echo,
    ReplicatorState,
    Version,
    WriteTime,
    canonical,
    digest,
    unchanged,
)
from outbox_local.replica_streams import ReplicaStreams

__all__ = [
    "DEFAULT_LAG_S",
    "Delivery",
    "ReplicationError",
    "Replicator",
    "ReplicatorState",
    "Version",
    "WriteTime",
]

logger = logging.getLogger("outbox_local.replication")

DEFAULT_LAG_S = 1.0
"""AWS's typical replication delay between the regions of a global table."""
_NEW_IMAGE_VIEWS = frozenset({"NEW_IMAGE", "NEW_AND_OLD_IMAGES"})
_MAX_DRAIN_ROUNDS = 1000

Clients = Callable[[str], Any]
"""A region's DynamoDB client (the runtime's internal ones: no armed fault fails replication)."""


class ReplicationError(LocalRuntimeError):
    """A table cannot be replicated as asked (no stream with new images, a region it has no replica in)."""


@dataclass
class _Stats:
    replicated: int = 0
    """Writes made in a replica for a write made elsewhere."""
    superseded: int = 0
    """Deliveries dropped because the replica already held a newer write of the item (last writer wins)."""
    unchanged: int = 0
    """Deliveries that found the item already as written (nothing to write, no stream record)."""
    retried: int = 0
    """Deliveries put off a step: the replica's item had changed since last read (a local write)."""


@dataclass
class _Book:
    """The replicator's mutable state (under `Replicator._lock`)."""

    tables: dict[str, tuple[str, ...]] = field(default_factory=dict)
    positions: dict[tuple[str, str], str] = field(default_factory=dict)
    versions: dict[tuple[str, str, str], Version] = field(default_factory=dict)
    queue: dict[int, Delivery] = field(default_factory=dict)
    echoes: dict[tuple[str, str, str], list[Echo]] = field(default_factory=dict)
    cut: set[str] = field(default_factory=set)
    next_id: int = 1
    names: dict[str, set[str]] = field(default_factory=dict)
    """Per table, every attribute name its streams carried (a condition refuses an item holding one more)."""


class Replicator:
    def __init__(
        self,
        clients: Clients,
        *,
        lag_s: float = DEFAULT_LAG_S,
        clock: Callable[[], float] = time.time,
        order: random.Random | None = None,
        jitter_s: float = 0.0,
    ) -> None:
        """`clients(region)`: a DynamoDB client in that region; `lag_s`: how long after it was made a write
        reaches the other replicas (plus up to `jitter_s`, drawn from `order`, when given); `clock`: what
        "now" is for the lag (the writes' own times are moto's, wall-clock); `order`: shuffles the deliveries
        due at each step (no order across items); None: the order they were read in."""
        if lag_s < 0 or jitter_s < 0:
            raise ReplicationError("the replication lag and its jitter cannot be negative")
        self._clients = clients
        self.lag_s = lag_s
        self._clock = clock
        self._order = order
        self._jitter_s = jitter_s
        self._book = _Book()
        self._lock = threading.RLock()
        self._stats = _Stats()
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._stepping = threading.Lock()
        """One step at a time (the background thread and a caller's `drain()`)."""
        self._streams = ReplicaStreams(clients)

    # --- the tables replicated ------------------------------------------------------------------------------

    def add_table(self, table: str, regions: Sequence[str]) -> None:
        """Replicate `table` between its replicas in `regions` (each a moto table of that name with a stream
        of new images), from the first record of each replica's stream."""
        if len(set(regions)) != len(regions):
            raise ReplicationError(f"global table {table}: a region is named twice in {list(regions)}")
        for region in regions:
            description = self._clients(region).describe_table(TableName=table)["Table"]
            view = (description.get("StreamSpecification") or {}).get("StreamViewType")
            if view not in _NEW_IMAGE_VIEWS:
                raise ReplicationError(
                    f"global table {table}: the replica in {region} has no stream of new images "
                    f"(StreamViewType {view}): replication reads each write from its replica's stream"
                )
        with self._lock:
            self._book.tables[table] = tuple(regions)

    def remove_table(self, table: str) -> tuple[str, ...] | None:
        """Stop replicating `table`; its queued writes are dropped. Answers the regions it was replicated
        between (None: it was not)."""
        with self._lock:
            book = self._book
            regions = book.tables.pop(table, None)
            self._streams.forget(table)
            book.queue = {i: d for i, d in book.queue.items() if d.table != table}
            book.positions = {k: v for k, v in book.positions.items() if k[1] != table}
            book.versions = {k: v for k, v in book.versions.items() if k[1] != table}
            book.echoes = {k: v for k, v in book.echoes.items() if k[1] != table}
            return regions

    @property
    def tables(self) -> dict[str, tuple[str, ...]]:
        with self._lock:
            return dict(self._book.tables)

    # --- cutting a region off -------------------------------------------------------------------------------

    def cut(self, region: str) -> None:
        """Hold every write into and out of `region` (they queue) until `restore(region)`."""
        with self._lock:
            self._book.cut.add(region)

    def restore(self, region: str) -> None:
        """Let the writes held by `cut(region)` flow again (at the next step)."""
        with self._lock:
            self._book.cut.discard(region)

    def set_lag(self, lag_s: float) -> None:
        """Replicate `lag_s` after each write from now on, the writes queued included (a replication lag
        fault: raised, then brought back)."""
        if lag_s < 0:
            raise ReplicationError("the replication lag cannot be negative")
        with self._lock:
            self.lag_s = lag_s

    @property
    def cut_regions(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._book.cut)

    # --- driving it -----------------------------------------------------------------------------------------

    def poll(self) -> int:
        """Read what each replica's stream holds that was not read yet; answer how many local writes were
        queued for the other replicas."""
        queued = 0
        for table, regions in self.tables.items():
            for region in regions:
                queued += self._read_stream(table, region, regions)
        return queued

    def step(self, now: float | None = None) -> int:
        """Read every stream, then deliver each queued write that is due at `now` (the clock's by default) and
        whose regions are not cut. Answers how many deliveries were settled (written, superseded or found
        unchanged); a delivery whose replica changed since last read waits for the next step."""
        with self._stepping:
            self.poll()
            at = self._clock() if now is None else now
            return self._deliver(lambda delivery: self._due(delivery) <= at)

    def drain(self, max_rounds: int = _MAX_DRAIN_ROUNDS) -> int:
        """Deliver everything queued, the lag ignored, until nothing is left but what a cut holds; answers how
        many deliveries were settled. For tests and the reliability harness."""
        settled = 0
        with self._stepping:
            for _ in range(max_rounds):
                self.poll()
                if not self._deliverable(lambda _: True):
                    return settled
                settled += self._deliver(lambda _: True)
        raise ReplicationError(f"replication still busy after {max_rounds} rounds")

    def pending(self, region: str | None = None) -> int:
        """Writes queued (into or out of `region`, if given)."""
        with self._lock:
            return sum(
                1 for d in self._book.queue.values() if region is None or region in (d.source, d.target)
            )

    def next_due(self) -> float | None:
        """When the first queued write not held by a cut is due (None: none)."""
        with self._lock:
            due = [self._due(d) for d in self._book.queue.values() if not self._held(d)]
        return min(due) if due else None

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "replicated": self._stats.replicated,
                "superseded": self._stats.superseded,
                "unchanged": self._stats.unchanged,
                "retried": self._stats.retried,
                "pending": len(self._book.queue),
            }

    def start(self, interval_s: float = 0.05) -> None:
        """Step on a thread of its own every `interval_s` until `stop()`."""
        if self._thread is not None:
            return
        self._stopping.clear()

        def run() -> None:
            while not self._stopping.wait(interval_s):
                try:
                    self.step()
                except Exception:  # a replica being deleted mid-step, say: the next step goes on
                    logger.exception("replication step failed")

        self._thread = threading.Thread(target=run, name="outbox-local-replication", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    # --- state ----------------------------------------------------------------------------------------------

    def state(self) -> ReplicatorState:
        with self._lock:
            book = self._book
            return ReplicatorState(
                tables=dict(book.tables),
                positions=dict(book.positions),
                versions=dict(book.versions),
                queue=tuple(book.queue.values()),
                echoes={key: tuple(echoes) for key, echoes in book.echoes.items() if echoes},
                cut=frozenset(book.cut),
                next_id=book.next_id,
            )

    def reset(self) -> None:
        """Forget every table and write (a runtime starting again)."""
        with self._lock:
            self._book = _Book()
            self._streams.forget()

    def resume(self, state: ReplicatorState) -> None:
        """Take up a saved state (before `start()`): the streams are read on from where it had read them."""
        with self._lock:
            self._streams.forget()
            self._book = _Book(
                tables=dict(state.tables),
                positions=dict(state.positions),
                versions=dict(state.versions),
                queue={d.id: d for d in state.queue},
                echoes={key: list(echoes) for key, echoes in state.echoes.items()},
                cut=set(state.cut),
                next_id=state.next_id,
            )

    # --- internals ------------------------------------------------------------------------------------------

    def _read_stream(self, table: str, region: str, regions: Sequence[str]) -> int:
        queued = 0
        for records in self._streams.pages(table, region, self._book.positions.get((region, table))):
            with self._lock:
                if table not in self._book.tables:
                    return queued
                for record in records:
                    queued += self._take(table, region, regions, record)
                    self._book.positions[(region, table)] = record["dynamodb"]["SequenceNumber"]
        return queued

    def _take(self, table: str, region: str, regions: Sequence[str], record: Mapping[str, Any]) -> int:
        """One stream record of `region`'s replica: the echo of a write made here, or a local write, queued
        for every other replica."""
        book = self._book
        stream = record["dynamodb"]
        keys = stream["Keys"]
        key = canonical(keys)
        image = None if record["eventName"] == "REMOVE" else stream["NewImage"]
        written_digest = digest(image)
        if image is not None:
            book.names.setdefault(table, set()).update(image)
        where = (region, table, key)
        echoes = book.echoes.get(where, [])
        for echo in echoes:
            if echo.digest == written_digest:
                echoes.remove(echo)
                known = book.versions.get(where)
                if known is None or known.written < echo.written:
                    book.versions[where] = Version(echo.written, written_digest)
                return 0
        written = WriteTime(stream["ApproximateCreationDateTime"].timestamp(), region)
        book.versions[where] = Version(written, written_digest)
        for target in regions:
            if target == region:
                continue
            jitter = self._order.uniform(0, self._jitter_s) if self._order and self._jitter_s else 0.0
            delivery = Delivery(
                id=book.next_id,
                table=table,
                key=key,
                keys=keys,
                image=image,
                written=written,
                target=target,
                jitter=jitter,
            )
            book.next_id += 1
            book.queue[delivery.id] = delivery
        return len(regions) - 1

    def _due(self, delivery: Delivery) -> float:
        """When a queued write reaches its replica: the lag (as it is now) after it was made."""
        return delivery.written.at + self.lag_s + delivery.jitter

    def _held(self, delivery: Delivery) -> bool:
        cut = self._book.cut
        return delivery.source in cut or delivery.target in cut

    def _deliverable(self, due: Callable[[Delivery], bool]) -> list[Delivery]:
        with self._lock:
            ready = [d for d in self._book.queue.values() if due(d) and not self._held(d)]
        if self._order is not None:
            self._order.shuffle(ready)
        return ready

    def _deliver(self, due: Callable[[Delivery], bool]) -> int:
        settled = 0
        for delivery in self._deliverable(due):
            if self._apply(delivery):
                settled += 1
        return settled

    def _apply(self, delivery: Delivery) -> bool:
        """Settle one delivery: True once written, superseded or found unchanged; False when it waits (the
        replica changed since it was last read)."""
        where = (delivery.target, delivery.table, delivery.key)
        with self._lock:
            if delivery.id not in self._book.queue or self._held(delivery):
                return False
            known = self._book.versions.get(where)
            if known is not None and known.written >= delivery.written:
                return self._settle(delivery, "superseded")
        client = self._clients(delivery.target)
        item = client.get_item(TableName=delivery.table, Key=dict(delivery.keys), ConsistentRead=True).get(
            "Item"
        )
        new_digest = digest(delivery.image)
        with self._lock:
            if digest(item) != (known.digest if known is not None else None):
                self._stats.retried += 1  # a local write not read yet: read it first, it may be the newer
                return False
            if digest(item) == new_digest:
                self._book.versions[where] = Version(delivery.written, new_digest)
                return self._settle(delivery, "unchanged")
            echo = Echo(delivery.id, new_digest, delivery.written)
            # One echo per delivery: one made again after a restore replaces the one its snapshot held.
            echoes = [e for e in self._book.echoes.get(where, []) if e.delivery_id != delivery.id]
            self._book.echoes[where] = [*echoes, echo]
            names = set(self._book.names.get(delivery.table, ()))
        try:
            self._write(client, delivery, item, names)
        except ClientError as error:
            with self._lock:
                self._book.echoes[where] = [e for e in self._book.echoes.get(where, []) if e is not echo]
            if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            with self._lock:
                self._stats.retried += 1
            return False
        with self._lock:
            current = self._book.versions.get(where)
            if current is None or current.written < delivery.written:
                self._book.versions[where] = Version(delivery.written, new_digest)
            return self._settle(delivery, "replicated")

    def _settle(self, delivery: Delivery, outcome: str) -> bool:
        self._book.queue.pop(delivery.id, None)
        setattr(self._stats, outcome, getattr(self._stats, outcome) + 1)
        return True

    def _write(
        self, client: Any, delivery: Delivery, item: Mapping[str, Any] | None, names: Iterable[str]
    ) -> None:
        """The delivery's write, made only if the item is still `item` (None: absent)."""
        condition = unchanged(item, delivery.keys, names)
        if delivery.image is None:
            client.delete_item(TableName=delivery.table, Key=dict(delivery.keys), **condition)
        else:
            client.put_item(TableName=delivery.table, Item=dict(delivery.image), **condition)
