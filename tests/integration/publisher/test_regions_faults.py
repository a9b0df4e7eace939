"""Faults on an outbox across two regions (regions_world.py): the heartbeats or the takeover records
unreadable or unwritable, a destination failing during a takeover. Each checks the promise: nothing published
out of order or by two regions, nothing lost (every row still PENDING, published later, once), nothing
invented.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Collection, Iterable
from typing import Any

import pytest

from outbox.errors import AwsUnavailableError
from outbox_publisher.deadline import Deadline
from outbox_publisher.region_store import DynamoDBRegionStore
from outbox_publisher.regions import Heartbeat, TakenRecord
from tests.integration.publisher.publisher_world import SnsClientFailingEvents, World
from tests.integration.publisher.regions_world import INTERVAL, TAKEOVER, A, B, TwoRegions, two_regions
from tests.integration.publisher.sweeping import OUT, assert_in_seq_order, statuses
from tests.support.events import event


class RegionStoreFailing:
    """Wraps the real region store: the calls named in `failing` raise AwsUnavailableError (as an unanswered
    DynamoDB call does) the next `times` times each; the rest go to moto."""

    def __init__(self, real: DynamoDBRegionStore, failing: Collection[str], times: int = 1) -> None:
        self._real = real
        self._left = dict.fromkeys(failing, times)
        self.failed: list[str] = []

    def _fail(self, name: str) -> None:
        if self._left.get(name, 0) > 0:
            self._left[name] -= 1
            self.failed.append(name)
            raise AwsUnavailableError(f"{name} did not answer")

    def read_heartbeats(self, regions: Iterable[str], deadline: Deadline) -> list[Heartbeat]:
        self._fail("read_heartbeats")
        return self._real.read_heartbeats(regions, deadline)

    def write_heartbeat(self, heartbeat: Heartbeat, deadline: Deadline) -> None:
        self._fail("write_heartbeat")
        self._real.write_heartbeat(heartbeat, deadline)

    def read_taken(self, aggregate_keys: Collection[str], deadline: Deadline) -> dict[str, TakenRecord]:
        self._fail("read_taken")
        return self._real.read_taken(aggregate_keys, deadline)

    def record_taken(self, aggregate_key: str, **arguments: Any) -> None:
        self._fail("record_claimed" if not arguments["published"] else "record_published")
        self._real.record_taken(aggregate_key, **arguments)


@pytest.fixture
def regions(world: World) -> TwoRegions:
    return two_regions(world)


def _failing(regions: TwoRegions, region: str, *failing: str) -> RegionStoreFailing:
    world = regions.world(region)
    store = RegionStoreFailing(DynamoDBRegionStore(world.dynamodb, world.tables.outbox), failing)
    regions.sweepers[region] = regions.sweeper(region, region_store=store)
    return store


@pytest.mark.parametrize("call", ["read_heartbeats", "write_heartbeat"])
def test_a_run_without_its_heartbeat_publishes_nothing_and_the_next_publishes_all(
    regions: TwoRegions, call: str
) -> None:
    # Given both regions live and A's pending order
    regions.rounds(3)
    order = [event("A", seq) for seq in (1, 2)]
    regions.world(A).write(*order, origin=A)
    regions.replication.both()
    store = _failing(regions, A, call)

    # When A's run cannot read (or write) its heartbeat
    report = regions.sweep(A)

    # Then it published nothing and left the rows PENDING, and still reported its figures
    assert store.failed == [call]
    assert report.region is not None
    assert report.region.heartbeat is None
    assert (report.swept, report.figures.pending) == (0, 2)
    assert regions.published() == []
    assert statuses(regions.world(A), *order) == ["PENDING"] * 2
    # and the next run (its last beat not yet past the fence) publishes them, once, in order
    regions.advance()
    assert regions.sweep(A).swept == 2
    assert regions.published() == [e.event_id for e in order]


def _cut_a_and_let_b_take_over(regions: TwoRegions) -> None:
    """A's sweeper stops and nothing replicates; B sweeps on until two runs past its taking A over."""
    regions.rounds(int(TAKEOVER / INTERVAL) + 4, regions=(B,), replicate=False)


def test_a_taker_that_cannot_record_its_claims_publishes_none_of_them(regions: TwoRegions) -> None:
    # Given both live, A's pending order replicated to B, then A cut off past the takeover time
    regions.rounds(3)
    order = [event("A", seq) for seq in (1, 2, 3)]
    regions.world(A).write(*order, origin=A)
    regions.replication.both()
    store = _failing(regions, B, "record_claimed")
    _cut_a_and_let_b_take_over(regions)

    # Then the run whose record failed published nothing of A's, and released the rows at once
    assert store.failed == ["record_claimed"]
    published = regions.published()
    # and a later run published all three, once, in order
    assert Counter(published) == Counter(e.event_id for e in order)
    assert_in_seq_order(published, order)
    assert statuses(regions.world(B), *order) == [OUT] * 3


