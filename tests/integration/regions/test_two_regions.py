"""Issue 34's proof: one outbox across two regions (DynamoDB global tables), end to end, in process.

Two moto regions, the outbox table in each kept in step by the local runtime's replicator, each region's real
publisher (fed by the stream mapping emulator with its region's filter patterns) and real sweeper (its
heartbeat, ownership, takeover, late replicas) publishing to the region's own topic and bus, on a virtual
clock (tests.reliability.regions). The promise is checked on what a consumer of both regions' destinations
gets (tests.reliability.invariants): per aggregate in seq order on every destination, every committed event
published or FAILED with its reason, nothing invented, no copy but the documented in-flight one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator

import pytest

from tests.reliability.invariants import CAUSE_CUT_IN_FLIGHT
from tests.reliability.regions import (
    LATE_REPLICA,
    REGIONS,
    TAKEOVER_AFTER_S,
    TwoRegions,
    region_of,
    two_regions,
)
from tests.reliability.system import PUBLISHER, SWEEPER
from tests.reliability.wire import SNS, CrashPoint

A, B = REGIONS
WARM_UP_S = 600


@pytest.fixture
def system() -> Iterator[TwoRegions]:
    with two_regions(seed=34) as system:
        # Given two new regions, each rejoining until its view of the other is current
        assert system.run_until(system.owning, deadline=system.clock.seconds() + WARM_UP_S)
        yield system


def published(system: TwoRegions, destination: str = SNS) -> list[tuple[str, str, int]]:
    """(publishing region, aggregate, seq) of each publication on `destination`, in wire order."""
    return [
        (region_of(p.function), p.aggregate_key, p.seq)
        for p in system.wire.published
        if p.destination == destination
    ]


def copies(system: TwoRegions) -> Counter[tuple[str, str]]:
    return Counter((p.event_id, p.destination) for p in system.wire.published)


def run_only(system: TwoRegions, region: str, done: Callable[[], bool], seconds: float = 10) -> None:
    """`region`'s functions alone run (no replication step) until `done`."""
    deadline = system.clock.seconds() + seconds
    while not done():
        assert system.clock.seconds() < deadline, "not done in time"
        system.sides[region].round()
        system.clock.advance(0.25)


def drain(system: TwoRegions, seconds: float = 3600) -> bool:
    """Run until nothing is left to do, the operator skipping what the runbook says (late replicas)."""
    deadline = system.clock.seconds() + seconds
    while system.clock.seconds() < deadline:
        system.operate()
        if system.run_until(system.settled, deadline=min(deadline, system.clock.seconds() + 120)):
            return True
    return system.settled()


def test_both_regions_live_each_event_is_published_once_by_its_own_region(system: TwoRegions) -> None:
    # When writers in both regions save events (each row stamped with its origin) and both regions run
    for n in range(3):
        for _ in range(2):
            system.write(A, f"a{n}")
            system.write(B, f"b{n}")
    assert drain(system)

    # Then each event went out exactly once on each destination, from its own region (the other region's
    # stream carried every row too, and its publisher published none of them)
    assert set(copies(system).values()) == {1}
    assert len(system.wire.published) == 2 * 12
    assert all(region_of(p.function) == system.origins[p.event_id] for p in system.wire.published)
    verdict = system.verdict()
    assert verdict.ok, verdict.violations()
    assert system.diverged() == []


