"""outbox_publisher.regions: the settings, the heartbeat item, and every decision, as tables of views ->
decisions with clocks at their boundaries (docs/multi-region.md)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from outbox.errors import ConfigurationError
from outbox_publisher.regions import (
    TAKEN_RECORD_DAYS,
    Heartbeat,
    Ownership,
    RegionSettings,
    RegionState,
    RegionView,
    TakenRecord,
    TakenVerdict,
    epoch_ms,
    handback,
    next_heartbeat,
    next_state,
    ownership,
    takeover,
    writer_origin,
)

A, B, C = "us-east-1", "eu-west-1", "ap-south-1"
OWN, REJOINING, YIELDED = RegionState.OWN, RegionState.REJOINING, RegionState.YIELDED
TAKEOVER = 600_000
FENCE = 120_000
MARGIN = 240_000
NOW = 10_000_000_000
"""Epoch ms of every view here."""


def settings(region: str = A, regions: tuple[str, ...] = (A, B, C)) -> RegionSettings:
    return RegionSettings(region, regions)


def beat(region: str, age_ms: int = 0, state: RegionState = OWN, since: int = 0, **maps: Any) -> Heartbeat:
    return Heartbeat(region, NOW - age_ms, state, since, **maps)


def view(region: str, *beats: Heartbeat, regions: tuple[str, ...] = (A, B, C)) -> RegionView:
    return RegionView(settings(region, regions), {b.region: b for b in beats}, NOW)


# --- settings ------------------------------------------------------------------------------------


def test_unset_regions_is_a_single_region_outbox() -> None:
    assert RegionSettings.from_env({"AWS_REGION": A}) is None
    assert RegionSettings.from_env({"OUTBOX_REGIONS": "  "}) is None


def test_settings_from_the_environment_round_trip() -> None:
    env = {"OUTBOX_REGIONS": f"{A}, {B}", "AWS_REGION": B, "OUTBOX_TAKEOVER_AFTER_SECONDS": "900"}
    read = RegionSettings.from_env(env)
    assert read is not None
    assert (read.region, read.regions, read.home, read.peers) == (B, (A, B), A, (A,))
    assert read.takeover_after == timedelta(seconds=900)
    assert (read.fence, read.margin) == (timedelta(seconds=120), timedelta(seconds=240))
    assert RegionSettings.from_env(read.environment()) == read


def test_outbox_region_wins_over_aws_region() -> None:
    read = RegionSettings.from_env({"OUTBOX_REGIONS": f"{A},{B}", "OUTBOX_REGION": A, "AWS_REGION": B})
    assert read is not None
    assert read.region == A


def _two(**env: str) -> dict[str, str]:
    return {"OUTBOX_REGIONS": f"{A},{B}", "AWS_REGION": A} | env


@pytest.mark.parametrize(
    ("env", "names"),
    [
        ({"OUTBOX_REGIONS": f"{A},{B}", "AWS_REGION": C}, "is not one of OUTBOX_REGIONS"),
        ({"OUTBOX_REGIONS": f"{A},{A}", "AWS_REGION": A}, "names a region twice"),
        ({"OUTBOX_REGIONS": f"{A},,{B}", "AWS_REGION": A}, "empty entry"),
        ({"OUTBOX_REGIONS": f"{A},Mars", "AWS_REGION": A}, "not an AWS region's name"),
        ({"OUTBOX_REGIONS": A, "AWS_REGION": A}, "2 regions at least"),
        ({"OUTBOX_REGIONS": f"{A},{B}"}, "set OUTBOX_REGION"),
        (
            {"OUTBOX_REGIONS": f"{A},{B}", "AWS_REGION": A, "OUTBOX_TAKEOVER_AFTER_SECONDS": "299"},
            "at least 3 x",
        ),
        ({"OUTBOX_REGIONS": f"{A},{B}", "AWS_REGION": A, "OUTBOX_TAKEOVER_AFTER_SECONDS": "ten"}, "TAKEOVER"),
        (
            {"OUTBOX_REGIONS": f"{A},{B}", "AWS_REGION": A, "OUTBOX_SWEEP_INTERVAL_SECONDS": "300"},
            "at least 3 x",  # 3 x 300 + 120 > the default 600
        ),
    ],
)
def test_a_bad_setting_is_a_configuration_error(env: dict[str, str], names: str) -> None:
    with pytest.raises(ConfigurationError, match=names):
        RegionSettings.from_env(env)


def test_the_shortest_takeover_time_is_accepted() -> None:
    env = {"OUTBOX_REGIONS": f"{A},{B}", "AWS_REGION": A, "OUTBOX_TAKEOVER_AFTER_SECONDS": "300"}
    assert RegionSettings.from_env(env) is not None


def test_writer_origin() -> None:
    assert writer_origin({}) is None
    assert writer_origin({"OUTBOX_ORIGIN": B}) == B
    with pytest.raises(ConfigurationError, match="OUTBOX_ORIGIN"):
        writer_origin({"OUTBOX_ORIGIN": "eu west 1"})


def test_origin_region_of_a_row() -> None:
    s = settings(B)
    assert (s.origin_region(None), s.origin_region(C), s.origin_region("sa-east-1")) == (A, C, A)
    assert s.after(B) == (C, A)


# --- the heartbeat item ------------------------------------------------------------------------------


def test_a_heartbeat_round_trips_through_its_item() -> None:
    heartbeat = Heartbeat(A, NOW, YIELDED, NOW - 5, {B: NOW - 1}, {C: NOW - 9}, {B: NOW - 7})
    item = heartbeat.to_item()
    assert item["aggregate_key"] == {"S": "#region#us-east-1"}
    assert item["seq"] == {"N": "0"}
    assert "status" not in item  # one of the outbox's own items: no publisher or census reads it as a row
    assert Heartbeat.from_item(item) == heartbeat


@pytest.mark.parametrize(
    "broken",
    [
        {"beat_at": {"S": "yesterday"}},
        {"state": {"S": "sleeping"}},
        {"region": {"S": "Mars"}},
        {"seen": {"M": {B: {"S": "x"}}}},
        {"since": None},
    ],
)
def test_a_malformed_heartbeat_is_none(broken: dict[str, Any]) -> None:
    item = Heartbeat(A, NOW, OWN, NOW).to_item() | broken
    item = {name: value for name, value in item.items() if value is not None}
    assert Heartbeat.from_item(item) is None


# --- lost, taker_of ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("age", "lost"), [(0, False), (TAKEOVER, False), (TAKEOVER + 1, True), (10 * TAKEOVER, True)]
)
def test_a_region_is_lost_after_the_takeover_time(age: int, lost: bool) -> None:
    assert view(A, beat(B, age)).lost(B) is lost


def test_a_region_without_heartbeat_is_lost_and_this_region_never_is() -> None:
    v = view(A)
    assert v.lost(B)
    assert not v.lost(A)


@pytest.mark.parametrize(
    ("region", "lost_ones", "x", "taker"),
    [
        (A, (), B, C),
        (A, (C,), B, A),
        (B, (), C, A),  # the ring wraps
        (B, (A,), C, B),
        (C, (), A, B),
    ],
)
def test_the_taker_is_the_first_live_region_after(
    region: str, lost_ones: tuple[str, ...], x: str, taker: str
) -> None:
    beats = [beat(r, TAKEOVER + 1 if r in lost_ones or r == x else 0) for r in (A, B, C) if r != region]
    assert view(region, *beats).taker_of(x) == taker


# --- rejoin, yield, own ------------------------------------------------------------------------------


def _state(region: str, *beats: Heartbeat) -> tuple[RegionState, int]:
    return next_state(view(region, *beats))


def test_a_new_region_rejoins() -> None:
    assert _state(A, beat(B), beat(C)) == (REJOINING, NOW)


@pytest.mark.parametrize(("age", "state"), [(FENCE, OWN), (FENCE + 1, REJOINING)])
def test_a_region_whose_own_beat_is_past_the_fence_rejoins(age: int, state: RegionState) -> None:
    decided, since = _state(A, beat(A, age, OWN, since=1), beat(B), beat(C))
    assert decided is state
    assert since == (1 if state is OWN else NOW)


def test_rejoining_ends_once_every_peer_beat_after_it_began() -> None:
    since = NOW - 60_000
    me = beat(A, 60_000, REJOINING, since)
    assert _state(A, me, beat(B, 59_999), beat(C, 59_999)) == (OWN, NOW)
    # A beat at the very moment it began is not after it: no proof replication into it works again.
    assert _state(A, me, beat(B, 60_000), beat(C, 0)) == (REJOINING, since)
    assert _state(A, me, beat(B, 0)) == (REJOINING, since)  # C never beat


@pytest.mark.parametrize(("waited", "state"), [(TAKEOVER - 1, REJOINING), (TAKEOVER, OWN)])
def test_a_silent_peer_counts_as_current_after_the_takeover_time(waited: int, state: RegionState) -> None:
    me = beat(A, 60_000, REJOINING, NOW - waited)
    assert _state(A, me, beat(B, 0), beat(C, 10 * TAKEOVER))[0] is state


def test_a_region_yields_while_a_live_peer_holds_its_origin() -> None:
    holder = beat(C, 0, taking={A: NOW - 5_000})
    rejoined = beat(A, 60_000, REJOINING, NOW - 60_000)
    assert _state(A, rejoined, beat(B, 0), holder) == (YIELDED, NOW)
    # Also from `own`: a peer that took it over (a partition the other way) makes it yield.
    assert _state(A, beat(A, 60_000, OWN, 1), beat(B, 0), holder) == (YIELDED, NOW)
    # A lost holder holds nothing.
    lost_holder = beat(C, TAKEOVER + 1, taking={A: NOW - 5_000})
    assert _state(A, beat(A, 60_000, OWN, 1), beat(B, 0), lost_holder) == (OWN, 1)


@pytest.mark.parametrize(("released_ago", "state"), [(MARGIN - 1, YIELDED), (MARGIN, OWN)])
def test_a_yielded_region_resumes_a_margin_after_the_release(released_ago: int, state: RegionState) -> None:
    yielded = beat(A, 60_000, YIELDED, NOW - 600_000)
    released = beat(C, 0, released={A: NOW - released_ago})
    decided, since = _state(A, yielded, beat(B, 0), released)
    assert decided is state
    assert since == (NOW if state is OWN else NOW - 600_000)


def test_a_recent_release_does_not_stop_a_region_that_owns() -> None:
    assert _state(A, beat(A, 60_000, OWN, 1), beat(B), beat(C, released={A: NOW - 1}))[0] is OWN


# --- takeover and handback -------------------------------------------------------------------------


def test_the_taker_of_a_lost_region_takes_it_over_once() -> None:
    v = view(C, beat(C, 60_000, OWN, 1), beat(A, 0), beat(B, TAKEOVER + 1))
    first = next_heartbeat(v)
    assert (first.state, dict(first.taking), first.beat_at) == (OWN, {B: NOW}, NOW)
    assert first.seen == {A: NOW, B: NOW - TAKEOVER - 1}
    # Next run: still held, since the same moment.
    later = RegionView(v.settings, {**v.heartbeats, C: first}, NOW + 60_000)
    assert dict(next_heartbeat(later).taking) == {B: NOW}


def test_only_the_taker_takes_over() -> None:
    assert not takeover(view(A, beat(A, 0), beat(B, TAKEOVER + 1), beat(C, 0)), B)  # C's to take
    assert takeover(view(A, beat(A, 0), beat(B, TAKEOVER + 1), beat(C, TAKEOVER + 1)), B)
    assert not takeover(view(A, beat(A, 0), beat(B, TAKEOVER), beat(C, TAKEOVER + 1)), B)  # not lost yet


def test_a_region_that_is_not_own_takes_nothing_over() -> None:
    rejoining = view(C, beat(A, 0), beat(B, TAKEOVER + 1))  # C has no beat: it rejoins
    assert next_heartbeat(rejoining).taking == {}


def test_no_region_takes_an_origin_a_live_region_holds() -> None:
    """A and B lost, C holds both; B returns: A's taker is now B, but C holds A: B leaves it."""
    holder = beat(C, 0, taking={A: NOW - 700_000, B: NOW - 700_000})
    b_back = beat(B, 60_000, OWN, NOW - 300_000)
    v = view(B, b_back, beat(A, 10 * TAKEOVER), holder)
    assert v.taker_of(A) == B
    decided = next_heartbeat(v)
    assert decided.state is YIELDED  # C holds B's origin too
    assert decided.taking == {}


