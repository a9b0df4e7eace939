"""The order gate: no event is published before its aggregate's previous event is out.

Shared by every path that publishes (the stream publisher, the sweeper), inside the engine. Within a run:

- Each aggregate's candidates are taken in `seq` order, whatever order the caller found them in (a stream
  orders records per item, not per aggregate: two events of one transaction may arrive reversed). The
  aggregate keeps its places in the run; its events fill them in `seq` order (`processing_order`).
- Event `seq` may go once event `seq - 1` is out: published earlier in this run, or no longer in the table
  (outbox_publisher.predecessors: read strongly consistent, all at once before the run starts, unless the
  caller or the engine's memory of what it settled already knows). `seq` 1 needs nothing.
- Otherwise the event is HELD: not published, left PENDING, and so is every later event of its aggregate in
  the run. Other aggregates go on. A hold behind a FAILED predecessor needs an operator (outbox_ops.release);
  a hold behind a PENDING one resolves itself (the sweeper publishes both in order).
- A predecessor poisoned in this run holds the aggregate, unless its route continues past poison.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from outbox.model import RowKey
from outbox_publisher.candidates import Candidate
from outbox_publisher.predecessors import PredecessorState


class HoldReason(StrEnum):
    PREDECESSOR_PENDING = "predecessor_pending"
    PREDECESSOR_FAILED = "predecessor_failed"
    PREDECESSOR_HELD = "predecessor_held"
    """An earlier event of the aggregate was held in this run."""
    LEASED = "leased"
    """Another path holds the row's lease: it is publishing it."""
    BACKING_OFF = "backing_off"
    """The sweeper waits before trying the row again."""

    @property
    def needs_operator(self) -> bool:
        """Held until someone redrives or skips the predecessor."""
        return self is HoldReason.PREDECESSOR_FAILED


_HOLDS = {
    PredecessorState.PENDING: HoldReason.PREDECESSOR_PENDING,
    PredecessorState.FAILED: HoldReason.PREDECESSOR_FAILED,
}


class Unknown(Exception):  # noqa: N818 - a verdict, raised to the engine, not an error of the caller
    """The predecessor's state could not be read: the engine stops here, as on a transient failure."""


def processing_order(candidates: Sequence[Candidate]) -> list[int]:
    """Indexes of `candidates` in the order to process them: input order, each aggregate's events in
    `seq` order in the places its events hold."""
    places: dict[str, list[int]] = {}
    for index, candidate in enumerate(candidates):
        if candidate.key is not None:
            places.setdefault(candidate.key.aggregate_key, []).append(index)
    order = list(range(len(candidates)))
    for indexes in places.values():
        if len(indexes) == 1:
            continue  # already in its place: most aggregates of a batch have one event
        by_seq = sorted(indexes, key=lambda index: _seq(candidates[index]))
        for place, index in zip(indexes, by_seq, strict=True):
            order[place] = index
    return order


def predecessors_to_read(candidates: Sequence[Candidate]) -> list[RowKey]:
    """The predecessors the gate must read: those not in the run and not known by the caller."""
    in_run = {candidate.key for candidate in candidates if candidate.key is not None}
    return sorted(
        {
            predecessor
            for candidate in candidates
            if candidate.key is not None
            and candidate.key.seq > 1
            and candidate.predecessor is None
            and (predecessor := candidate.key.predecessor) not in in_run
        }
    )


class OrderGate:
    """The gate's state for one run."""

    def __init__(self, states: dict[RowKey, PredecessorState] | None) -> None:
        self._states = states
        """What the table says of predecessors outside the run; None when reading them failed."""
        self._resolved: dict[RowKey, bool] = {}
        """Events of this run, by key: True once published (or poisoned past which its route continues)."""
        self._blocked: dict[str, HoldReason] = {}

    def check(self, candidate: Candidate) -> HoldReason | None:
        """None if the candidate may be published now; why it is held otherwise. Raises Unknown."""
        key = candidate.key
        if key is None:
            return None  # an unreadable row is only ever poisoned
        if key.aggregate_key in self._blocked:
            return HoldReason.PREDECESSOR_HELD
        if key.seq <= 1:
            return None  # a seq below 1 has no predecessor: such a row is only ever poisoned
        predecessor = key.predecessor
        resolved = self._resolved.get(predecessor)
        if resolved is not None:
            return None if resolved else HoldReason.PREDECESSOR_FAILED
        state = candidate.predecessor
        if state is None:
            if self._states is None or predecessor not in self._states:
                raise Unknown(str(predecessor))
            state = self._states[predecessor]
        return None if state.resolved else _HOLDS[state]

    def published(self, key: RowKey | None) -> None:
        if key is not None:
            self._resolved[key] = True

    def poisoned(self, key: RowKey | None, *, continues: bool) -> None:
        if key is not None:
            self._resolved[key] = continues

    def held(self, key: RowKey | None, reason: HoldReason) -> None:
        if key is not None:
            self._blocked.setdefault(key.aggregate_key, reason)


def _seq(candidate: Candidate) -> int:
    return candidate.key.seq if candidate.key is not None else 0