def test_a_cut_region_is_taken_over_in_order_and_resumes_with_nothing_twice(system: TwoRegions) -> None:
    # Given events published while both live
    for n in range(2):
        system.write(A, f"a{n}")
        system.write(B, f"b{n}")
    assert drain(system)

    # and, at the moment A is cut off: rows of A pending (replicated to B); an event A published whose settle
    # had not replicated (in flight); and an aggregate whose seq 1 had not replicated while its seq 2 had
    system.write(A, "flight")
    system.replicator.step()
    # A's publisher publishes it and settles it in A's replica only
    run_only(system, A, lambda: system.sides[A].row("Account#flight", 1) is None)
    assert any(p.aggregate_key == "Account#flight" for p in system.wire.published)
    before = len(published(system))
    for _seq in range(1, 4):
        system.write(A, "pending")
    system.write(A, "a0")
    late_event = system.write(A, "late")
    system.write(A, "late")
    unreplicated = {("Account#late", "1"), ("Account#flight", "1")}
    system.replication.hold_writes(
        lambda d: (d.keys["aggregate_key"]["S"], d.keys["seq"]["N"]) in unreplicated, 900
    )
    system.replicator.step()
    system.cut(A)
    assert system.sides[B].row("Account#late", 1) is None
    assert system.sides[B].row("Account#flight", 1) is not None
    assert system.sides[B].row("Account#late", 2) is not None
    assert system.sides[B].row("Account#pending", 3) is not None

    # When B runs on past the takeover time
    system.run_for(TAKEOVER_AFTER_S + 180)

    # Then B took A's origin over and published A's pending rows, per aggregate in seq order
    beat = system.sides[B].heartbeat()
    assert beat is not None
    assert A in beat.taking
    after = published(system)[before:]
    assert [(r, k, s) for r, k, s in after if k == "Account#pending"] == [
        (B, "Account#pending", s) for s in (1, 2, 3)
    ]
    assert (B, "Account#a0", 2) in after
    assert (B, "Account#late", 2) in after  # its seq 1 never reached B: what the late-replica record is for
    assert (B, "Account#flight", 1) in after  # A's settle of it never replicated: published again
    assert all(r == B for r, _, _ in after)

    # When A comes back
    returned = system.clock.seconds()
    system.restore(A)
    assert system.run_until(
        lambda: (
            (row := system.sides[A].row("Account#late", 1)) is not None and row["status"]["S"] == "FAILED"
        ),
        deadline=system.clock.seconds() + 1800,
    )

    # Then the row that had not replicated is FAILED as a late replica, naming the seq B published, and was
    # never published
    row = system.sides[A].row("Account#late", 1)
    assert row is not None
    assert LATE_REPLICA in row["last_error"]["S"]
    assert "seq 2" in row["last_error"]["S"]
    assert late_event not in {p.event_id for p in system.wire.published}
    assert late_event in system.wire.poison_sent

    # and once the operator skips it (the runbook), everything drains: A owns its origin again, nothing that
    # had replicated was lost, and the only copy is the event in flight when A was cut
    assert drain(system)
    verdict = system.verdict()
    assert verdict.ok, verdict.violations()
    assert verdict.duplicates[CAUSE_CUT_IN_FLIGHT] == 2  # Account#flight seq 1, on the topic and on the bus
    assert {c.event_id for c in verdict.copies} == {
        p.event_id for p in system.wire.published if p.aggregate_key == "Account#flight"
    }
    assert system.diverged() == []
    # A rejoined, yielded while B held its origin, and owns it again; B handed it back
    states = [beat.state for beat in system.beats if beat.region == A and beat.at >= returned]
    assert states[0] == "rejoining"
    assert "yielded" in states
    assert states[-1] == "own"
    assert [beat.taking for beat in system.beats if beat.region == B][-1] == ()
    figures = system.figures(verdict)
    assert figures[B]["taken_over"] == 6  # pending 1-3, a0 2, late 2, flight 1
    assert figures[A]["late_replicas"] == 1
    assert figures[B]["takeovers"] == 1