@pytest.mark.parametrize(("seen", "handed_back"), [(NOW - 70_001, False), (NOW - 70_000, True)])
def test_the_taker_hands_back_once_the_region_read_the_takeover(seen: int, handed_back: bool) -> None:
    taken_at = NOW - 70_000
    c = beat(C, 60_000, OWN, 1, taking={B: taken_at})
    b = beat(B, 0, YIELDED, NOW - 30_000, seen={C: seen})
    v = view(C, c, beat(A, 0), b)
    assert handback(v, B, taken_at) is handed_back
    decided = next_heartbeat(v)
    assert (B in decided.taking, decided.released.get(B)) == ((False, NOW) if handed_back else (True, None))


def test_no_handback_to_a_region_still_lost() -> None:
    c = beat(C, 60_000, OWN, 1, taking={B: NOW - 70_000})
    b = beat(B, TAKEOVER + 1, YIELDED, 0, seen={C: NOW})
    assert next_heartbeat(view(C, c, beat(A, 0), b)).taking == {B: NOW - 70_000}


RECORD_LIFETIME = TAKEOVER + TAKEN_RECORD_DAYS * 86_400_000


@pytest.mark.parametrize(
    ("age", "kept"), [(TAKEOVER, True), (RECORD_LIFETIME - 1, True), (RECORD_LIFETIME, False)]
)
def test_a_release_is_kept_as_long_as_the_taken_records(age: int, kept: bool) -> None:
    c = beat(C, 60_000, OWN, 1, released={B: NOW - age})
    assert (B in next_heartbeat(view(C, c, beat(A), beat(B))).released) is kept


