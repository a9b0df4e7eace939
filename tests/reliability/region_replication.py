"""The replication between the two regions' replicas (tests.reliability.regions), on the virtual clock, and
the lag faults on it.

The local runtime's `Replicator` (outbox_local.replication: asynchronous, per item, last writer wins by write
time, deletes included, every replica's stream carrying every write) keeps its lag on the wall clock, where
moto stamps the writes. Here its lag is 0 and it is stepped every `INTERVAL_S` of virtual time instead (a
write reaches the other replica within that: AWS's typical lag), the deliveries due at a step shuffled (no
order across items). What slows it is held here: `pause` (nothing replicates), `hold_writes` (the writes a
predicate picks come later than the others: a held delivery's `jitter` puts it at the end of time until
released, through the replicator's own `state()`/`resume()`), and the replicator's `cut`/`restore` (a region
cut off).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from outbox_local.replication import Delivery, Replicator
from tests.support.clock import FakeClock

INTERVAL_S = 1.0
_FAR = 1e18
"""A held delivery's extra lag (its `jitter`): never due, until released."""


@dataclass
class _Lag:
    """Writes held back until `until` (virtual time): those `match` picks among the ones it has not seen."""

    until: float
    match: Callable[[Delivery], bool]
    considered: set[int] = field(default_factory=set)


class Replication:
    def __init__(
        self,
        clients: Mapping[str, Any],
        table: str,
        regions: Sequence[str],
        clock: FakeClock,
        *,
        seed: int,
    ) -> None:
        described = {region: _DescribedOnce(client) for region, client in clients.items()}
        self.replicator = Replicator(
            described.__getitem__,
            lag_s=0.0,
            clock=time.time,
            order=random.Random(seed),  # noqa: S311 - a replayable order, not a secret
        )
        self.replicator.add_table(table, list(regions))
        self._clock = clock
        self._next_step = 0.0
        self.paused_until = 0.0
        """Nothing replicates before this (virtual time)."""
        self.held: dict[int, float] = {}
        """Deliveries held back, by id: until when (virtual time)."""
        self.lags: list[_Lag] = []
        """Lasting holds: each holds the writes it picks until it ends."""
        self.writes_held = 0
        """Writes held back by a pause (counted at its end) or a hold."""

    # --- the faults -----------------------------------------------------------------------------------------

    def pause(self, seconds: float) -> None:
        """Nothing replicates, either way, for `seconds`."""
        self.paused_until = max(self.paused_until, self._clock.seconds() + seconds)

    def hold_writes(self, match: Callable[[Delivery], bool], seconds: float, *, lasting: bool = False) -> int:
        """The queued writes that `match` picks reach their replica `seconds` later than the others (per item,
        no order across items: a later write of an aggregate may arrive first); with `lasting`, also the
        writes queued until then that it picks. Answers how many were held now."""
        lag = _Lag(self._clock.seconds() + seconds, match)
        held = self._hold(lag)
        if lasting:
            self.lags.append(lag)
        return held

    def release(self) -> None:
        """Every held write and paused replication flows again (at the next steps)."""
        self.paused_until = 0.0
        self.lags.clear()
        self._release_held(everything=True)

    # --- driving --------------------------------------------------------------------------------------------

    def tick(self) -> bool:
        """A round's part: a step when one is due and nothing pauses replication; whether it delivered."""
        now = self._clock.seconds()
        if self.paused_until and now >= self.paused_until:
            self.replicator.poll()
            self.writes_held += self.replicator.pending()  # what the pause held back (and some due now)
            self.paused_until = 0.0
        if now < self._next_step or now < self.paused_until:
            return False
        self.lags = [lag for lag in self.lags if lag.until > now]
        for lag in self.lags:
            self._hold(lag)
        self._release_held()
        self._next_step = now + INTERVAL_S
        return bool(self.replicator.step())

    def next_due(self) -> list[float]:
        """When something may be delivered next (virtual times)."""
        dues = list(self.held.values())
        if self.replicator.pending():
            dues.append(max(self._next_step, self.paused_until))
        return dues

    def pending(self) -> int:
        return self.replicator.pending()

    # --- internals ------------------------------------------------------------------------------------------

    def _hold(self, lag: _Lag) -> int:
        self.replicator.poll()
        state = self.replicator.state()
        held = set()
        for delivery in state.queue:
            if delivery.id in lag.considered:
                continue
            lag.considered.add(delivery.id)
            if delivery.id not in self.held and lag.match(delivery):
                held.add(delivery.id)
                self.held[delivery.id] = lag.until
        self.writes_held += len(held)
        self._set_jitter(held, _FAR)
        return len(held)

    def _release_held(self, *, everything: bool = False) -> None:
        now = self._clock.seconds()
        due = {number for number, until in self.held.items() if everything or until <= now}
        for number in due:
            del self.held[number]
        self._set_jitter(due, 0.0)

    def _set_jitter(self, ids: set[int], jitter: float) -> None:
        if not ids:
            return
        state = self.replicator.state()
        queue = tuple(replace(d, jitter=jitter) if d.id in ids else d for d in state.queue)
        self.replicator.resume(replace(state, queue=queue))


class _DescribedOnce:
    """A region's DynamoDB client for the replicator, its DescribeTable answered once per table: the
    replicator describes each replica at every step (for its stream's ARN, which never changes here), and
    moto's answer costs milliseconds, most of a schedule's time when asked every virtual second."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._described: dict[str, Any] = {}

    def describe_table(self, *, TableName: str) -> Any:  # noqa: N803 - boto3's keyword
        if TableName not in self._described:
            self._described[TableName] = self._client.describe_table(TableName=TableName)
        return self._described[TableName]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)