def test_a_claim_racing_a_takeover_is_never_lost_and_a_settle_never_resurrected(system: TwoRegions) -> None:
    # Given a row of A that A's publisher claims (its stream record came late) and then A is cut off before
    # the claim replicates: the claim is a write in A only
    system.write(A, "race")
    system.replicator.step()
    system.sides[A].streams.stamp()
    system.clock.advance(
        90
    )  # its stream record comes late (older than the grace): whoever takes it claims it
    for function in (PUBLISHER, SWEEPER):
        system.wire.crash_points.append(
            CrashPoint(
                f"{function}@{A}",
                "dynamodb",
                "UpdateItem",
                "after",
                condition=lambda params: (
                    params.get("ReturnValues") == "ALL_NEW"
                    and params["Key"]["aggregate_key"]["S"] == "Account#race"
                ),
                on_fire=lambda: system.cut(A),
                kind="cut",
            )
        )
    run_only(system, A, lambda: system.cut_regions() == [A])
    claimed_in_a = system.sides[A].row("Account#race", 1)
    assert claimed_in_a is not None
    assert "lease_owner" in claimed_in_a
    assert "lease_owner" not in (system.sides[B].row("Account#race", 1) or {})

    # When B takes the origin over (its own claim of the row, taken_by B), publishes and settles it, and A
    # comes back while replication shuffles the two regions' writes of the row
    system.run_for(TAKEOVER_AFTER_S + 180)
    assert [(r, s) for r, k, s in published(system) if k == "Account#race"] == [(B, 1)]
    system.restore(A)
    assert drain(system)

    # Then A's older claim lost to B's newer writes in both replicas (last writer wins): the row is gone from
    # both, published once, never again by A
    assert system.sides[A].row("Account#race", 1) is None
    assert system.sides[B].row("Account#race", 1) is None
    assert [(r, s) for r, k, s in published(system) if k == "Account#race"] == [(B, 1)]
    assert system.replicator.stats()["superseded"] >= 1
    verdict = system.verdict()
    assert verdict.ok, verdict.violations()
    assert system.diverged() == []


def test_settles_and_claims_made_in_both_regions_while_replication_lags_converge(system: TwoRegions) -> None:
    # Given both regions writing and publishing while replication is held back a minute: each region's
    # inserts, claims and settles (deletes) of its rows reach the other replica late, shuffled
    system.replication.pause(60)
    for n in range(4):
        for _ in range(3):
            system.write(A, f"a{n}", age_s=90 if n == 0 else 0)  # a0's records come late: claimed first
            system.write(B, f"b{n}", age_s=90 if n == 0 else 0)
        system.run_for(5)

    # When replication catches up and everything drains
    assert drain(system)

    # Then no settled row came back (an insert arriving after its delete is dropped), no claim was lost, the
    # replicas agree, and each event went out once
    for side in system.sides.values():
        assert side.event_rows() == []
    assert system.diverged() == []
    assert set(copies(system).values()) == {1}
    verdict = system.verdict()
    assert verdict.ok, verdict.violations()
    assert system.replicator.stats()["superseded"] >= 1  # a write that arrived after a newer one was dropped


def test_a_region_back_before_the_takeover_time_publishes_its_own_rows(system: TwoRegions) -> None:
    # Given rows of A pending (replicated) when A is cut off for less than the takeover time
    for _ in range(3):
        system.write(A, "short")
    system.replicator.step()
    system.cut(A)
    system.run_for(TAKEOVER_AFTER_S / 2)
    assert published(system) == []

    # When it comes back
    system.restore(A)
    assert drain(system)

    # Then no region took anything over: A published its rows itself, in order, once
    assert published(system) == [(A, "Account#short", seq) for seq in (1, 2, 3)]
    assert all(not beat.taking for beat in system.beats)
    verdict = system.verdict()
    assert verdict.ok, verdict.violations()
    assert not verdict.copies


def test_a_partition_past_the_takeover_time_publishes_twice_as_documented(system: TwoRegions) -> None:
    # Given rows of A replicated to B, then replication between the regions down past the takeover time
    # while both regions' functions run (a partition, not a region lost: two regions cannot tell them apart
    # without a third witness): A publishes its rows, its settles never reach B
    for _ in range(2):
        system.write(A, "split")
    system.replicator.step()
    system.replicator.cut(A)
    system.run_for(TAKEOVER_AFTER_S + 180)

    # When replication comes back
    system.replicator.restore(A)
    assert drain(system)

    # Then each region took the other over, and A's events went out from both: the duplicates
    # docs/multi-region.md names for a partition, which nothing else explains
    assert {beat.region for beat in system.beats if beat.taking} == {A, B}
    split = [(r, s) for r, k, s in published(system) if k == "Account#split"]
    assert sorted(split) == [(A, 1), (A, 2), (B, 1), (B, 2)]
    verdict = system.verdict()
    assert len(verdict.unexplained) == 4
    assert not verdict.lost
    assert not verdict.invented
    assert not verdict.out_of_order


