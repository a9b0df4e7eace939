"""One outbox across regions (DynamoDB global tables, docs/multi-region.md): who publishes which rows.

Pure: the settings (outbox.region_settings, re-exported here), the heartbeat items, and the decisions every
region takes from its view of them. The adapter that reads and writes them is
`outbox_publisher.region_store`; the sweeper (outbox_sweeper.regional) and the stream publisher
(outbox_publisher.stream) act on the decisions. Unset `OUTBOX_REGIONS`: one region, none of this runs, and no
row or item differs from a single-region outbox's.

Every region's sweeper writes its heartbeat each run (`Heartbeat`, one item per region, one writer each) and
reads all of them first (its `RegionView`, from its own replica). From the view and its own last heartbeat it
decides `next_heartbeat`: its state (`own`, `rejoining`, `yielded`), the origins it holds for lost regions
(`taking`) and the ones it handed back (`released`). A row's owner is the region publishing it: its origin
while `own`, else the region holding that origin in `taking`.

Where this departs from the issue's brief, and why:

- A region takes over a lost origin only when no live region holds it already. The brief's "taker_of(X) is
  the first live region after X" alone would let a region coming back between X and X's taker in the ring
  (A lost, then B lost, C takes both, B returns) take A over while C still holds it: two owners.
- A heartbeat holds `since` (epoch ms when its current state began): the rejoin condition needs the time the
  region began rejoining, and the stream publisher needs the last resume (only rows saved after it are its to
  publish without a claim). The brief names both times but no attribute for them.
- The late-replica record (`TakenRecord`) holds `claimed` as well as `published`: the seqs a taker is about
  to publish are recorded BEFORE it publishes them, the ones it published after. With `published` alone, a
  taker that crashed between a publish and its record would leave a lower seq that never replicated to it
  free to go out after a higher one. A row whose seq the taker never claimed, below one it claimed or
  published, is the late replica (FAILED, `LateReplica`); a row in `published` is settled without publishing.
- A taker that is itself lost holds nothing: its `taking` no longer makes the origin's region yield, and
  another region may take the origin over (the same presumption as for any lost region).
- `OUTBOX_REGIONS` needs two regions at least: one region is a single-region outbox (leave it unset).

Clocks: `beat_at`, `since`, `taking`, `released` are epoch milliseconds of the writing region's clock
(Lambda's, NTP-synchronised); comparisons across regions tolerate the skew of a few milliseconds that implies,
well inside every margin here (seconds to minutes).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Final

from outbox.event_rules import is_region_name
from outbox.model import HEARTBEAT_KEY_PREFIX, ORIGIN, PARTITION_KEY, SORT_KEY, TAKEN_KEY_PREFIX
from outbox.region_settings import (
    DEFAULT_TAKEOVER_AFTER_SECONDS,
    ENV_ORIGIN,
    ENV_REGION,
    ENV_REGIONS,
    ENV_SWEEP_INTERVAL_SECONDS,
    ENV_SWEEPER_TIMEOUT_SECONDS,
    ENV_TAKEOVER_AFTER_SECONDS,
    RegionSettings,
    writer_origin,
)

__all__ = [
    "DEFAULT_TAKEOVER_AFTER_SECONDS",
    "ENV_ORIGIN",
    "ENV_REGION",
    "ENV_REGIONS",
    "ENV_SWEEPER_TIMEOUT_SECONDS",
    "ENV_SWEEP_INTERVAL_SECONDS",
    "ENV_TAKEOVER_AFTER_SECONDS",
    "TAKEN_RECORD_DAYS",
    "VIEW_MAX_AGE",
    "Heartbeat",
    "Ownership",
    "RegionSettings",
    "RegionState",
    "RegionView",
    "TakenRecord",
    "TakenVerdict",
    "epoch_ms",
    "handback",
    "heartbeat_key",
    "next_heartbeat",
    "next_state",
    "ownership",
    "taken_key",
    "takeover",
    "view_of",
    "writer_origin",
]

VIEW_MAX_AGE: Final = timedelta(seconds=10)
"""How long the stream publisher trusts a view it read (outbox_publisher.region_store.CachedOwnership)."""

TAKEN_RECORD_DAYS: Final = 7
"""A `#taken#` item expires this long after its last write plus one takeover time (its TTL): kept well past
any return of the region whose rows it describes."""


class RegionState(StrEnum):
    OWN = "own"
    """Publishing its own origin (and the origins in its `taking`)."""
    REJOINING = "rejoining"
    """Its own last beat was older than the fence when it ran (cut off, or new): it publishes nothing until
    its view is current."""
    YIELDED = "yielded"
    """A peer holds its origin (or handed it back less than a margin ago): it publishes nothing of it."""


def epoch_ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def heartbeat_key(region: str) -> dict[str, dict[str, str]]:
    return {PARTITION_KEY: {"S": f"{HEARTBEAT_KEY_PREFIX}{region}"}, SORT_KEY: {"N": "0"}}


def taken_key(aggregate_key: str) -> dict[str, dict[str, str]]:
    return {PARTITION_KEY: {"S": f"{TAKEN_KEY_PREFIX}{aggregate_key}"}, SORT_KEY: {"N": "0"}}


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """One region's heartbeat item (docs/contracts.md, "Heartbeat items")."""

    region: str
    beat_at: int
    state: RegionState
    since: int
    """When the current state began: for `own`, the last resume."""
    seen: Mapping[str, int] = field(default_factory=dict)
    """Per peer: the peer's `beat_at` this region last read."""
    taking: Mapping[str, int] = field(default_factory=dict)
    """Per origin held for a lost region: since when (this region's `beat_at` of the beat that took it)."""
    released: Mapping[str, int] = field(default_factory=dict)
    """Per origin handed back: when (kept one takeover time)."""

    def to_item(self) -> dict[str, Any]:
        return heartbeat_key(self.region) | {
            "region": {"S": self.region},
            "beat_at": {"N": str(self.beat_at)},
            "state": {"S": self.state.value},
            "since": {"N": str(self.since)},
            "seen": _numbers(self.seen),
            "taking": _numbers(self.taking),
            "released": _numbers(self.released),
        }

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> Heartbeat | None:
        """The heartbeat an item holds; None when it is no well-formed one (its region then counts as silent:
        lost after the takeover time, never trusted)."""
        try:
            region = str(item["region"]["S"])
            heartbeat = cls(
                region=region,
                beat_at=int(item["beat_at"]["N"]),
                state=RegionState(item["state"]["S"]),
                since=int(item["since"]["N"]),
                seen=_read_numbers(item.get("seen")),
                taking=_read_numbers(item.get("taking")),
                released=_read_numbers(item.get("released")),
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            return None
        return heartbeat if is_region_name(region) else None


def _numbers(values: Mapping[str, int]) -> dict[str, Any]:
    return {"M": {name: {"N": str(value)} for name, value in sorted(values.items())}}


def _read_numbers(value: Any) -> dict[str, int]:
    if value is None:
        return {}
    return {str(name): int(number["N"]) for name, number in value["M"].items()}


@dataclass(frozen=True, slots=True)
class RegionView:
    """What one region read of every heartbeat (its own replica), and when."""

    settings: RegionSettings
    heartbeats: Mapping[str, Heartbeat]
    now: int
    """Epoch ms, this region's clock, when it decides."""

    @property
    def own(self) -> Heartbeat | None:
        return self.heartbeats.get(self.settings.region)

    def lost(self, region: str) -> bool:
        """No heartbeat from `region` for the takeover time (or none at all). This region is never lost to
        itself: it is running."""
        if region == self.settings.region:
            return False
        beat = self.heartbeats.get(region)
        return beat is None or self.now - beat.beat_at > _ms(self.settings.takeover_after)

    def taker_of(self, region: str) -> str | None:
        """The first region after `region` in ring order that is not lost: who should take it over."""
        return next((name for name in self.settings.after(region) if not self.lost(name)), None)

    def holders(self, origin: str) -> tuple[str, ...]:
        """The live peers holding `origin` in their `taking` (a lost taker holds nothing)."""
        return tuple(
            peer
            for peer in self.settings.peers
            if peer != origin
            and (beat := self.heartbeats.get(peer)) is not None
            and origin in beat.taking
            and not self.lost(peer)
        )

    def current_since(self, since: int) -> bool:
        """Whether the view is current for a region that began rejoining at `since`: every peer either beat
        after it (replication into this region works again) or stayed silent for the takeover time."""
        silent = self.now - since >= _ms(self.settings.takeover_after)
        return all(
            silent or ((beat := self.heartbeats.get(peer)) is not None and beat.beat_at > since)
            for peer in self.settings.peers
        )

    def recently_released(self, origin: str) -> bool:
        """A peer handed `origin` back less than the margin ago: its last run may still be publishing."""
        margin = _ms(self.settings.margin)
        return any(
            (beat := self.heartbeats.get(peer)) is not None
            and origin in beat.released
            and self.now - beat.released[origin] < margin
            for peer in self.settings.peers
        )

    def takers_of(self, origin: str) -> tuple[str, ...]:
        """The peers whose heartbeat names `origin` in `taking` or `released`, lost or not: the regions that
        may have written `#taken#` records of its rows (each in its own replica first)."""
        return tuple(
            peer
            for peer in self.settings.peers
            if peer != origin
            and (beat := self.heartbeats.get(peer)) is not None
            and (origin in beat.taking or origin in beat.released)
        )

    def oldest_peer_age_ms(self) -> int | None:
        """The age of the oldest peer heartbeat in the view (None if no peer has one)."""
        beats = [beat.beat_at for peer in self.settings.peers if (beat := self.heartbeats.get(peer))]
        return max(0, self.now - min(beats)) if beats else None


def _ms(delta: timedelta) -> int:
    return int(delta.total_seconds() * 1000)


def next_state(view: RegionView) -> tuple[RegionState, int]:
    """This region's state for the beat it writes now, and since when (rejoin, yield, resume)."""
    settings, now, own = view.settings, view.now, view.own
    region = settings.region
    if own is None or now - own.beat_at > _ms(settings.fence):
        return RegionState.REJOINING, now  # it did not run: cut off, or new
    state, since = own.state, own.since
    if state is RegionState.REJOINING and not view.current_since(since):
        return state, since
    if view.holders(region):
        wanted = RegionState.YIELDED
    elif state is not RegionState.OWN and view.recently_released(region):
        wanted = RegionState.YIELDED  # the taker's last run and the replication of its writes settle
    else:
        wanted = RegionState.OWN
    return (wanted, since) if wanted is state else (wanted, now)


def next_heartbeat(view: RegionView) -> Heartbeat:
    """The heartbeat this region writes now: its state, what it takes over, what it hands back."""
    settings, now, own = view.settings, view.now, view.own
    state, since = next_state(view)
    # A release is kept as long as the `#taken#` records the region wrote while holding the origin: the
    # origin's region reads them in this region's replica for as long as this heartbeat names it.
    keep = _ms(settings.takeover_after + timedelta(days=TAKEN_RECORD_DAYS))
    released = {origin: at for origin, at in (own.released if own else {}).items() if now - at < keep}
    taking: dict[str, int] = {}
    for origin, at in (own.taking if own else {}).items():
        if handback(view, origin, at):
            released[origin] = now
        else:
            taking[origin] = at
    if state is RegionState.OWN:
        for origin in settings.peers:
            if origin not in taking and takeover(view, origin):
                taking[origin] = now
                released.pop(origin, None)
    seen = {peer: beat.beat_at for peer in settings.peers if (beat := view.heartbeats.get(peer)) is not None}
    return Heartbeat(settings.region, now, state, since, seen, taking, released)


def takeover(view: RegionView, origin: str) -> bool:
    """Whether this region takes `origin` over now: it is lost, this region is its taker, and no live region
    holds it already. (Called only when this region's state is `own`: a stale view takes nothing over.)"""
    return view.lost(origin) and view.taker_of(origin) == view.settings.region and not view.holders(origin)


def handback(view: RegionView, origin: str, taken_at: int) -> bool:
    """Whether this region stops holding `origin`: its region is back (not lost) and has read the beat that
    first carried the takeover (so it yields until the release)."""
    beat = view.heartbeats.get(origin)
    if beat is None or view.lost(origin):
        return False
    return beat.seen.get(view.settings.region, -1) >= taken_at


@dataclass(frozen=True, slots=True)
class Ownership:
    """Which rows one region publishes in one run (the sweeper) or batch (the stream publisher), decided from
    the heartbeat it wrote (or read) and its view."""

    settings: RegionSettings
    heartbeat: Heartbeat | None
    """None: no heartbeat could be read or written: it owns nothing."""
    accepted_takers: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """Per origin: the `taken_by` values a claim may find on a row (itself, and regions that hold no more)."""

    @property
    def state(self) -> RegionState | None:
        return self.heartbeat.state if self.heartbeat else None

    @property
    def taking(self) -> frozenset[str]:
        beat = self.heartbeat
        return frozenset(beat.taking) if beat and beat.state is RegionState.OWN else frozenset()

    def origin_of(self, row: Mapping[str, Any]) -> str:
        value = row.get(ORIGIN)
        text = value.get("S") if isinstance(value, Mapping) else None
        return self.settings.origin_region(text if isinstance(text, str) else None)

    def owns(self, row: Mapping[str, Any]) -> bool:
        """Whether this region publishes `row`: its own origin while `own`, or an origin it holds."""
        beat = self.heartbeat
        if beat is None or beat.state is not RegionState.OWN:
            return False
        origin = self.origin_of(row)
        return origin == self.settings.region or origin in beat.taking

    def taken(self, row: Mapping[str, Any]) -> bool:
        """Whether `row` is one of a lost region's that this region holds (its claim stamps `taken_by`)."""
        return self.origin_of(row) in self.taking

    def from_before_resume(self, row: Mapping[str, Any], occurred_at: datetime | None) -> bool:
        """A row of its own origin saved before its last resume: a taker may have published it or later
        ones (its `#taken#` record says)."""
        beat = self.heartbeat
        if beat is None or self.origin_of(row) != self.settings.region:
            return False
        return occurred_at is None or epoch_ms(occurred_at) < beat.since

    def may_stream(self, row: Mapping[str, Any], occurred_at: datetime | None, now: datetime) -> bool:
        """Whether the stream publisher publishes `row` (an INSERT it got): its own origin, its heartbeat
        says `own` and is fresh, and the row was saved after the last resume."""
        beat = self.heartbeat
        if beat is None or beat.state is not RegionState.OWN:
            return False
        if epoch_ms(now) - beat.beat_at > _ms(self.settings.fence):
            return False  # its sweeper stopped beating: the view it decided from is stale
        if self.origin_of(row) != self.settings.region:
            return False
        return occurred_at is None or epoch_ms(occurred_at) >= beat.since

    def accepts(self, origin: str) -> frozenset[str]:
        return self.accepted_takers.get(origin, frozenset({self.settings.region}))


def ownership(view: RegionView, heartbeat: Heartbeat | None) -> Ownership:
    """The ownership of a run that wrote (or read) `heartbeat` after reading `view`."""
    settings = view.settings
    accepted: dict[str, frozenset[str]] = {}
    for origin in settings.regions:
        takers = {settings.region}
        for peer in settings.peers:
            beat = view.heartbeats.get(peer)
            if beat is None or view.lost(peer) or origin not in beat.taking:
                takers.add(peer)  # it holds no more (or never did, or is lost)
        accepted[origin] = frozenset(takers)
    return Ownership(settings, heartbeat, accepted)


class TakenVerdict(StrEnum):
    DUPLICATE = "duplicate"
    """The taker published it: settle it without publishing (`TakenOverDuplicatesAvoided`)."""
    LATE_REPLICA = "late_replica"
    """The taker never saw it and may have published a later event of its aggregate: FAILED, `LateReplica`."""


@dataclass(frozen=True, slots=True)
class TakenRecord:
    """What a taker published of one aggregate while it held the aggregate's origin (`#taken#` item)."""

    aggregate_key: str
    origin: str
    by: str
    claimed: frozenset[int] = frozenset()
    """Seqs it was about to publish (written before the publish)."""
    published: frozenset[int] = frozenset()
    """Seqs it published (written after)."""

    def verdict(self, seq: int) -> TakenVerdict | None:
        """What becomes of a row of this aggregate found PENDING: None, publish it as usual (at worst a
        duplicate of one the taker claimed, never out of order)."""
        if seq in self.published:
            return TakenVerdict.DUPLICATE
        if seq not in self.claimed and any(other > seq for other in self.claimed | self.published):
            return TakenVerdict.LATE_REPLICA
        return None

    def highest(self) -> int:
        return max(self.claimed | self.published, default=0)

    def merged(self, other: TakenRecord) -> TakenRecord:
        """This record and another replica's (or another taker's) of the same aggregate: every seq either
        claimed or published. Each record only ever grows, so the union is never more than was written."""
        return TakenRecord(
            aggregate_key=self.aggregate_key,
            origin=self.origin or other.origin,
            by=self.by if self.highest() >= other.highest() else other.by,
            claimed=self.claimed | other.claimed,
            published=self.published | other.published,
        )

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> TakenRecord | None:
        try:
            key = str(item[PARTITION_KEY]["S"])
            return cls(
                aggregate_key=key.removeprefix(TAKEN_KEY_PREFIX),
                origin=str(item.get(ORIGIN, {}).get("S", "")),
                by=str(item.get("by", {}).get("S", "")),
                claimed=_seqs(item.get("claimed")),
                published=_seqs(item.get("published")),
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            return None


def _seqs(value: Any) -> frozenset[int]:
    if value is None:
        return frozenset()
    return frozenset(int(number) for number in value["NS"])


def view_of(settings: RegionSettings, heartbeats: Iterable[Heartbeat], now: datetime) -> RegionView:
    """The view of `heartbeats` at `now`."""
    return RegionView(settings, {beat.region: beat for beat in heartbeats}, epoch_ms(now))
