"""What the promise means on two regions (tests.reliability.regions), read by the single-region checker
(tests.reliability.invariants) on the union of both regions' destinations, with three things of its own:

- a row FAILED `LateReplica` is accepted (as injected poison with that reason: it must be on the poison
  queue) only if it was never published and a region other than its origin published a later event of its
  aggregate (`late_replica_events`);
- a copy is explained as `CAUSE_CUT_IN_FLIGHT` only if the region that published it first was cut off after
  that publication while the peer that published it again still held its row (`explained_copies`);
- once everything replicated, the replicas agree on every event row (`diverged`: a settle resurrected, a
  claim lost).

And the figures per region a schedule records (`figures`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from outbox.model import AUDIT_KEY_PREFIX, RELEASED_AT, is_reserved
from outbox_ops.release import AUDIT_ENTRIES, Action
from tests.reliability.invariants import CAUSE_CUT_IN_FLIGHT, History, Row, Verdict
from tests.reliability.region_side import LATE_REPLICA, REGIONS, region_of
from tests.reliability.wire import SNS, Publication

if TYPE_CHECKING:
    from tests.reliability.regions import TwoRegions


def history(system: TwoRegions) -> History:
    home = system.sides[REGIONS[0]]
    items = home.items()
    rows = [
        Row(
            aggregate_key=item["aggregate_key"]["S"],
            seq=int(item["seq"]["N"]),
            event_id=item.get("event_id", {}).get("S", ""),
            status=item.get("status", {}).get("S", ""),
            last_error=item.get("last_error", {}).get("S"),
            released=RELEASED_AT in item,
        )
        for item in items
        if not is_reserved(item["aggregate_key"]["S"])
    ]
    reasons = dict(system.failed_reasons)
    for row in rows:
        if row.status == "FAILED" and row.last_error:
            reasons.setdefault(row.event_id, row.last_error)
    late = late_replica_events(system, reasons)
    return History(
        committed=list(system.committed.values()),
        rows=rows,
        orders=[],
        publications=list(system.wire.published),
        skipped=_skipped(items),
        injected_poison=frozenset(late),
        poison_sent=frozenset(system.wire.poison_sent),
        invocations={invocation.number: invocation for invocation in system.wire.invocations},
        expected_reasons=dict.fromkeys(late, LATE_REPLICA),
        failed_reasons=reasons,
        explained=explained_copies(system),
    )


def late_replica_events(system: TwoRegions, reasons: dict[str, str]) -> set[str]:
    """The events FAILED as late replicas (`reasons`: event_id -> `last_error`) that were: never
    published, and a region other than their origin published a later event of their aggregate."""
    first_later: dict[str, int] = {}
    published = {p.event_id for p in system.wire.published}
    for publication in system.wire.published:
        event = system.committed.get(publication.event_id)
        if event is None or region_of(publication.function) == system.origins.get(publication.event_id):
            continue
        key = event.aggregate_key
        first_later[key] = max(first_later.get(key, 0), event.seq)
    late = set()
    for event_id, reason in reasons.items():
        event = system.committed.get(event_id)
        if event is None or LATE_REPLICA not in reason or event_id in published:
            continue
        if first_later.get(event.aggregate_key, 0) > event.seq:
            late.add(event_id)
    return late


def explained_copies(system: TwoRegions) -> dict[tuple[str, str, int], str]:
    """(event_id, destination, invocation of its previous publication) -> why a peer published it again:
    the region that published it was cut off after, while the peer's replica still held its row."""
    explained: dict[tuple[str, str, int], str] = {}
    last: dict[tuple[str, str], Publication] = {}
    for publication in system.wire.published:
        key = (publication.event_id, publication.destination)
        previous = last.get(key)
        last[key] = publication
        if previous is None:
            continue
        first, again = region_of(previous.function), region_of(publication.function)
        if first == again:
            continue
        if any(
            cut.region == first and cut.at >= previous.at and publication.event_id in cut.peer_events[again]
            for cut in system.cuts
        ):
            explained[(publication.event_id, publication.destination, previous.invocation)] = (
                CAUSE_CUT_IN_FLIGHT
            )
    return explained


def diverged(system: TwoRegions) -> list[str]:
    """Event rows the replicas disagree on after everything replicated (a resurrected settle, a lost
    claim)."""
    images = [
        {(row["aggregate_key"]["S"], row["seq"]["N"]): row for row in side.event_rows()}
        for side in system.sides.values()
    ]
    first, second = images
    return [
        f"{key[0]} seq {key[1]}: {REGIONS[0]} holds {first.get(key, {}).get('status')}, "
        f"{REGIONS[1]} holds {second.get(key, {}).get('status')}"
        for key in sorted(set(first) | set(second))
        if first.get(key) != second.get(key)
    ]


def figures(system: TwoRegions, verdict: Verdict) -> dict[str, dict[str, int]]:
    """Per region: events it published first (on the topic), events of another region's origin it
    published (taken over), late replicas it marked FAILED, duplicates it sent (copies after an event's
    first, on either destination), the takeovers it began, the rows it settled unpublished on its return
    (a taker had published them)."""
    figures: dict[str, dict[str, int]] = {
        region: dict.fromkeys(
            ("published", "taken_over", "late_replicas", "duplicates", "takeovers", "duplicates_avoided"),
            0,
        )
        for region in REGIONS
    }
    seen: set[tuple[str, str]] = set()
    taken: set[tuple[str, str]] = set()
    for publication in system.wire.published:
        region = region_of(publication.function)
        key = (publication.event_id, publication.destination)
        if (
            publication.destination == SNS
            and system.origins.get(publication.event_id)
            not in (
                None,
                region,
            )
            and (region, publication.event_id) not in taken
        ):
            taken.add((region, publication.event_id))
            figures[region]["taken_over"] += 1
        if key in seen:
            figures[region]["duplicates"] += 1
            continue
        seen.add(key)
        if publication.destination == SNS:
            figures[region]["published"] += 1
    holding: dict[str, set[str]] = {region: set() for region in REGIONS}
    for beat in system.beats:
        began = set(beat.taking) - holding[beat.region]
        figures[beat.region]["takeovers"] += len(began)
        holding[beat.region] = set(beat.taking)
    for region in REGIONS:
        figures[region]["late_replicas"] = system.late_replicas[region]
        figures[region]["duplicates_avoided"] = system.duplicates_avoided[region]
    return figures


def _skipped(items: list[dict[str, Any]]) -> frozenset[str]:
    skipped: set[str] = set()
    for item in items:
        if not item["aggregate_key"]["S"].startswith(AUDIT_KEY_PREFIX):
            continue
        entries = item.get(AUDIT_ENTRIES, {}).get("L", [])
        if any(entry["M"]["action"]["S"] == Action.SKIP.value for entry in entries):
            skipped.add(item["event_id"]["S"])
    return frozenset(skipped)
