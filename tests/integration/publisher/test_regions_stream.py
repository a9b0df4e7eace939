"""The stream publisher of an outbox across two regions (regions_world.py), on region A's real stream: it
publishes its own origin's new rows while its heartbeat says `own`; every other record is skipped as
`not_owner` and never handed back (the sweepers have them); without a readable heartbeat it hands the batch
back rather than guess. Each test checks what was published (once, in order) and that nothing was dropped:
a skipped row stays PENDING for a sweeper.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from datetime import timedelta
from typing import Any

import pytest

from outbox.errors import AwsUnavailableError
from outbox.model import OutboxEvent
from outbox_publisher.deadline import Deadline
from outbox_publisher.region_store import DynamoDBRegionStore
from outbox_publisher.regions import Heartbeat, RegionState, TakenRecord
from tests.integration.publisher.publisher_world import World
from tests.integration.publisher.regions_world import A, B, TwoRegions, region_env, two_regions
from tests.integration.publisher.sweeping import OUT, statuses


@pytest.fixture
def regions(world: World) -> TwoRegions:
    both = two_regions(world)
    both.rounds(3)  # both regions `own` from here
    return both


def fresh(world: World, aggregate_id: str, seq: int) -> OutboxEvent:
    """An event saved now (after the regions' last resume)."""
    return OutboxEvent.new(
        aggregate_type="Order",
        aggregate_id=aggregate_id,
        seq=seq,
        event_type="OrderPlaced",
        payload={"total": "1.00"},
        clock=world.clock,
    )


def yield_a_to_b(regions: TwoRegions) -> None:
    """B's heartbeat, as replicated into A, holds A's origin; A's sweeper runs and yields."""
    world = regions.world(A)
    item = world.dynamodb.get_item(
        TableName=world.tables.outbox,
        Key={"aggregate_key": {"S": f"#region#{B}"}, "seq": {"N": "0"}},
        ConsistentRead=True,
    )["Item"]
    item["taking"] = {"M": {A: {"N": item["beat_at"]["N"]}}}
    world.put_raw(item)
    assert regions.sweep(A).region.state is RegionState.YIELDED  # type: ignore[union-attr]


def skipped(response: dict[str, Any]) -> list[str]:
    return [item["itemIdentifier"] for item in response["batchItemFailures"]]


def test_it_publishes_its_own_origin_and_skips_every_other_row(regions: TwoRegions) -> None:
    world = regions.world(A)
    # Given, in A's stream, A's new order, B's new order (replicated), and a row without origin (A is home)
    mine = [fresh(world, "A", 1), fresh(world, "A", 2)]
    theirs = fresh(world, "B", 1)
    unstamped = fresh(world, "C", 1)
    world.write(*mine, origin=A)
    regions.world(B).write(theirs, origin=B)
    regions.replication.copy(B, A)
    world.write(unstamped)
    publisher = world.publisher(**region_env(A))

    # When the publisher handles the whole stream (the heartbeats' records too)
    response = world.invoke(publisher, world.stream_event())

    # Then it published A's events and the home region's, once, in order; nothing handed back
    assert skipped(response) == []
    published = [e["event_id"] for e in world.topic_envelopes()]
    assert sorted(published) == sorted(e.event_id for e in (*mine, unstamped))
    assert published.index(mine[0].event_id) < published.index(mine[1].event_id)
    # and B's row is left PENDING for B (skipped, not handed back)
    assert statuses(world, theirs) == ["PENDING"]
    assert statuses(world, *mine, unstamped) == [OUT] * 3


def test_a_row_saved_before_the_last_resume_is_left_to_the_sweeper(regions: TwoRegions) -> None:
    world = regions.world(A)
    # Given A's row dated before A's last resume (as one saved while it was cut off)
    old = OutboxEvent.new(
        aggregate_type="Order",
        aggregate_id="A",
        seq=1,
        event_type="OrderPlaced",
        payload={},
        clock=lambda: world.clock() - timedelta(hours=1),
    )
    world.write(old, origin=A)

    # When the publisher gets its INSERT
    response = world.invoke(world.publisher(**region_env(A)), world.stream_event())

    # Then it is not published, not handed back, and still PENDING
    assert skipped(response) == []
    assert world.topic_envelopes() == []
    assert statuses(world, old) == ["PENDING"]


def test_a_region_that_yielded_publishes_none_of_its_rows(regions: TwoRegions) -> None:
    world = regions.world(A)
    # Given B's heartbeat, as replicated into A, holding A's origin, and A's sweeper having yielded
    yield_a_to_b(regions)
    row = fresh(world, "A", 1)
    world.write(row, origin=A)

    # When the publisher gets A's new row
    response = world.invoke(world.publisher(**region_env(A)), world.stream_event())

    # Then it skips it (B publishes it), PENDING, not handed back
    assert skipped(response) == []
    assert world.topic_envelopes() == []
    assert statuses(world, row) == ["PENDING"]


def test_a_heartbeat_older_than_the_fence_stops_the_stream_publisher(regions: TwoRegions) -> None:
    world = regions.world(A)
    row = fresh(world, "A", 1)
    world.write(row, origin=A)
    # Given A's sweeper did not beat for more than two intervals (the rows saved after its last resume)
    world.clock.advance(timedelta(seconds=121))

    response = world.invoke(world.publisher(**region_env(A)), world.stream_event())

    assert skipped(response) == []
    assert world.topic_envelopes() == []
    assert statuses(world, row) == ["PENDING"]


class HeartbeatsUnreadable:
    """Wraps the real region store: reading the heartbeats raises AwsUnavailableError the first `times`
    times."""

    def __init__(self, real: DynamoDBRegionStore, times: int = 1) -> None:
        self._real = real
        self._left = times

    def read_heartbeats(self, regions: Iterable[str], deadline: Deadline) -> list[Heartbeat]:
        if self._left > 0:
            self._left -= 1
            raise AwsUnavailableError("BatchGetItem did not answer")
        return self._real.read_heartbeats(regions, deadline)

    def write_heartbeat(self, heartbeat: Heartbeat, deadline: Deadline) -> None:
        raise AssertionError("the stream publisher writes no heartbeat")

    def read_taken(self, aggregate_keys: Collection[str], deadline: Deadline) -> dict[str, TakenRecord]:
        raise AssertionError("the stream publisher reads no takeover record")

    def record_taken(self, aggregate_key: str, **arguments: Any) -> None:
        raise AssertionError("the stream publisher writes no takeover record")


def test_without_a_readable_heartbeat_the_batch_is_handed_back_then_published(regions: TwoRegions) -> None:
    world = regions.world(A)
    rows = [fresh(world, "A", 1), fresh(world, "A", 2)]
    world.write(*rows, origin=A)
    store = HeartbeatsUnreadable(DynamoDBRegionStore(world.dynamodb, world.tables.outbox))
    publisher = world.publisher(region_store=store, **region_env(A))
    stream_event = world.stream_event()
    records = stream_event["Records"]
    first_row = next(
        index
        for index, record in enumerate(records)
        if not record["dynamodb"]["Keys"]["aggregate_key"]["S"].startswith("#")
    )

    # When the heartbeat cannot be read
    response = world.invoke(publisher, stream_event)

    # Then the batch is handed back from its first row on; nothing published
    assert skipped(response) == [r["dynamodb"]["SequenceNumber"] for r in records[first_row:]]
    assert world.topic_envelopes() == []
    # and Lambda's retry publishes both, once, in order
    assert skipped(world.invoke(publisher, stream_event)) == []
    assert [e["event_id"] for e in world.topic_envelopes()] == [e.event_id for e in rows]


def test_a_slot_of_its_origin_rewritten_while_it_yields_is_failed_not_left_to_a_sweeper(
    regions: TwoRegions,
) -> None:
    world = regions.world(A)
    # Given A yielded (B's heartbeat, as replicated into A, holds A's origin) and an event of A's origin
    # saved and then rewritten in its slot by another writer, unconditionally
    yield_a_to_b(regions)
    original = fresh(world, "A", 1)
    world.write(original, origin=A)
    replacement = fresh(world, "A", 1)
    world.put_raw(replacement.to_item() | {"origin": {"S": A}})

    # When A's publisher gets the stream (the INSERT, then the MODIFY that replaced the event)
    response = world.invoke(world.publisher(**region_env(A)), world.stream_event())

    # Then nothing is published, and the row is FAILED with the rewrite named: only that MODIFY showed it,
    # so a sweeper would have published the new event as the slot's
    assert skipped(response) == []
    assert world.topic_envelopes() == []
    row = world.row(original)
    assert (row["status"], row["event_id"]) == ({"S": "FAILED"}, {"S": replacement.event_id})
    assert row["last_error"]["S"].startswith("writer_contract: SlotRewritten")
