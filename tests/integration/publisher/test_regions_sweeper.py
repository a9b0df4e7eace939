"""The sweeper of an outbox across two regions, on moto (regions_world.py): each region publishes its own
origin once; a lost region's rows are taken over, published in order and handed back; a returning region
publishes nothing twice that the taker's record names, and keeps a late replica FAILED (docs/multi-region.md).

Each test checks the promise: per aggregate, nothing published before its predecessor as far as it had
replicated, every event published once (beyond the documented in-flight case), nothing lost that had
replicated, nothing invented.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest

from outbox.model import RowKey
from outbox.regions import RegionState
from outbox_ops.release import redrive
from outbox_publisher.leases import Claim, DynamoDBRowClaimer, Fence, Lease
from tests.integration.publisher.publisher_world import SnsClientFailingEvents, World
from tests.integration.publisher.regions_world import (
    INTERVAL,
    MARGIN,
    TAKEOVER,
    A,
    B,
    C,
    TwoRegions,
    key_of,
    three_regions,
    two_regions,
)
from tests.integration.publisher.sweeping import OUT, assert_in_seq_order, key, statuses
from tests.support.events import event


@pytest.fixture
def regions(world: World) -> TwoRegions:
    return two_regions(world)


def test_each_region_publishes_its_own_origin_once(regions: TwoRegions) -> None:
    # Given orders saved in both regions, replicated to both
    a = [event("A", seq) for seq in (1, 2, 3)]
    b = [event("B", seq) for seq in (1, 2)]
    regions.world(A).write(*a, origin=A)
    regions.world(B).write(*b, origin=B)
    regions.replication.both()

    # When both sweepers run for a few intervals, replication between them
    first = regions.sweep(A)
    regions.rounds(4)

    # Then a new region first rejoins (publishing nothing), then each published its own origin's events,
    # each exactly once, in seq order, and every row left both tables
    assert first.region is not None
    assert first.region.state is RegionState.REJOINING
    assert first.swept == 0
    published = regions.published()
    assert Counter(published) == Counter(e.event_id for e in a + b)
    assert_in_seq_order(published, a, b)
    assert statuses(regions.world(A), *a, *b) == [OUT] * 5
    assert statuses(regions.world(B), *a, *b) == [OUT] * 5
    for region in (A, B):
        report = regions.sweep(region)
        assert report.region is not None
        assert (report.region.state, report.region.taking) == (RegionState.OWN, ())
    # and each region kept its own sweep position (one item each: replicated, never overwritten by the other)
    regions.replication.both()
    world_a = regions.world(A)
    assert {
        item["aggregate_key"]["S"]
        for item in world_a.dynamodb.scan(TableName=world_a.tables.outbox)["Items"]
        if item["aggregate_key"]["S"].startswith("#sweeper")
    } == {f"#sweeper#{A}", f"#sweeper#{B}"}


def test_rows_without_origin_belong_to_the_home_region(regions: TwoRegions) -> None:
    # Given another writer's rows, saved without origin in region B
    rows = [event("X", seq) for seq in (1, 2)]
    regions.world(B).write(*rows)
    regions.replication.both()

    # When only B's sweeper runs (A's is not deployed yet: A is not lost until the takeover time)
    regions.rounds(4, regions=(B,))

    # Then B published none of them: they are A's, the home region's
    assert regions.published() == []
    assert statuses(regions.world(B), *rows) == ["PENDING"] * 2

    # And once A's sweeper runs, A publishes them, once, in order
    regions.rounds(4)
    published = regions.published()
    assert published == [e.event_id for e in rows]


def test_a_lost_region_is_taken_over_in_order_then_handed_back_with_nothing_twice(
    regions: TwoRegions,
) -> None:
    # Given both regions live
    regions.rounds(3)
    # and A's order with five events: 1, 2, 4 and 5 replicated to B, 3 not (A was cut off before it did)
    order = [event("A", seq) for seq in (1, 2, 3, 4, 5)]
    world_a, world_b = regions.world(A), regions.world(B)
    world_a.write(*order, origin=A)
    late = ("Order#A", "3")
    regions.replication.copy(A, B, hold=lambda key: key == late)

    # When A is cut off (its sweeper stops, nothing replicates) past the takeover time, B sweeping alone
    regions.rounds(int(TAKEOVER / INTERVAL) + 2, regions=(B,), replicate=False)

    # Then B took A's origin over and published what it saw of A's order, in order, stamping taken_by
    taking = regions.sweep(B)
    assert taking.region is not None
    assert taking.region.taking == (A,)
    by_b = regions.published()
    assert by_b == [order[0].event_id, order[1].event_id, order[3].event_id, order[4].event_id]
    assert statuses(world_b, order[0], order[1], order[3], order[4]) == [OUT] * 4

    # When A comes back: replication resumes, except the delete of seq 2 (still in flight)
    regions.replication.copy(B, A, hold=lambda key: key == ("Order#A", "2"))
    regions.replication.copy(A, B, hold=lambda key: key == late)
    returning = regions.sweep(A)
    assert returning.region is not None
    assert returning.region.state is RegionState.REJOINING
    # and both run on, replicating, past the handback and its margin
    regions.advance()
    for _ in range(int((MARGIN + 3 * INTERVAL) / INTERVAL)):
        regions.sweep(B)
        regions.replication.copy(B, A, hold=lambda key: key == ("Order#A", "2"))
        regions.replication.copy(A, B, hold=lambda key: key == late)
        regions.sweep(A)
        regions.replication.copy(B, A, hold=lambda key: key == ("Order#A", "2"))
        regions.replication.copy(A, B, hold=lambda key: key == late)
        regions.advance()

    # Then B handed A's origin back and A owns it again
    back_b, back_a = regions.sweep(B), regions.sweep(A)
    assert back_b.region is not None
    assert back_a.region is not None
    assert back_b.region.taking == ()
    assert back_a.region.state is RegionState.OWN

    # and nothing was published twice: seq 2, whose settle had not replicated, was settled by A unpublished
    assert regions.published() == []
    assert world_a.stored(order[1]) is None
    # and seq 3, which B never saw while it published 4 and 5, is kept FAILED for an operator, not published
    # after its successors
    row = world_a.row(order[2])
    assert row["status"]["S"] == "FAILED"
    assert row["last_error"]["S"].startswith("late_replica: LateReplica: seq 3 replicated after region")
    assert "released_at" not in row
    poison = world_a.poison()
    assert [(p["reason"], p["seq"]) for p in poison] == [("late_replica", 3)]
    # and every other event of the order was published exactly once
    assert Counter(by_b) == Counter(e.event_id for e in order if e.seq != 3)
    # and once every write has replicated (B's delete of seq 2, older than A's claim and settle of it), seq 2
    # stays settled in both replicas: A's claim brought it back in B, A's settle removed it again
    regions.replication.both()
    assert (world_a.stored(order[1]), world_b.stored(order[1])) == (None, None)

    # When an operator redrives the late replica (announcing it after its successors: their decision)
    redrive(
        world_a.dynamodb,
        world_a.tables.outbox,
        key(order[2]),
        reason="late",
        actor="ops",
        now=world_a.clock(),
    )
    regions.sweep(A)

    # Then A publishes it once, and its row is out
    assert regions.published() == [order[2].event_id]
    assert statuses(world_a, order[2]) == [OUT]


def test_a_returning_region_resumes_alone_when_nothing_was_taken_over(regions: TwoRegions) -> None:
    # Given both live, and A cut off for less than the takeover time with a pending row
    regions.rounds(3)
    row = event("A", 1)
    regions.world(A).write(row, origin=A)
    regions.replication.both()
    regions.rounds(3, regions=(B,), replicate=False)

    # When A comes back
    regions.replication.both()
    back = regions.sweep(A)
    assert back.region is not None
    assert back.region.state is RegionState.REJOINING  # it did not run: it publishes nothing yet
    assert back.swept == 0
    regions.advance()
    regions.rounds(2)

    # Then B never took it over, and A published it once
    assert regions.published() == [row.event_id]
    assert statuses(regions.world(A), row) == [OUT]


def test_a_region_yields_while_a_peer_holds_its_origin_and_claims_none_of_its_rows(
    regions: TwoRegions,
) -> None:
    # Given both live and A's pending row stamped taken_by B, while B's heartbeat says it holds A's origin
    regions.rounds(3)
    row = event("A", 1)
    world_a = regions.world(A)
    world_a.write(row, origin=A)
    world_a.dynamodb.update_item(
        TableName=world_a.tables.outbox,
        Key={"aggregate_key": {"S": row.aggregate_key}, "seq": {"N": "1"}},
        UpdateExpression="SET taken_by = :b",
        ExpressionAttributeValues={":b": {"S": B}},
    )
    heartbeat_b = world_a.dynamodb.get_item(
        TableName=world_a.tables.outbox,
        Key={"aggregate_key": {"S": f"#region#{B}"}, "seq": {"N": "0"}},
        ConsistentRead=True,
    )["Item"]
    heartbeat_b["taking"] = {"M": {A: {"N": heartbeat_b["beat_at"]["N"]}}}
    world_a.put_raw(heartbeat_b)

    # When A sweeps (it yields to B now: B's heartbeat holds its origin)
    report = regions.sweep(A)

    # Then A published nothing and left the row as it was
    assert report.region is not None
    assert report.region.state is RegionState.YIELDED
    assert regions.published() == []
    assert world_a.row(row)["status"]["S"] == "PENDING"
    assert "lease_owner" not in world_a.row(row)
    assert key_of(world_a.row(row)) == (row.aggregate_key, "1")


def test_a_region_returning_between_a_lost_region_and_its_taker_does_not_take_it_over(world: World) -> None:
    """Ring A, B, C: A and B lost, C holds both origins. B returns: A's taker by the ring is now B, but C
    holds A's origin, so B leaves it: one owner at a time, and A's order goes out once, in order."""
    three = three_regions(world)
    three.rounds(4)
    order = [event("A", seq) for seq in (1, 2, 3)]
    world_a, world_c = three.world(A), three.world(C)
    world_a.write(*order, origin=A)
    three.replication.copy(A, C)
    # C's topic refuses A's second event for now: the order waits in C's hands
    sns = SnsClientFailingEvents(world_c.sns, {order[1].event_id})
    three.sweepers[C] = three.sweeper(C, sns_client=sns)

    # When A and B are cut off past the takeover time, C sweeping alone
    three.rounds(int(TAKEOVER / INTERVAL) + 3, regions=(C,), replicate=False)
    taking = three.sweep(C)
    assert taking.region is not None
    assert set(taking.region.taking) == {A, B}
    assert three.published() == [order[0].event_id]

    # When B returns (B and C replicate; A stays cut off) and both sweep past B's handback and its margin
    for _ in range(int((MARGIN + 4 * INTERVAL) / INTERVAL)):
        three.replication.copy(C, B)
        three.sweep(B)
        three.replication.copy(B, C)
        three.sweep(C)
        three.advance()

    # Then B owns its origin again and took nothing over; C still holds A's
    back_b, still_c = three.sweep(B), three.sweep(C)
    assert back_b.region is not None
    assert still_c.region is not None
    assert (back_b.region.state, back_b.region.taking) == (RegionState.OWN, ())
    assert still_c.region.taking == (A,)
    assert three.published() == []  # order 2 still refused; 3 waits behind it

    # And once C's topic takes it, C publishes the rest of A's order, once each, in order
    three.sweepers[C] = three.sweeper(C)
    for _ in range(int(timedelta(minutes=16) / INTERVAL)):  # past the longest backoff
        three.sweep(C)
        three.replication.copy(C, B)
        three.sweep(B)
        three.replication.copy(B, C)
        three.advance()
    published = three.published()
    assert published == [order[1].event_id, order[2].event_id]
    assert statuses(world_c, *order) == [OUT] * 3


def test_an_older_claim_arriving_late_never_brings_a_settled_row_back(regions: TwoRegions) -> None:
    # Given A's row, replicated, and A's claim of it made just before A was cut off (never replicated)
    regions.rounds(3)
    row = event("A", 1)
    world_a, world_b = regions.world(A), regions.world(B)
    world_a.write(row, origin=A)
    regions.replication.copy(A, B)
    lease = Lease("sweeper:before-the-cut", world_a.clock() + timedelta(seconds=30))
    claimer = DynamoDBRowClaimer(world_a.dynamodb, world_a.tables.outbox)
    claim = claimer.claim(RowKey(row.aggregate_key, 1), lease, world_a.clock(), Fence(frozenset({A})))
    assert claim.claim is Claim.CLAIMED
    # and B, having taken A's origin over, published and settled it (a delete, later than A's claim)
    regions.rounds(int(TAKEOVER / INTERVAL) + 3, regions=(B,), replicate=False)
    assert regions.published() == [row.event_id]
    assert world_b.stored(row) is None

    # When replication resumes both ways (A's older claim reaches B, B's newer delete reaches A)
    regions.replication.both()

    # Then last writer wins keeps the row settled in both replicas
    assert world_a.stored(row) is None
    assert world_b.stored(row) is None
    # and as A returns and takes its origin back, nothing is published again
    regions.rounds(10)
    assert regions.published() == []