# --- ownership ---------------------------------------------------------------------------------------

T0 = datetime.fromtimestamp(NOW / 1000, UTC)


def _row(origin: str | None) -> dict[str, Any]:
    return {} if origin is None else {"origin": {"S": origin}}


def test_what_a_region_owns() -> None:
    a = ownership(view(A, beat(B), beat(C)), beat(A, 0, OWN, 1, taking={B: 1}))
    assert [a.owns(_row(o)) for o in (A, None, B, C)] == [True, True, True, False]
    assert [a.taken(_row(o)) for o in (A, None, B, C)] == [False, False, True, False]
    b = ownership(view(B, beat(A), beat(C)), beat(B, 0, OWN, 1))
    assert [b.owns(_row(o)) for o in (A, None, B, "sa-east-1")] == [False, False, True, False]
    for state in (REJOINING, YIELDED):
        quiet = ownership(view(A, beat(B), beat(C)), beat(A, 0, state, 1, taking={B: 1}))
        assert not any(quiet.owns(_row(o)) for o in (A, None, B, C))
    assert not Ownership(settings(), None).owns(_row(A))


@pytest.mark.parametrize(
    ("age", "state", "origin", "saved", "streams"),
    [
        (0, OWN, A, 0, True),
        (FENCE, OWN, A, 0, True),
        (FENCE + 1, OWN, A, 0, False),  # the sweeper stopped beating
        (0, YIELDED, A, 0, False),
        (0, REJOINING, A, 0, False),
        (0, OWN, B, 0, False),  # another region's
        (0, OWN, None, 0, True),  # A is home
        (0, OWN, A, -1, False),  # saved before the resume: the sweeper's
    ],
)
def test_what_the_stream_publisher_may_publish(
    age: int, state: RegionState, origin: str | None, saved: int, streams: bool
) -> None:
    since = NOW - 30_000
    own = ownership(view(A, beat(B), beat(C)), beat(A, age, state, since))
    occurred = datetime.fromtimestamp((since + saved) / 1000, UTC)
    assert own.may_stream(_row(origin), occurred, T0) is streams


