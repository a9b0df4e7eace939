"""The regions' items on moto (outbox_publisher.region_store) and the claim's `taken_by` fence
(outbox_publisher.leases.Fence): real boto3 calls, typed errors, no call started without time for it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from outbox.errors import OutOfTimeError, ThrottledError
from outbox.model import RowKey
from outbox.regions import Heartbeat, RegionState, TakenRecord
from outbox_publisher.deadline import LambdaDeadline, NoDeadline
from outbox_publisher.leases import Claim, DynamoDBRowClaimer, Fence, Lease
from outbox_publisher.region_store import DynamoDBRegionStore
from tests.integration.publisher.publisher_world import World
from tests.support.events import event
from tests.support.lambda_context import FakeLambdaContext

A, B, C = "us-east-1", "eu-west-1", "ap-south-1"


def store(world: World) -> DynamoDBRegionStore:
    return DynamoDBRegionStore(world.dynamodb, world.tables.outbox)


def test_heartbeats_are_written_and_read_back(world: World) -> None:
    regions = store(world)
    beats = [
        Heartbeat(A, 1_000, RegionState.OWN, 500, {B: 900}, {C: 700}, {}),
        Heartbeat(B, 2_000, RegionState.YIELDED, 1_500, {A: 1_000}, {}, {C: 1_900}),
    ]
    for beat in beats:
        regions.write_heartbeat(beat, NoDeadline())
    # A malformed item (another writer's) under C's key is no heartbeat
    world.put_raw({"aggregate_key": {"S": f"#region#{C}"}, "seq": {"N": "0"}, "region": {"S": C}})

    read = regions.read_heartbeats([A, B, C], NoDeadline())

    assert sorted(read, key=lambda beat: beat.region) == sorted(beats, key=lambda beat: beat.region)


def test_takeover_records_add_claimed_then_published_seqs(world: World) -> None:
    regions = store(world)
    regions.record_taken(
        "Order#1", origin=A, by=B, seqs=[1, 2, 3], published=False, expires_at=99, deadline=NoDeadline()
    )
    regions.record_taken(
        "Order#1", origin=A, by=B, seqs=[1, 2], published=True, expires_at=100, deadline=NoDeadline()
    )
    regions.record_taken(
        "Order#1", origin=A, by=B, seqs=[4], published=False, expires_at=101, deadline=NoDeadline()
    )

    records = regions.read_taken(["Order#1", "Order#2"], NoDeadline())

    assert records == {"Order#1": TakenRecord("Order#1", A, B, frozenset({1, 2, 3, 4}), frozenset({1, 2}))}
    item = world.dynamodb.get_item(
        TableName=world.tables.outbox, Key={"aggregate_key": {"S": "#taken#Order#1"}, "seq": {"N": "0"}}
    )["Item"]
    assert item["expires_at"] == {"N": "101"}  # the TTL moves with every write
    assert "status" not in item  # one of the outbox's own items


def test_takeover_records_are_read_past_one_batch(world: World) -> None:
    regions = store(world)
    keys = [f"Order#{number}" for number in range(130)]
    for key in keys:
        regions.record_taken(
            key, origin=A, by=B, seqs=[1], published=True, expires_at=1, deadline=NoDeadline()
        )
    assert set(regions.read_taken(keys, NoDeadline())) == set(keys)


def test_no_call_starts_without_time_for_it(world: World) -> None:
    regions = store(world)
    short = LambdaDeadline(FakeLambdaContext(2_000))
    with pytest.raises(OutOfTimeError):
        regions.read_heartbeats([A, B], short)
    with pytest.raises(OutOfTimeError):
        regions.write_heartbeat(Heartbeat(A, 1, RegionState.OWN, 1), short)
    assert regions.calls == 0


class UnprocessedAlways:
    """Wraps the real DynamoDB client: every BatchGetItem answers all its keys unprocessed (throttled)."""

    def __init__(self, real: Any) -> None:
        self._real = real

    def batch_get_item(self, **arguments: Any) -> dict[str, Any]:
        return {"Responses": {}, "UnprocessedKeys": arguments["RequestItems"]}


def test_keys_left_unprocessed_are_a_throttle(world: World) -> None:
    regions = DynamoDBRegionStore(UnprocessedAlways(world.dynamodb), world.tables.outbox)
    with pytest.raises(ThrottledError):
        regions.read_heartbeats([A, B], NoDeadline())


# --- the claim's fence -------------------------------------------------------------------------------


def _lease(world: World, owner: str) -> Lease:
    return Lease(owner, world.clock() + timedelta(minutes=1))


def test_a_takers_claim_stamps_taken_by(world: World) -> None:
    row = event("A", 1)
    world.write(row, origin=A)
    claimer = DynamoDBRowClaimer(world.dynamodb, world.tables.outbox)

    result = claimer.claim(
        RowKey(row.aggregate_key, 1), _lease(world, "sweeper:b"), world.clock(), Fence(frozenset({B}), B)
    )

    assert result.claim is Claim.CLAIMED
    assert result.row is not None
    assert result.row["taken_by"] == {"S": B}
    assert world.row(row)["taken_by"] == {"S": B}


def test_a_claim_refuses_a_row_taken_by_a_region_that_still_holds_its_origin(world: World) -> None:
    # Given A's row claimed by C as the taker of A's origin (C's lease has ended)
    row = event("A", 1)
    world.write(row, origin=A)
    claimer = DynamoDBRowClaimer(world.dynamodb, world.tables.outbox)
    key = RowKey(row.aggregate_key, 1)
    lease_c = Lease("sweeper:c", world.clock() - timedelta(seconds=1))
    assert claimer.claim(
        key, lease_c, world.clock() - timedelta(minutes=1), Fence(frozenset({C}), C)
    ).claim is (Claim.CLAIMED)

    # When B claims it, C not among the takers it accepts (C holds A's origin in B's view)
    refused = claimer.claim(key, _lease(world, "sweeper:b"), world.clock(), Fence(frozenset({B}), B))
    # and when A claims it once C released A's origin
    accepted = claimer.claim(key, _lease(world, "sweeper:a"), world.clock(), Fence(frozenset({A, B, C})))

    # Then B was refused (the row untouched), A got it, and taken_by still names C (A does not stamp it)
    assert refused.claim is Claim.TAKEN
    assert accepted.claim is Claim.CLAIMED
    assert world.row(row)["taken_by"] == {"S": C}
    assert world.row(row)["lease_owner"] == {"S": "sweeper:a"}


def test_a_claim_without_a_fence_is_the_single_region_claim(world: World) -> None:
    row = event("A", 1)
    world.write(row)
    claimer = DynamoDBRowClaimer(world.dynamodb, world.tables.outbox)
    result = claimer.claim(RowKey(row.aggregate_key, 1), _lease(world, "sweeper:x"), world.clock())
    assert result.claim is Claim.CLAIMED
    assert "taken_by" not in world.row(row)
    assert "origin" not in world.row(row)
