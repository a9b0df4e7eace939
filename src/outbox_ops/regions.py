"""`outbox status` across regions: each region's heartbeat as the table read here holds it, which origins
another region has taken over, and how far behind each region saw its peers (docs/multi-region.md).

Each region's sweeper writes one heartbeat item, `aggregate_key = "#region#<region>"`, `seq = 0`: `beat_at`
(epoch ms, the writer's clock), `state` (`own`, `rejoining`, `yielded`) and `since` (when it began),
`taking` and `released` (origin -> epoch ms) and `seen` (peer -> the peer's `beat_at` it last read). The
table is a global table: what is read here is this region's replica, so a peer's heartbeat age is its
silence plus the replication lag into here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from outbox.clock import format_timestamp
from outbox_publisher.deadline import NoDeadline
from outbox_publisher.region_store import DynamoDBRegionStore
from outbox_publisher.regions import Heartbeat, RegionState

MULTI_REGION_DOC: Final = "docs/multi-region.md"


@dataclass(frozen=True)
class RegionHeartbeat:
    """One region's heartbeat as read here; `beat_at` None: the region has never beaten (or it has not
    replicated here yet)."""

    region: str
    beat_at: datetime | None = None
    state: str | None = None
    since: datetime | None = None
    """When the current state began (for `own`, the last resume)."""
    taking: Mapping[str, datetime] = field(default_factory=dict)
    released: Mapping[str, datetime] = field(default_factory=dict)
    seen: Mapping[str, datetime] = field(default_factory=dict)

    def age_s(self, now: datetime) -> float | None:
        return None if self.beat_at is None else max(0.0, (now - self.beat_at).total_seconds())

    def behind_s(self) -> dict[str, float]:
        """How old each peer's heartbeat was when this region last beat: its view's lag, peer by peer."""
        if self.beat_at is None:
            return {}
        beat_at = self.beat_at
        return {peer: max(0.0, (beat_at - at).total_seconds()) for peer, at in sorted(self.seen.items())}


@dataclass(frozen=True)
class TakenOver:
    origin: str
    by: str
    since: datetime


@dataclass
class RegionsReport:
    ring: tuple[str, ...]
    """Every region, home first."""
    takeover_after_s: int
    heartbeats: list[RegionHeartbeat]
    checked_at: datetime

    @property
    def home(self) -> str:
        return self.ring[0]

    @property
    def taken_over(self) -> list[TakenOver]:
        return [
            TakenOver(origin, heartbeat.region, since)
            for heartbeat in self.heartbeats
            for origin, since in sorted(heartbeat.taking.items())
        ]

    def lost(self, heartbeat: RegionHeartbeat) -> bool:
        age = heartbeat.age_s(self.checked_at)
        return age is None or age > self.takeover_after_s

    def reasons(self) -> list[str]:
        """What needs an operator's look, for the verdict (degraded), worst first."""
        found: list[str] = []
        takers = {taken.origin: taken for taken in self.taken_over}
        for heartbeat in self.heartbeats:
            if not self.lost(heartbeat):
                continue
            age = heartbeat.age_s(self.checked_at)
            silent = "has no heartbeat here" if age is None else f"last beat {age:.0f} s ago"
            taken = takers.get(heartbeat.region)
            who = (
                f"{taken.by} publishes its rows since {format_timestamp(taken.since)}"
                if taken
                else "no region has taken its rows over yet"
            )
            found.append(
                f"region {heartbeat.region} {silent}, past the {self.takeover_after_s} s takeover time: "
                f"presumed lost; {who} (see {MULTI_REGION_DOC})"
            )
        for taken in self.taken_over:
            if not any(h.region == taken.origin and self.lost(h) for h in self.heartbeats):
                found.append(
                    f"{taken.by} still holds {taken.origin}'s rows (since {format_timestamp(taken.since)}) "
                    f"though {taken.origin} beats again: it hands them back once {taken.origin} has seen it"
                )
        for heartbeat in self.heartbeats:
            if heartbeat.state not in (None, RegionState.OWN.value) and not self.lost(heartbeat):
                found.append(
                    f"region {heartbeat.region} is {heartbeat.state}: it publishes none of its own rows yet "
                    f"(see {MULTI_REGION_DOC})"
                )
        return found

    def to_json(self) -> dict[str, Any]:
        def stamps(found: Mapping[str, datetime]) -> dict[str, str]:
            return {region: format_timestamp(at) for region, at in sorted(found.items())}

        return {
            "home": self.home,
            "regions": list(self.ring),
            "takeover_after_seconds": self.takeover_after_s,
            "heartbeats": [
                {
                    "region": heartbeat.region,
                    "beat_at": None if heartbeat.beat_at is None else format_timestamp(heartbeat.beat_at),
                    "age_seconds": heartbeat.age_s(self.checked_at),
                    "lost": self.lost(heartbeat),
                    "state": heartbeat.state,
                    "since": None if heartbeat.since is None else format_timestamp(heartbeat.since),
                    "taking": stamps(heartbeat.taking),
                    "released": stamps(heartbeat.released),
                    "seen": stamps(heartbeat.seen),
                    "peers_behind_seconds": heartbeat.behind_s(),
                }
                for heartbeat in self.heartbeats
            ],
            "taken_over": [
                {"origin": taken.origin, "by": taken.by, "since": format_timestamp(taken.since)}
                for taken in self.taken_over
            ],
        }


def read_regions(
    dynamodb: Any, table: str, ring: Sequence[str], takeover_after_s: int, now: datetime
) -> RegionsReport:
    """Every region's heartbeat in `table`, read as the sweepers read them (one consistent BatchGetItem); a
    region without a well-formed heartbeat shows as never beaten."""
    found = {
        heartbeat.region: heartbeat
        for heartbeat in DynamoDBRegionStore(dynamodb, table).read_heartbeats(ring, NoDeadline())
    }
    return RegionsReport(
        ring=tuple(ring),
        takeover_after_s=takeover_after_s,
        heartbeats=[_shown(region, found.get(region)) for region in ring],
        checked_at=now,
    )


def parse_ring(text: str) -> tuple[str, ...]:
    """The `OutboxRegions` output: regions comma-separated, home first."""
    return tuple(region.strip() for region in text.split(",") if region.strip())


def _shown(region: str, heartbeat: Heartbeat | None) -> RegionHeartbeat:
    if heartbeat is None:
        return RegionHeartbeat(region)
    return RegionHeartbeat(
        region=region,
        beat_at=_moment(heartbeat.beat_at),
        state=heartbeat.state.value,
        since=_moment(heartbeat.since),
        taking=_moments(heartbeat.taking),
        released=_moments(heartbeat.released),
        seen=_moments(heartbeat.seen),
    )


def _moments(stamps: Mapping[str, int]) -> dict[str, datetime]:
    return {region: _moment(at) for region, at in stamps.items()}


def _moment(epoch_ms: int) -> datetime:
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)