def test_rows_from_before_the_resume_need_the_takeover_record() -> None:
    since = NOW - 30_000
    own = ownership(view(A, beat(B), beat(C)), beat(A, 0, OWN, since))
    before = datetime.fromtimestamp((since - 1) / 1000, UTC)
    assert own.from_before_resume(_row(A), before)
    assert own.from_before_resume(_row(A), None)  # an unreadable date: checked
    assert not own.from_before_resume(_row(A), datetime.fromtimestamp(since / 1000, UTC))
    assert not own.from_before_resume(_row(B), before)


def test_a_claim_accepts_takers_that_hold_no_more() -> None:
    v = view(A, beat(A), beat(B, 0, taking={C: 1}), beat(C, TAKEOVER + 1))
    own = ownership(v, v.own)
    assert own.accepts(C) == {A, C}  # B holds C's origin (C never stamps its own rows)
    assert own.accepts(B) == {A, B, C}
    lost_holder = view(A, beat(A), beat(B, TAKEOVER + 1, taking={C: 1}), beat(C, 0))
    assert ownership(lost_holder, lost_holder.own).accepts(C) == {A, B, C}


# --- late replicas -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("claimed", "published", "seq", "verdict"),
    [
        ({4, 5}, {4, 5}, 4, TakenVerdict.DUPLICATE),
        ({4, 5}, {4, 5}, 3, TakenVerdict.LATE_REPLICA),  # never seen by the taker, below what went out
        ({4, 5}, {4, 5}, 6, None),  # after all the taker published
        ({4, 5}, set(), 3, TakenVerdict.LATE_REPLICA),  # the taker may have published 4 and 5
        ({4, 5}, {4}, 5, None),  # claimed, maybe published: at worst a duplicate, in order
        ({4, 5}, {4}, 4, TakenVerdict.DUPLICATE),
        (set(), set(), 1, None),
    ],
)
def test_a_takeover_record_decides_a_pending_row(
    claimed: set[int], published: set[int], seq: int, verdict: TakenVerdict | None
) -> None:
    record = TakenRecord("Order#1", A, C, frozenset(claimed), frozenset(published))
    assert record.verdict(seq) is verdict