def test_a_taker_stamps_taken_by_and_a_row_it_could_not_deliver_stays_pending(regions: TwoRegions) -> None:
    # Given both live, A's order replicated, A cut off; B's topic refusing A's second event
    regions.rounds(3)
    order = [event("A", seq) for seq in (1, 2, 3)]
    regions.world(A).write(*order, origin=A)
    regions.replication.both()
    world_b = regions.world(B)
    sns = SnsClientFailingEvents(world_b.sns, {order[1].event_id})
    regions.sweepers[B] = regions.sweeper(B, sns_client=sns)

    # When B takes A's origin over
    _cut_a_and_let_b_take_over(regions)

    # Then the first went out, the second waits PENDING claimed by B for A's origin, the third behind it
    assert regions.published() == [order[0].event_id]
    stuck = world_b.row(order[1])
    assert (stuck["status"]["S"], stuck["taken_by"]["S"]) == ("PENDING", B)
    assert world_b.row(order[2])["status"]["S"] == "PENDING"
    # and B's record of the aggregate names what it may have published (claimed) and what it did
    record = world_b.dynamodb.get_item(
        TableName=world_b.tables.outbox,
        Key={"aggregate_key": {"S": "#taken#Order#A"}, "seq": {"N": "0"}},
        ConsistentRead=True,
    )["Item"]
    assert (record["origin"]["S"], record["by"]["S"]) == (A, B)
    assert record["published"]["NS"] == ["1"]
    assert "2" in record["claimed"]["NS"]
    assert int(record["expires_at"]["N"]) > regions.world(B).clock().timestamp()


def test_a_returning_region_that_cannot_read_the_takeover_records_waits(regions: TwoRegions) -> None:
    # Given A's order taken over by B while A was cut off, B publishing 1 and 3 (2 had not replicated)
    regions.rounds(3)
    order = [event("A", seq) for seq in (1, 2, 3)]
    regions.world(A).write(*order, origin=A)
    regions.replication.copy(A, B, hold=lambda key: key == ("Order#A", "2"))
    _cut_a_and_let_b_take_over(regions)
    assert regions.published() == [order[0].event_id, order[2].event_id]
    # and A back, taking its origin back
    store = _failing(regions, A, "read_taken")
    for _ in range(8):
        regions.sweep(B)
        regions.replication.copy(B, A)
        regions.sweep(A)
        regions.replication.copy(A, B, hold=lambda key: key == ("Order#A", "2"))
        regions.advance()

    # Then the run that could not read the record left seq 2 alone, and a later run found it late: FAILED
    assert store.failed == ["read_taken"]
    assert regions.published() == []
    row = regions.world(A).row(order[1])
    assert row["status"]["S"] == "FAILED"
    assert "LateReplica" in row["last_error"]["S"]


def test_a_returning_region_that_cannot_read_the_takers_replica_keeps_those_rows_waiting(
    regions: TwoRegions,
) -> None:
    # Given A's order taken over by B while A was cut off, B publishing 1 and 3 (2 had not replicated), and
    # another order of A's that never replicated to B at all
    regions.rounds(3)
    order = [event("A", seq) for seq in (1, 2, 3)]
    unseen = event("U", 1)
    regions.world(A).write(*order, unseen, origin=A)
    held = {("Order#A", "2"), ("Order#U", "1")}
    regions.replication.copy(A, B, hold=lambda key: key in held)
    _cut_a_and_let_b_take_over(regions)
    assert regions.published() == [order[0].event_id, order[2].event_id]
    # and B's records of it reaching A's replica late (only B's own replica has them)
    taken = ("#taken#Order#A", "0")

    # When A comes back, and B's replica does not answer A's reads for a while
    reads: list[str] = []
    answering = False

    class TakerReplica(DynamoDBRegionStore):
        def read_taken(self, aggregate_keys: Collection[str], deadline: Deadline) -> dict[str, TakenRecord]:
            reads.append("answered" if answering else "refused")
            if not answering:
                raise AwsUnavailableError("BatchGetItem did not answer")
            return super().read_taken(aggregate_keys, deadline)

    world_b = regions.world(B)
    regions.sweepers[A] = regions.sweeper(
        A, region_stores=lambda peer: TakerReplica(world_b.dynamodb, world_b.tables.outbox)
    )
    for _ in range(10):
        regions.sweep(B)
        regions.replication.copy(B, A, hold=lambda key: key == taken)
        regions.sweep(A)
        regions.replication.copy(A, B, hold=lambda key: key in held)
        regions.advance()

    # Then A, owning its origin again, published none of its rows saved before its return: they wait PENDING
    assert "refused" in reads
    assert regions.published() == []
    assert [regions.world(A).row(e)["status"]["S"] for e in (order[1], unseen)] == ["PENDING", "PENDING"]

    # and once B's replica answers, A reads B's record there (its own copy still lagging): seq 2 is a late
    # replica (FAILED), the order B never saw is published
    answering = True
    for _ in range(3):
        regions.sweep(B)
        regions.replication.copy(B, A, hold=lambda key: key == taken)
        regions.sweep(A)
        regions.advance()
    assert regions.published() == [unseen.event_id]
    row = regions.world(A).row(order[1])
    assert row["status"]["S"] == "FAILED"
    assert "LateReplica" in row["last_error"]["S"]
    assert "answered" in reads


def test_the_regions_figures_are_metrics_with_a_region_dimension(
    regions: TwoRegions, capsys: pytest.CaptureFixture[str]
) -> None:
    from outbox_sweeper.handler import sweep
    from tests.support.lambda_context import FakeLambdaContext

    regions.rounds(3)
    capsys.readouterr()
    sweep({}, FakeLambdaContext(60_000), regions.sweeper(A))
    lines = [line for line in capsys.readouterr().out.splitlines() if "RegionHeartbeatAgeSeconds" in line]
    assert len(lines) == 1
    document = json.loads(lines[0])
    assert document["Region"] == A
    assert document["RegionHeartbeatAgeSeconds"] == [INTERVAL.total_seconds()]
    assert document["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["service", "Region"]]
