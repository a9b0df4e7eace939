"""The sweeper and the gate where the review found the promise broken: poison on a continue route, expiry
behind a skipped event, held aggregates at the head of the index, a last chance without time to try."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from outbox.release import skip
from outbox_sweeper.config import SweeperConfig
from outbox_sweeper.handler import build_sweeper
from outbox_sweeper.pending import DynamoDBPendingIndex
from tests.integration.publisher.publisher_world import SnsClientFailingEvents, SqsClientUnavailable, World
from tests.integration.publisher.sweeping import GRACE, assert_in_seq_order, key, published_ids, statuses
from tests.support.events import event

CONTINUE = '{"routes": [{"aggregate_type": "Order", "destinations": ["sns"], "on_poison": "continue"}]}'


def test_on_a_continue_route_poison_waits_for_its_predecessor_like_any_event(world: World) -> None:
    # Given A#1 stranded PENDING (the mapping discarded it), then A#2 too large for SNS and A#3, on a route
    # that continues past poison
    a1, a2, a3 = event("A", 1), event("A", 2, payload={"blob": "x" * 300_000}), event("A", 3)
    world.write(a1)
    failing = SnsClientFailingEvents(world.sns, {a1.event_id}, code="KMSThrottling")
    world.invoke(world.publisher(sns_client=failing, OUTBOX_ROUTES=CONTINUE), world.stream_event())
    world.write(a2, a3)

    # When the stream publisher gets A#2 and A#3
    world.invoke(world.publisher(OUTBOX_ROUTES=CONTINUE), world.stream_event(skip=1))

    # Then neither is poisoned nor published while A#1 is unpublished
    assert published_ids(world) == []
    assert statuses(world, a1, a2, a3) == ["PENDING", "PENDING", "PENDING"]

    # When the sweeper runs after the grace
    world.clock.advance(GRACE)
    world.sweep(world.sweeper(OUTBOX_ROUTES=CONTINUE))

    # Then A#1 goes out, A#2 is poisoned (released: its route continues), then A#3 goes out
    published = published_ids(world)
    assert published == [a1.event_id, a3.event_id]
    assert_in_seq_order(published, [a1, a2, a3], released={a2.event_id})
    assert statuses(world, a1, a2, a3) == ["PUBLISHED", "FAILED", "PUBLISHED"]
    assert [p["event_id"] for p in world.poison()] == [a2.event_id]


def test_an_aggregate_whose_events_expired_behind_a_skipped_one_is_not_held(world: World) -> None:
    # Given A#1 FAILED and skipped, A#2 published after it, and, eight days later, A#2 gone with its TTL
    a1, a2, a3 = event("A", 1), event("A", 2), event("A", 3)
    refusing = SnsClientFailingEvents(world.sns, {a1.event_id}, code="InvalidParameter", sender_fault=True)
    world.write(a1, a2)
    world.invoke(world.publisher(sns_client=refusing), world.stream_event())
    skip(world.dynamodb, world.tables.outbox, key(a1), reason="superseded", actor="ops", now=world.clock())
    world.clock.advance(GRACE)
    world.sweep(world.sweeper())
    assert statuses(world, a2) == ["PUBLISHED"]
    world.clock.advance(days=8)
    world.dynamodb.delete_item(TableName=world.tables.outbox, Key=key(a2).item())  # what the TTL does

    # When the order's next event, A#3, is published
    world.write(a3)
    response = world.invoke(world.publisher(), world.stream_event(skip=2))

    # Then it goes out: A#2 is recognised as expired (published after A#1's release), not as a gap
    assert response == {"batchItemFailures": []}
    assert published_ids(world)[-1:] == [a3.event_id]


def test_held_aggregates_at_the_head_of_the_index_do_not_keep_others_from_being_swept(world: World) -> None:
    # Given A#1 poisoned with A#2..A#4 held behind it (the oldest pending rows), and later B#1 stranded;
    # a sweeper that claims at most 3 rows a run
    a = [event("A", seq) for seq in (1, 2, 3, 4)]
    b1 = event("B", 1)
    refusing = SnsClientFailingEvents(world.sns, {a[0].event_id}, code="InvalidParameter", sender_fault=True)
    world.write(*a)
    world.invoke(world.publisher(sns_client=refusing), world.stream_event())
    world.poison()
    world.clock.advance(seconds=5)
    world.write(b1)
    world.clock.advance(GRACE)

    # When the sweeper runs
    report = world.sweep(world.sweeper(SWEEP_MAX_ROWS="3"))

    # Then it passed over the held aggregate and swept B#1
    assert (report.held_aggregates, report.swept) == (1, 1)
    assert published_ids(world) == [b1.event_id]


class SettableDeadline:
    def __init__(self, remaining_ms: int = 60_000) -> None:
        self.remaining = remaining_ms

    def remaining_ms(self) -> int:
        return self.remaining


class SnsClientThenNoTime:
    """Wraps the real SNS client: once a publish call has returned, the invocation has 5 s left."""

    def __init__(self, real: Any, deadline: SettableDeadline) -> None:
        self._real = real
        self._deadline = deadline

    def publish_batch(self, **arguments: Any) -> Any:
        response = self._real.publish_batch(**arguments)
        self._deadline.remaining = 5_000
        return response


def test_a_row_past_the_age_cutoff_is_not_failed_for_a_run_without_time_to_try_it(world: World) -> None:
    # Given A#1, 25 hours old (past the 24 h cutoff: its next failure is its last), and a run whose time
    # runs out once SNS has taken A#1, before EventBridge could be called
    a1 = event("A", 1)
    world.write(a1)
    world.clock.advance(hours=25)
    deadline = SettableDeadline()
    sweeper = world.sweeper(sns_client=SnsClientThenNoTime(world.sns, deadline))

    # When the sweep runs
    report = sweeper.run(deadline)

    # Then A#1 is neither failed nor backed off (nothing failed): it is still PENDING for the next run,
    assert (report.gave_up, report.backed_off, report.poisoned) == (0, 0, 0)
    row = world.row(a1)
    assert row["status"] == {"S": "PENDING"}
    assert "sweep_failures" not in row
    assert world.poison() == []

    # which publishes it to both (SNS gets a duplicate) and marks it
    world.clock.advance(minutes=2)
    world.sweep(world.sweeper())
    assert published_ids(world) == [a1.event_id, a1.event_id]
    assert [envelope["event_id"] for envelope in world.bus_envelopes()] == [a1.event_id]
    assert statuses(world, a1) == ["PUBLISHED"]


SNS_ONLY = {"EVENT_BUS_NAME": "", "EVENT_SOURCE": ""}


class SlowSnsClient:
    """Wraps the real SNS client: each call takes 14 s on the world's clock."""

    def __init__(self, real: Any, world: World) -> None:
        self._real = real
        self._world = world

    def publish_batch(self, **arguments: Any) -> Any:
        self._world.clock.advance(seconds=14)
        return self._real.publish_batch(**arguments)


