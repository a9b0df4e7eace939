"""One outbox across two regions (issue 34, docs/multi-region.md) in one process, on the virtual clock: what
the two-region proof (tests/integration/regions) and the region schedules (tests.reliability.region_schedules)
run.

Real product code on real boto3 clients against moto in process (`mock_aws`), per region:

- the outbox table (tests.support.aws.create_tables: its NEW_AND_OLD_IMAGES stream), one replica per region,
  kept in step by the local runtime's `Replicator` (outbox_local.replication: asynchronous, per item, last
  writer wins by write time, deletes included, every replica's stream carrying every write), stepped every
  virtual second, and slowed by the lag faults (tests.reliability.region_replication);
- the writer (`OutboxWriter(origin=region)`, one transaction per event) of an `Account` aggregate family whose
  events no consumer reads: each aggregate is written in one region (its home), seq 1, 2, ...;
- the publisher and the sweeper, wired as deployed, with the region's own destinations: a topic and a bus
  (tests.reliability.region_side). A consumer of the outbox listens to both regions'
  topics (or buses): the promise is checked on their union (`Publication.destination` is the service, the
  region is the publishing function's, `region_of`).

`cut(region)` is a region cut off: its functions stop (no mapping poll, no schedule), its writer refuses,
and the replicator holds every write into and out of it; `restore(region)` brings it back. What each peer's
replica held of the events at a cut is kept (`Cut.peer_events`): a peer publishing again an event the cut
region had published, whose row (its settle not replicated) the peer still held, is the documented in-flight
duplicate (`CAUSE_CUT_IN_FLIGHT`), and only that is.

The single-region system's parts are shared, not copied: the wire (faults, crash points, the record of what
went out), the virtual Lambda context, the stream wrapper on the virtual clock, the invariant checker (what
the promise means on two regions: tests.reliability.region_oracle).
"""

from __future__ import annotations

import logging
import random
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from moto import mock_aws

from outbox.dynamodb import DynamoDBTransactionExecutor
from outbox.model import OutboxEvent, RowKey
from outbox.transaction import Transaction
from outbox.writer import OutboxWriter
from outbox_local.moto_transactions import atomic_transactions
from outbox_ops.release import skip
from tests.reliability import region_oracle, stepping
from tests.reliability.invariants import Committed, History, Verdict, check
from tests.reliability.region_replication import Replication
from tests.reliability.region_side import (
    AGGREGATE_TYPE,
    EVENT_TYPE,
    LATE_REPLICA,
    REGIONS,
    TAKEOVER_AFTER_S,
    Beat,
    RegionSide,
    region_of,
)
from tests.reliability.system import _QUIET
from tests.reliability.wire import Wire
from tests.support.clock import FakeClock, RecordingSleep

__all__ = ["LATE_REPLICA", "REGIONS", "TAKEOVER_AFTER_S", "Cut", "TwoRegions", "region_of", "two_regions"]


@dataclass
class Cut:
    """A region cut off, and what each peer's replica held of the events then."""

    region: str
    at: float
    peer_events: dict[str, frozenset[str]]
    until: float | None = None