def taken_over_past_a_late_seq(system: TwoRegions, aggregate: str) -> str | None:
    """A writes seq 1 and 2 of `aggregate`; seq 2 replicates to B, seq 1 does not; A is cut off and B takes
    it over and publishes seq 2. Answers seq 1's event id."""
    late_event = system.write(A, aggregate)
    system.write(A, aggregate)
    system.replication.hold_writes(
        lambda d: (d.keys["aggregate_key"]["S"], d.keys["seq"]["N"]) == (f"Account#{aggregate}", "1"), 3600
    )
    system.replicator.step()
    system.cut(A)
    system.run_for(TAKEOVER_AFTER_S + 180)
    assert [(r, s) for r, k, s in published(system) if k == f"Account#{aggregate}"] == [(B, 2)]
    return late_event


def test_a_takeover_record_lagging_past_the_margin_keeps_a_late_replica_in_order(system: TwoRegions) -> None:
    # Given A cut off with seq 2 of an aggregate replicated to B and seq 1 not: B takes A over and publishes
    # seq 2, its #taken# record of the aggregate saying so
    late_event = taken_over_past_a_late_seq(system, "lagging")

    # When A comes back while that record alone replicates to A late, past the handback's margin (every
    # other write flows: replication is per item, with no order across items)
    system.replication.hold_writes(
        lambda d: d.keys["aggregate_key"]["S"] == "#taken#Account#lagging" and d.target == A,
        900,
        lasting=True,
    )
    system.restore(A)
    system.run_for(800)

    # Then A never publishes seq 1 after the seq 2 B published: it read B's record in B's own replica (not
    # its lagging copy in A's) and keeps seq 1 FAILED as a late replica, naming the seq B published
    assert late_event not in {p.event_id for p in system.wire.published}
    row = system.sides[A].row("Account#lagging", 1)
    assert row is not None
    assert row["status"]["S"] == "FAILED"
    assert LATE_REPLICA in row["last_error"]["S"]
    assert "seq 2" in row["last_error"]["S"]


def test_a_taker_lost_after_the_return_saw_its_takeover_keeps_the_rows_it_may_have_dealt_with_waiting(
    system: TwoRegions,
) -> None:
    # Given A cut off with seq 2 of an aggregate replicated to B and seq 1 not: B takes A over and publishes
    # seq 2, its #taken# record of the aggregate saying so
    late_event = taken_over_past_a_late_seq(system, "stranded")

    # When A comes back and reads B's heartbeat holding its origin (it yields), B's record lagging into A's
    # replica, and B is lost before A could read that record in B's replica
    system.replication.hold_writes(
        lambda d: d.keys["aggregate_key"]["S"] == "#taken#Account#stranded" and d.target == A,
        7200,
        lasting=True,
    )
    system.restore(A)
    assert system.run_until(
        lambda: (beat := system.sides[A].heartbeat()) is not None and beat.state.value == "yielded",
        deadline=system.clock.seconds() + 600,
    )
    system.cut(B)
    system.run_for(2 * TAKEOVER_AFTER_S + 300)

    # Then A, owning its origin again (and B's), never publishes seq 1 on a guess: it waits PENDING while
    # B's replica cannot be read
    assert system.sides[A].heartbeat().state.value == "own"  # type: ignore[union-attr]
    assert late_event not in {p.event_id for p in system.wire.published}
    row = system.sides[A].row("Account#stranded", 1)
    assert row is not None
    assert row["status"]["S"] == "PENDING"

    # and once B's replica answers again, A reads B's record there and keeps seq 1 FAILED as a late replica
    system.restore(B)
    assert system.run_until(
        lambda: (
            (row := system.sides[A].row("Account#stranded", 1)) is not None and row["status"]["S"] == "FAILED"
        ),
        deadline=system.clock.seconds() + 1800,
    )
    row = system.sides[A].row("Account#stranded", 1)
    assert row is not None
    assert LATE_REPLICA in row["last_error"]["S"]
    assert late_event not in {p.event_id for p in system.wire.published}