def test_a_takeover_record_reads_its_item() -> None:
    item = {
        "aggregate_key": {"S": "#taken#Order#1"},
        "seq": {"N": "0"},
        "origin": {"S": A},
        "by": {"S": C},
        "claimed": {"NS": ["4", "5"]},
        "published": {"NS": ["4"]},
    }
    assert TakenRecord.from_item(item) == TakenRecord("Order#1", A, C, frozenset({4, 5}), frozenset({4}))


def test_epoch_ms() -> None:
    assert epoch_ms(T0) == NOW


# --- where a returning region reads the takers' records ------------------------------------------------


def test_the_takers_of_an_origin_are_the_peers_naming_it_in_taking_or_released_lost_or_not() -> None:
    b = beat(B, TAKEOVER + 1, OWN, 0, taking={A: NOW - 700_000})  # lost since
    c = beat(C, 0, OWN, 0, released={A: NOW - 1})
    assert view(A, beat(A), b, c).takers_of(A) == (B, C)
    assert view(A, beat(A), beat(B), beat(C)).takers_of(A) == ()


def test_two_takers_records_of_one_aggregate_merge_every_seq() -> None:
    b = TakenRecord("Order#1", A, B, claimed=frozenset({2, 3}), published=frozenset({2}))
    c = TakenRecord("Order#1", A, C, claimed=frozenset({5}), published=frozenset({3, 5}))
    merged = b.merged(c)
    assert (merged.claimed, merged.published, merged.by) == (frozenset({2, 3, 5}), frozenset({2, 3, 5}), C)
    assert merged.verdict(4) is TakenVerdict.LATE_REPLICA
