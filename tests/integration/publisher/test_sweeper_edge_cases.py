"""The sweeper and the gate where reviews found the promise broken: poison on a continue route, held
aggregates ahead of others, a last chance without time to try, rows no index would show, saved positions and
segments."""

from __future__ import annotations

from typing import Any

from outbox.model import SWEEPER_CURSOR_KEY, RowKey
from tests.integration.publisher.publisher_world import SnsClientFailingEvents, SqsClientUnavailable, World
from tests.integration.publisher.sweeping import GRACE, OUT, assert_in_seq_order, published_ids, statuses
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
    assert statuses(world, a1, a2, a3) == [OUT, "FAILED", OUT]
    assert [p["event_id"] for p in world.poison()] == [a2.event_id]


def test_held_aggregates_ahead_in_the_table_do_not_keep_others_from_being_swept(world: World) -> None:
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
    # recording that SNS took it, free to claim
    assert (report.gave_up, report.backed_off, report.poisoned) == (0, 0, 0)
    row = world.row(a1)
    assert (row["status"], row["delivered_to"]) == ({"S": "PENDING"}, {"SS": ["sns"]})
    assert "sweep_failures" not in row
    assert "lease_owner" not in row
    assert world.poison() == []

    # which publishes it to EventBridge only (SNS got it already) and settles it
    world.clock.advance(minutes=2)
    world.sweep(world.sweeper())
    assert published_ids(world) == [a1.event_id]
    assert [envelope["event_id"] for envelope in world.bus_envelopes()] == [a1.event_id]
    assert statuses(world, a1) == [OUT]


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
    assert statuses(world, a1, a2) == [OUT, "PENDING"]


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

    # Then A#1 backs off (the poison queue was tried and failed; it is not lost, not FAILED without its
    # poison message), and B#1 went out in the same run
    assert (first.backed_off, first.swept) == (1, 1)
    assert "next_attempt_at" in world.row(a1)
    assert statuses(world, a1, b1) == ["PENDING", OUT]
    assert published_ids(world) == [b1.event_id]


def test_a_row_another_writer_saved_with_only_the_contract_attributes_is_found_when_its_record_is_lost(
    world: World,
) -> None:
    # Given A#1 and A#2 saved by another writer with the contract's attributes and nothing else (no index
    # attribute of any kind), their stream records discarded (never delivered to the publisher)
    contract = {"aggregate_key", "seq", "event_id", "event_type", "schema_version", "aggregate_type"}
    contract |= {"aggregate_id", "payload", "occurred_at", "status"}
    a1, a2 = event("A", 1), event("A", 2)
    for e in (a1, a2):
        world.put_raw({name: value for name, value in e.to_item().items() if name in contract})

    # When the sweeper runs after the grace
    world.clock.advance(GRACE)
    report = world.sweep(world.sweeper())

    # Then it found both in the table and published them in order; nothing is left
    assert (report.rows_read, report.swept, report.figures.pending) == (2, 2, 0)
    assert published_ids(world) == [a1.event_id, a2.event_id]
    assert statuses(world, a1, a2) == [OUT, OUT]


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

    # Then no run claimed more than 3 (each read on from where the last stopped), and all ten went out, each
    # aggregate in order
    assert claimed == [3, 3, 3, 1, 0, 0]
    published = published_ids(world)
    assert sorted(published) == sorted(e.event_id for e in events)
    assert_in_seq_order(published, *[[e for e in events if e.aggregate_id == f"o-{n}"] for n in range(5)])


def test_a_pass_that_spans_runs_reports_at_least_what_the_last_complete_pass_counted(world: World) -> None:
    # Given a full pass that counted four pending rows, two of them backing off after failing
    held = [event(f"h-{n}", 1) for n in range(4)]
    world.write(*held)
    world.clock.advance(GRACE)
    refusing = SnsClientFailingEvents(world.sns, {e.event_id for e in held}, code="InternalError")
    world.sweep(world.sweeper(sns_client=refusing, EVENT_BUS_NAME="", EVENT_SOURCE=""))
    # and then more rows than one run takes
    others = [event(f"o-{n}", 1) for n in range(6)]
    world.write(*others)
    world.clock.advance(GRACE)

    # When a run takes 2 rows and stops there (the rows backing off are not due: they do not fill it)
    report = world.sweep(world.sweeper(SWEEP_MAX_ROWS="2", EVENT_BUS_NAME="", EVENT_SOURCE=""))

    # Then its pass is not complete, and it reports no fewer pending rows than the last complete pass (4),
    # with that pass's oldest row: an alarm on the figures neither drops a row it saw nor fires late
    assert not report.complete
    assert report.figures.pending >= 4
    assert report.oldest_pending_age_s >= 2 * GRACE.total_seconds()
    assert report.claimed == 2


def test_the_saved_position_lives_in_the_table_and_invokes_nothing(world: World) -> None:
    # Given a sweep that stopped halfway through the table
    world.write(*[event(f"o-{n}", 1) for n in range(3)])
    world.clock.advance(GRACE)
    world.sweep(world.sweeper(SWEEP_MAX_ROWS="2"))

    # When the cursor item is read
    cursor = world.dynamodb.get_item(
        TableName=world.tables.outbox, Key=RowKey(SWEEPER_CURSOR_KEY, 0).item(), ConsistentRead=True
    )["Item"]

    # Then it says where the pass goes on from, and holds no status (the mapping's filter passes no MODIFY
    # of it, and the publisher skips its one INSERT as not an event)
    assert cursor["position"]["M"] == RowKey("Order#o-1", 1).item()
    assert "status" not in cursor


def test_segments_each_sweep_their_own_part_of_the_table_and_together_all_of_it(world: World) -> None:
    # Given ten aggregates of two events each, stranded
    events = [event(f"o-{n}", seq) for n in range(10) for seq in (1, 2)]
    world.write(*events)
    world.clock.advance(GRACE)
    sweeper = world.sweeper(SWEEP_SEGMENTS="3")

    # When the three segments each run once
    reports = [world.sweep(sweeper, segment=segment) for segment in range(3)]

    # Then each swept whole aggregates, no row twice, and together every event, in order
    assert sum(report.swept for report in reports) == 20
    published = published_ids(world)
    assert sorted(published) == sorted(e.event_id for e in events)
    assert_in_seq_order(published, *[[e for e in events if e.aggregate_id == f"o-{n}"] for n in range(10)])
    assert sum(1 for report in reports if report.swept) >= 2


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


def test_rows_another_writer_saved_without_status_are_published_in_order_and_settled(world: World) -> None:
    # Given A#1 and A#2 saved without `status` (read as PENDING), and A#3 with it; the stream delivers only
    # A#2's record (A#1's was discarded), and A#3 comes later
    a1, a2, a3 = event("A", 1), event("A", 2), event("A", 3)
    for e in (a1, a2):
        world.put_raw({name: value for name, value in e.to_item().items() if name != "status"})
    world.invoke(world.publisher(), world.stream_event(skip=1))
    assert published_ids(world) == []  # A#2 waits for A#1

    # When the sweeper runs after the grace, then the stream delivers A#3
    world.clock.advance(GRACE)
    world.sweep(world.sweeper())
    world.write(a3)
    world.invoke(world.publisher(), world.stream_event(skip=2))

    # Then all three went out in order and every row left the table: claimed, published and settled as any
    assert published_ids(world) == [a1.event_id, a2.event_id, a3.event_id]
    assert statuses(world, a1, a2, a3) == [OUT, OUT, OUT]