def test_a_taken_over_row_whose_settle_lags_is_settled_unpublished_on_return(system: TwoRegions) -> None:
    # Given A cut off with a row pending, which B takes over and publishes; B's settle of it reaches A late
    # (past A's return and the handback), its #taken# record in time
    taken_event = system.write(A, "avoided")
    assert taken_event is not None
    system.replicator.step()
    system.cut(A)
    system.replication.hold_writes(
        lambda d: d.keys["aggregate_key"]["S"] == "Account#avoided" and d.image is None and d.target == A,
        1200,
        lasting=True,
    )
    system.run_for(TAKEOVER_AFTER_S + 180)
    assert [(r, s) for r, k, s in published(system) if k == "Account#avoided"] == [(B, 1)]

    # When A comes back and owns its origin again while the row is still PENDING in its replica
    system.restore(A)
    assert system.run_until(lambda: system.duplicates_avoided[A] > 0, deadline=system.clock.seconds() + 1000)

    # Then A settled it without publishing it again (its record says B published it)
    assert system.sides[A].row("Account#avoided", 1) is None
    assert [p.event_id for p in system.wire.published].count(
        taken_event
    ) == 2  # B's, on the topic and the bus
    system.replication.release()
    assert drain(system)
    verdict = system.verdict()
    assert verdict.ok, verdict.violations()
    assert not verdict.copies
    assert system.figures(verdict)[A]["duplicates_avoided"] == 1


def test_rows_saved_without_origin_are_the_home_regions_wherever_they_were_saved(system: TwoRegions) -> None:
    # Given another writer, which stamps no origin, saving rows in the other region
    for _ in range(3):
        system.write(B, "unstamped", stamped=False)

    # When they replicate and both regions run
    assert drain(system)

    # Then the home region published them (its mapping alone passes rows without origin), once, in order
    assert published(system) == [(A, "Account#unstamped", seq) for seq in (1, 2, 3)]
    verdict = system.verdict()
    assert verdict.ok, verdict.violations()
    assert not verdict.copies


def test_rows_without_origin_are_taken_over_with_the_home_region(system: TwoRegions) -> None:
    # Given the home region cut off while another writer, which stamps no origin, saves rows in the other
    system.cut(A)
    for _ in range(2):
        system.write(B, "unstamped", stamped=False)

    # When the other region runs past the takeover time, and the home region comes back
    system.run_for(TAKEOVER_AFTER_S + 180)
    taken = published(system)
    system.restore(A)
    assert drain(system)

    # Then the other region published them once it held the home region's origin, in order, and nothing again
    assert taken == [(B, "Account#unstamped", 1), (B, "Account#unstamped", 2)]
    assert published(system) == taken
    verdict = system.verdict()
    assert verdict.ok, verdict.violations()


@pytest.mark.xfail(
    strict=True,
    reason="documented limit (docs/multi-region.md, 'A taker lost before the returning region saw it take "
    "over'): B is lost before any of its writes since A was cut (its heartbeat naming A in taking among "
    "them) replicated to A, so A knows of no takeover and no replica to read B's record in: it publishes "
    "the late row after the successor B published. With the takeover seen, the rows wait: "
    "test_a_taker_lost_after_the_return_saw_its_takeover_keeps_the_rows_it_may_have_dealt_with_waiting",
)
def test_a_taker_lost_before_its_record_replicated_keeps_a_late_replica_in_order(system: TwoRegions) -> None:
    # Given A cut off with seq 2 of an aggregate replicated to B and seq 1 not: B takes A over and publishes
    # seq 2
    late_event = taken_over_past_a_late_seq(system, "orphan")

    # When B is lost in turn before its writes (the #taken# record among them) replicated, and A comes back
    system.cut(B)
    system.restore(A)
    system.run_for(2 * TAKEOVER_AFTER_S + 300)

    # Then A never publishes seq 1 after the seq 2 B published
    assert late_event not in {p.event_id for p in system.wire.published}