def test_the_stream_publishes_rows_it_did_not_claim_only_within_its_horizon(world: World) -> None:
    # Given A#1 and A#2, fresh (not claimed: the sweeper cannot have them yet), SNS calls that take 14 s
    a1, a2 = event("A", 1), event("A", 2)
    world.write(a1, a2)

    # When the stream publisher gets both (two calls: one aggregate's events never share one)
    publisher = world.publisher(sns_client=SlowSnsClient(world.sns, world), **SNS_ONLY)
    response = world.invoke(publisher, world.stream_event())

    # Then it made the first call, but not the second: it could have ended more than 20 s after the run
    # started, when the row may be the sweeper's; A#2 is handed back
    assert published_ids(world) == [a1.event_id]
    assert len(response["batchItemFailures"]) == 1
    assert statuses(world, a1, a2) == ["PUBLISHED", "PENDING"]


def test_rows_the_stream_claimed_are_not_bound_by_the_horizon(world: World) -> None:
    # Given A#1 and A#2 delivered late (claimed first), and SNS calls that take 14 s
    a1, a2 = event("A", 1), event("A", 2)
    world.write(a1, a2)
    world.clock.advance(seconds=45)

    # When the stream publisher gets both
    publisher = world.publisher(sns_client=SlowSnsClient(world.sns, world), **SNS_ONLY)
    response = world.invoke(publisher, world.stream_event())

    # Then both went out, in order: their leases keep the sweeper off them
    assert response == {"batchItemFailures": []}
    assert published_ids(world) == [a1.event_id, a2.event_id]