class TwoRegions:
    def __init__(self, *, seed: int = 0) -> None:
        self.clock = FakeClock()
        self.sleep = RecordingSleep(self.clock)
        self.wire = Wire(self.clock.seconds)
        self.random = random.Random(seed)  # noqa: S311 - a schedule's choices, not secrets
        self._ids = random.Random(seed ^ 0x5EED)  # noqa: S311 - deterministic ids for a replayable run
        self.beats: list[Beat] = []
        self.late_replicas: Counter[str] = Counter()
        self.duplicates_avoided: Counter[str] = Counter()
        self.sides = {region: RegionSide(self, region) for region in REGIONS}
        self.replication = Replication(
            {region: side.admin["dynamodb"] for region, side in self.sides.items()},
            self.sides[REGIONS[0]].table,
            REGIONS,
            self.clock,
            seed=seed ^ 0x5EB,
        )
        self.replicator = self.replication.replicator
        """The local runtime's replicator itself (a test steps, cuts or reads it)."""
        self.committed: dict[str, Committed] = {}
        self.origins: dict[str, str] = {}
        """event_id -> whose row it is: its writer's region, or the home region for a row without origin."""
        self.seqs: Counter[str] = Counter()
        """aggregate_id -> its last seq written."""
        self.writes_refused = 0
        self.cuts: list[Cut] = []
        self.failed_reasons: dict[str, str] = {}
        self.operator_actions: Counter[str] = Counter()

    # --- the writers ----------------------------------------------------------------------------------------

    def write(
        self, region: str, aggregate_id: str, *, age_s: float = 0.0, stamped: bool = True
    ) -> str | None:
        """The next event of `aggregate_id`, saved in `region` (its origin) by the real writer; None when the
        region is cut off (its service is down: the client gets an error). `age_s`: its `occurred_at` that
        much in the past (a write whose stream record comes late: the publisher claims it first). Not
        `stamped`: a writer that sets no `origin` (another writer's rows: the home region's)."""
        side = self.sides[region]
        if side.cut:
            self.writes_refused += 1
            return None
        seq = self.seqs[aggregate_id] + 1
        event = OutboxEvent.new(
            aggregate_type=AGGREGATE_TYPE,
            aggregate_id=aggregate_id,
            seq=seq,
            event_type=EVENT_TYPE,
            payload={"account": aggregate_id, "n": seq, "in": region},
            clock=lambda: self.clock() - timedelta(seconds=age_s),
            new_id=lambda: uuid.UUID(int=self._ids.getrandbits(128), version=4),
        )
        transaction = Transaction()
        OutboxWriter(side.table, origin=region if stamped else None).append(transaction, event)
        DynamoDBTransactionExecutor(side.admin["dynamodb"]).execute(transaction)
        self.seqs[aggregate_id] = seq
        self.origins[event.event_id] = region if stamped else REGIONS[0]
        self.committed[event.event_id] = Committed(
            aggregate_key=event.aggregate_key,
            seq=seq,
            event_id=event.event_id,
            event_type=EVENT_TYPE,
            payload=event.payload_json,
        )
        return event.event_id

    # --- regions cut off ------------------------------------------------------------------------------------

    def cut(self, region: str, *, replication_after_s: float = 0.0, partial: bool = False) -> None:
        """`region` is cut off: its functions stop, its writer refuses, replication into and out of it
        queues (`replication_after_s` later: an outage that stops the functions first, while the region's
        last writes, which its publisher never got to, still replicate; with `partial`, a random half of
        them does not make it: per item, no order across items, as global tables replicate)."""
        side = self.sides[region]
        if side.cut:
            return
        side.cut = True
        if replication_after_s > 0:
            if partial:
                self.replication.hold_writes(
                    lambda d: d.source == region and self.random.random() < 0.5,
                    replication_after_s,
                    lasting=True,
                )
            self.run_for(replication_after_s)
        self.replicator.cut(region)
        peers = {
            peer: frozenset(row["event_id"]["S"] for row in other.event_rows())
            for peer, other in self.sides.items()
            if peer != region
        }
        self.cuts.append(Cut(region, self.clock.seconds(), peers))

    def restore(self, region: str) -> None:
        side = self.sides[region]
        if not side.cut:
            return
        side.cut = False
        self.replicator.restore(region)
        for cut in self.cuts:
            if cut.region == region and cut.until is None:
                cut.until = self.clock.seconds()

    def owning(self) -> bool:
        """Every region's heartbeat says `own` and holds no other origin (as its own replica has it)."""
        beats = [side.heartbeat() for side in self.sides.values()]
        return all(beat is not None and beat.state.value == "own" and not beat.taking for beat in beats)

    def cut_regions(self) -> list[str]:
        return [region for region, side in self.sides.items() if side.cut]

    # --- driving --------------------------------------------------------------------------------------------

    def round(self) -> tuple[bool, bool]:
        """One round of the replication and of every region's pollers: (did work, only waits for time)."""
        worked = self.replication.tick()
        waiting = False
        for side in self.sides.values():
            did, waits = side.round()
            worked, waiting = worked or did, waiting or waits
        return worked, waiting

    def run_for(self, seconds: float, *, max_rounds: int = 100_000) -> None:
        self.run_until(lambda: False, deadline=self.clock.seconds() + seconds, max_rounds=max_rounds)

    def run_until(self, done: Callable[[], bool], *, deadline: float, max_rounds: int = 100_000) -> bool:
        return stepping.run_until(
            self.clock, self.round, self._next_due, done, deadline=deadline, max_rounds=max_rounds
        )

    def _next_due(self) -> float:
        now = self.clock.seconds()
        dues = [now + 60.0]
        for side in self.sides.values():
            if not side.cut and (after := side.schedules.seconds_until_next()) is not None:
                dues.append(now + after)
        dues.extend(self.replication.next_due())
        return min(dues)

    def settled(self) -> bool:
        """Nothing left to do: no write on its way, no record in a mapping, no PENDING row in any replica, no
        late replica waiting for the operator (`operate`), and every region publishing its own origin again
        (none held by a peer)."""
        if self.cut_regions() or self.replication.pending():
            return False
        if any(side.mapping.stats().backlog for side in self.sides.values()):
            return False
        if not self.owning():
            return False
        for side in self.sides.values():
            for row in side.event_rows():
                if row.get("status", {}).get("S") == "PENDING" or _late_replica(row):
                    return False
        return True

    # --- the operator ---------------------------------------------------------------------------------------

    def operate(self) -> None:
        """The runbook for a late replica (docs/multi-region.md): its aggregate holds behind it; the taker
        published a later event of it already, so the operator skips it (a redrive would publish it after
        that later event), in the region that owns the row (its origin), and not while a takeover of that
        origin is in progress."""
        beats = [beat for side in self.sides.values() if (beat := side.heartbeat()) is not None]
        for region, side in self.sides.items():
            if side.cut or any(region in beat.taking for beat in beats):
                continue
            for row in side.event_rows():
                if row["status"]["S"] != "FAILED" or self.origins.get(row["event_id"]["S"]) != region:
                    continue
                self.failed_reasons.setdefault(row["event_id"]["S"], row.get("last_error", {}).get("S", ""))
                if _late_replica(row):
                    key = RowKey(row["aggregate_key"]["S"], int(row["seq"]["N"]))
                    skip(
                        side.admin["dynamodb"],
                        side.table,
                        key,
                        reason="late replica",
                        actor="ops",
                        now=self.clock(),
                    )
                    self.operator_actions["operator_skip"] += 1

    # --- the promise (tests.reliability.region_oracle) ------------------------------------------------------

    def history(self) -> History:
        return region_oracle.history(self)

    def verdict(self) -> Verdict:
        return check(self.history())

    def diverged(self) -> list[str]:
        return region_oracle.diverged(self)

    def figures(self, verdict: Verdict) -> dict[str, dict[str, int]]:
        return region_oracle.figures(self, verdict)


def _late_replica(row: dict[str, Any]) -> bool:
    return row.get("status", {}).get("S") == "FAILED" and LATE_REPLICA in row.get("last_error", {}).get(
        "S", ""
    )


@contextmanager
def two_regions(*, seed: int = 0, quiet: bool = True) -> Iterator[TwoRegions]:
    """A fresh moto account and the two regions on it; the functions' logs above ERROR only (`quiet`)."""
    loggers = [logging.getLogger(name) for name in _QUIET] if quiet else []
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        with mock_aws(), atomic_transactions():
            yield TwoRegions(seed=seed)
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)