def test_a_poison_row_the_poison_queue_cannot_take_backs_off_and_does_not_block_the_rest(
    world: World,
) -> None:
    # Given A#1 unreadable (poison before any publish) and the poison queue unavailable, and B#1 stranded
    a1, b1 = event("A", 1), event("B", 1)
    world.put_raw(a1.to_item() | {"payload": {"S": "not json"}})
    world.put_raw(b1.to_item() | {"occurred_at": {"S": "2026-11-29T11:59:59.000Z"}})  # 1 s younger
    world.clock.advance(GRACE)
    sweeper = world.sweeper(sqs_client=SqsClientUnavailable())

    # When the sweeper runs
    first = world.sweep(sweeper)

    # Then it stopped at A#1 (B#1 is not published ahead of the stop), and A#1 backs off: the poison
    # queue was tried and failed; it is not lost
    assert (first.backed_off, first.swept) == (1, 0)
    assert "next_attempt_at" in world.row(a1)
    assert statuses(world, a1) == ["PENDING"]

    # When the sweeper runs again while A#1 backs off
    world.clock.advance(seconds=1)
    second = world.sweep(sweeper)

    # Then B#1, younger, gets through (the first run released it: it had claimed it, not got to it)
    assert second.swept == 1
    assert published_ids(world) == [b1.event_id]


def test_an_aggregate_behind_a_pending_row_no_sweep_sees_is_counted_held(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    # Given A#1 PENDING but written without `pending_shard` (outside the index), and A#2 behind it
    a1, a2 = event("A", 1), event("A", 2)
    world.put_raw({name: value for name, value in a1.to_item().items() if name != "pending_shard"})
    world.write(a2)

    # When the sweeper runs a day later, and a day and a half later
    world.clock.advance(hours=24)
    day = world.sweep(world.sweeper())
    world.clock.advance(hours=12)
    later = world.sweep(world.sweeper())

    # Then within the cutoff it just waits; past the cutoff and one more backoff, A counts as held, by name
    assert (day.held_aggregates, later.held_aggregates) == (0, 1)
    [line] = [r for r in caplog.records if r.getMessage().startswith("aggregate held")]
    assert line.__dict__["predecessor"] == "pending_unswept"
    assert published_ids(world) == []


def test_a_run_claims_at_most_its_row_limit_across_aggregates(world: World) -> None:
    # Given five stranded aggregates of two events each, and at most 3 rows a run
    events = [event(f"o-{n}", seq) for n in range(5) for seq in (1, 2)]
    world.write(*events)
    world.clock.advance(GRACE)
    sweeper = world.sweeper(SWEEP_MAX_ROWS="3")

    # When the sweeper runs until nothing is left
    claimed = []
    for _ in range(6):
        claimed.append(world.sweep(sweeper).claimed)
        world.clock.advance(minutes=1)

    # Then no run claimed more than 3, and all ten went out, each aggregate in order
    assert claimed == [3, 3, 3, 1, 0, 0]
    published = published_ids(world)
    assert sorted(published) == sorted(e.event_id for e in events)
    assert_in_seq_order(published, *[[e for e in events if e.aggregate_id == f"o-{n}"] for n in range(5)])


class RecordingIndex:
    def __init__(self, real: DynamoDBPendingIndex) -> None:
        self._real = real
        self.first_shards: list[int] = []

    def scan(self, **arguments: Any) -> Any:
        self.first_shards.append(arguments["first_shard"])
        return self._real.scan(**arguments)


def test_each_run_starts_its_scan_at_a_random_shard(world: World) -> None:
    # Given sweepers whose randomness says 0.0, 0.5 and 0.99
    firsts = []
    for draw in (0.0, 0.5, 0.99):
        config = SweeperConfig.from_env(world.env())
        index = RecordingIndex(DynamoDBPendingIndex(world.dynamodb, world.tables.outbox))
        sweeper = build_sweeper(config, index=index, random=functools.partial(float, draw), clock=world.clock)

        # When each runs
        world.sweep(sweeper)
        firsts.extend(index.first_shards)

    # Then their scans start at shards 0, 8 and 15: a scan cut short leaves different shards out
    assert firsts == [0, 8, 15]


def test_a_late_row_the_gate_holds_is_left_unleased_for_the_sweeper(world: World) -> None:
    # Given A#1 poison and A#2, both delivered late (so the stream claims them first)
    a1, a2 = event("A", 1), event("A", 2)
    world.put_raw(a1.to_item() | {"payload": {"S": "not json"}})
    world.write(a2)
    world.clock.advance(seconds=45)

    # When the stream publisher gets both
    response = world.invoke(world.publisher(), world.stream_event())

    # Then A#1 is FAILED and A#2 held PENDING, its lease already dropped: once A#1 is redriven or skipped,
    # the sweeper may take A#2 at once, not only after this invocation's deadline
    assert response == {"batchItemFailures": []}
    assert statuses(world, a1, a2) == ["FAILED", "PENDING"]
    assert "lease_owner" not in world.row(a2)
    assert "lease_until" not in world.row(a2)
