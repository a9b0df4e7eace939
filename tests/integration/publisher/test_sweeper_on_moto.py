"""The sweeper end to end on moto, with the stream publisher beside it: what the stream strands, the sweeper
delivers, in `seq` order per aggregate, and a second sweep adds nothing.

Each test checks the promise: per aggregate, publications in `seq` order and none before its predecessor;
every event ends out (its row settled: gone from the table) or FAILED with a reason (or waits, visibly, for
an operator); nothing published that was not committed.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest

from outbox_ops.audit import AuditRecords
from outbox_ops.release import redrive, skip
from outbox_publisher.leases import STREAM_PUBLISHER, DynamoDBRowClaimer, Lease
from tests.integration.publisher.publisher_world import (
    DynamoDBClientFailingWrites,
    SnsClientFailingEvents,
    World,
)
from tests.integration.publisher.sweeping import (
    GRACE,
    OUT,
    assert_in_seq_order,
    key,
    published_ids,
    statuses,
)
from tests.support.events import event


def test_the_sweeper_alone_publishes_every_pending_event_in_order_exactly_once(world: World) -> None:
    # Given five committed events of two orders the stream never delivered, older than the grace
    a = [event("A", seq) for seq in (1, 2, 3)]
    b = [event("B", seq) for seq in (1, 2)]
    world.write(a[0], b[0], a[1], b[1], a[2])
    world.clock.advance(GRACE)
    sweeper = world.sweeper()

    # When the sweeper runs twice
    first = world.sweep(sweeper)
    second = world.sweep(sweeper)

    # Then the first run published all five, each once, in seq order per order, and settled them
    published = published_ids(world)
    assert Counter(published) == Counter(e.event_id for e in a + b)
    assert_in_seq_order(published, a, b)
    assert statuses(world, *a, *b) == [OUT] * 5
    assert (first.rows_read, first.due, first.claimed, first.swept) == (5, 5, 5, 5)
    # and, once they are out, counts none of them pending (the oldest-pending alarm clears at once)
    assert (first.figures.pending, first.oldest_pending_age_s) == (0, 0.0)
    assert first.complete
    # and the second found nothing left to do
    assert (second.figures.pending, second.claimed, second.swept) == (0, 0, 0)
    assert published_ids(world) == []


def test_a_row_younger_than_the_grace_is_left_to_the_stream(world: World) -> None:
    # Given an event committed 2 s ago
    fresh = event("A", 1)
    world.write(fresh)

    # When the sweeper runs
    report = world.sweep(world.sweeper())

    # Then it counted the row but did not touch it
    assert (report.figures.pending, report.due, report.claimed) == (1, 0, 0)
    assert published_ids(world) == []
    assert "lease_owner" not in world.row(fresh)


def test_a_first_event_a_destination_refused_holds_the_second_until_the_sweeper_delivers_both_in_order(
    world: World,
) -> None:
    # Given A#1, which SNS refused past the retries (EventBridge took it): left PENDING, not handed back
    a1, a2 = event("A", 1), event("A", 2)
    world.write(a1)
    failing = SnsClientFailingEvents(world.sns, {a1.event_id}, code="KMSThrottling")
    response = world.invoke(world.publisher(sns_client=failing), world.stream_event())
    assert response == {"batchItemFailures": []}
    assert world.row(a1)["delivered_to"] == {"SS": ["eventbridge"]}
    # and A#2, whose record arrives in the next batch
    world.write(a2)

    # When the stream publisher gets A#2
    response = world.invoke(world.publisher(), world.stream_event(skip=1))

    # Then A#2 is held, not published ahead of A#1, and not handed back either
    assert response == {"batchItemFailures": []}
    assert published_ids(world) == []
    assert statuses(world, a1, a2) == ["PENDING", "PENDING"]

    # When the sweeper runs after the grace
    world.clock.advance(GRACE)
    report = world.sweep(world.sweeper())

    # Then it delivered A#1 (to SNS only), then A#2, and the bus got each event once
    assert published_ids(world) == [a1.event_id, a2.event_id]
    assert [e["event_id"] for e in world.bus_envelopes()] == [a1.event_id, a2.event_id]
    assert statuses(world, a1, a2) == [OUT, OUT]
    assert report.swept == 2


def test_a_pair_the_stream_delivers_reversed_across_batches_is_published_in_seq_order(world: World) -> None:
    # Given A#1 and A#2 committed, and their records delivered reversed, in two batches
    a1, a2 = event("A", 1), event("A", 2)
    world.write(a1, a2)
    records = world.stream_event()["Records"]
    publisher = world.publisher()

    # When the stream publisher gets A#2 first, then A#1
    world.invoke(publisher, {"Records": [records[1]]})
    world.invoke(publisher, {"Records": [records[0]]})

    # Then only A#1 is out; A#2 waits, PENDING
    assert published_ids(world) == [a1.event_id]
    assert statuses(world, a1, a2) == [OUT, "PENDING"]

    # When the sweeper runs after the grace
    world.clock.advance(GRACE)
    world.sweep(world.sweeper())

    # Then A#2 follows A#1
    assert published_ids(world) == [a2.event_id]
    assert statuses(world, a2) == [OUT]


def test_a_pair_the_stream_delivers_reversed_in_one_batch_is_published_in_seq_order(world: World) -> None:
    # Given A#1 and A#2 committed, their records in one batch in reverse order, with B#1 between
    a1, a2, b1 = event("A", 1), event("A", 2), event("B", 1)
    world.write(a1, b1, a2)
    first, middle, last = world.stream_event()["Records"]

    # When the stream publisher gets A#2, B#1, A#1
    response = world.invoke(world.publisher(), {"Records": [last, middle, first]})

    # Then all three are out, A#1 before A#2, and nothing was handed back or left for the sweeper
    assert response == {"batchItemFailures": []}
    published = published_ids(world)
    assert sorted(published) == sorted([a1.event_id, a2.event_id, b1.event_id])
    assert published.index(a1.event_id) < published.index(a2.event_id)
    assert statuses(world, a1, a2, b1) == [OUT] * 3


def test_events_published_but_not_settled_are_reconciled_by_the_sweeper_as_counted_duplicates(
    world: World,
) -> None:
    # Given A#1 and A#2 published by the stream while every DynamoDB write failed (settling could not happen)
    a1, a2 = event("A", 1), event("A", 2)
    world.write(a1, a2)
    response = world.invoke(
        world.publisher(dynamodb_client=DynamoDBClientFailingWrites(world.dynamodb)), world.stream_event()
    )
    assert response == {"batchItemFailures": []}  # the events are out: nothing is handed back
    assert statuses(world, a1, a2) == ["PENDING", "PENDING"]

    # When the sweeper runs after the grace
    world.clock.advance(GRACE)
    report = world.sweep(world.sweeper())

    # Then both were published again (the at-least-once duplicate, same event ids), in order, and settled
    assert published_ids(world) == [a1.event_id, a2.event_id] * 2
    assert statuses(world, a1, a2) == [OUT, OUT]
    assert report.swept == 2


def test_a_poison_event_holds_its_aggregate_until_it_is_fixed_and_redriven(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    # Given A#1 refused for good by SNS, A#2 behind it, and B#1
    a1, a2, b1 = event("A", 1), event("A", 2), event("B", 1)
    world.write(a1, a2, b1)
    refusing = SnsClientFailingEvents(world.sns, {a1.event_id}, code="InvalidParameter", sender_fault=True)
    world.invoke(world.publisher(sns_client=refusing), world.stream_event())

    # Then A#1 is FAILED with its reason and in the poison queue, A#2 waits, B#1 is out
    assert statuses(world, a1, a2, b1) == ["FAILED", "PENDING", OUT]
    assert world.row(a1)["last_error"]["S"].startswith("rejected: sns:InvalidParameter")
    assert [p["event_id"] for p in world.poison()] == [a1.event_id]
    assert published_ids(world) == [b1.event_id]

    # When the sweeper runs after the grace
    world.clock.advance(GRACE)
    held = world.sweep(world.sweeper())

    # Then it leaves A#2 alone and counts A as held (its alarm's metric), naming it in its log
    assert (held.held_aggregates, held.claimed) == (1, 0)
    assert published_ids(world) == []
    [line] = [r for r in caplog.records if r.getMessage().startswith("aggregate held")]
    assert (line.__dict__["aggregate_key"], line.__dict__["waiting_seq"]) == ("Order#A", "2")
    assert line.__dict__["failed_seq"] == "1"

    # When an operator redrives A#1 (the cause fixed) and the sweeper runs
    redrive(
        world.dynamodb,
        world.tables.outbox,
        key(a1),
        reason="topic policy fixed",
        actor="ops",
        now=world.clock(),
    )
    report = world.sweep(world.sweeper())

    # Then A#1 and then A#2 are published, with A#1's original event id, and settled
    assert published_ids(world) == [a1.event_id, a2.event_id]
    assert statuses(world, a1, a2) == [OUT, OUT]
    assert (report.held_aggregates, report.swept) == (0, 2)
    # and the redrive is on record after A#1's row left the table
    record = AuditRecords(world.dynamodb, world.tables.outbox).of_event(key(a1))
    assert record is not None
    assert [(entry.action, entry.by) for entry in record.entries] == [("redrive", "ops")]


def test_a_skipped_poison_event_lets_its_successors_go_and_is_never_published(world: World) -> None:
    # Given A#1 FAILED for good and A#2 waiting behind it
    a1, a2 = event("A", 1), event("A", 2)
    world.write(a1, a2)
    refusing = SnsClientFailingEvents(world.sns, {a1.event_id}, code="InvalidParameter", sender_fault=True)
    world.invoke(world.publisher(sns_client=refusing), world.stream_event())
    world.poison()

    # When an operator skips A#1 and the sweeper runs after the grace
    world.clock.advance(GRACE)
    skip(
        world.dynamodb,
        world.tables.outbox,
        key(a1),
        reason="superseded by A#2",
        actor="ops",
        now=world.clock(),
    )
    report = world.sweep(world.sweeper())

    # Then A#2 is published; A#1 left the table unpublished, its audit record saying who and why
    assert published_ids(world) == [a2.event_id]
    assert statuses(world, a1, a2) == [OUT, OUT]
    record = AuditRecords(world.dynamodb, world.tables.outbox).of_event(key(a1))
    assert record is not None
    assert [(entry.action, entry.by, entry.reason) for entry in record.entries] == [
        ("skip", "ops", "superseded by A#2")
    ]
    assert report.held_aggregates == 0


def test_a_gap_in_seq_reads_as_an_event_that_is_out(world: World) -> None:
    # Given A#1 published, and A#3 committed without any A#2 (a writer's bug)
    a1, a3 = event("A", 1), event("A", 3)
    world.write(a1)
    world.invoke(world.publisher(), world.stream_event())
    world.write(a3)

    # When the stream publisher gets A#3
    world.invoke(world.publisher(), world.stream_event(skip=2))

    # Then A#3 is published: the table keeps no settled rows, so a seq never written cannot be told from one
    # that went out (docs/contracts.md, "Outbox row": writers must not skip a seq; an inbox consumer in
    # `strict` mode waits for the gap, then dead-letters)
    assert published_ids(world) == [a1.event_id, a3.event_id]
    assert statuses(world, a1, a3) == [OUT, OUT]


def test_a_row_the_stream_publisher_holds_is_not_swept_until_its_lease_expires(world: World) -> None:
    # Given A#1 and A#2 older than the grace, A#1 claimed by the stream publisher for 30 s more
    a1, a2 = event("A", 1), event("A", 2)
    world.write(a1, a2)
    world.clock.advance(GRACE)
    claimer = DynamoDBRowClaimer(world.dynamodb, world.tables.outbox)
    lease = Lease(STREAM_PUBLISHER, world.clock() + timedelta(seconds=30))
    assert claimer.claim(key(a1), lease, world.clock()).claim == "claimed"

    # When the sweeper runs
    sweeper = world.sweeper()
    blocked = world.sweep(sweeper)

    # Then it claims neither A#1 nor A#2 (A#2 must not go before A#1)
    assert (blocked.claimed, blocked.swept) == (0, 0)
    assert published_ids(world) == []

    # When the lease has expired and the sweeper runs again
    world.clock.advance(seconds=31)
    report = world.sweep(sweeper)

    # Then both are published in order
    assert published_ids(world) == [a1.event_id, a2.event_id]
    assert report.swept == 2


def test_a_late_row_the_sweeper_holds_is_left_alone_by_the_stream_publisher(world: World) -> None:
    # Given A#1 committed long ago, its stream record arriving only now, while the sweeper holds it
    a1 = event("A", 1)
    world.write(a1)
    world.clock.advance(GRACE)
    claimer = DynamoDBRowClaimer(world.dynamodb, world.tables.outbox)
    claimer.claim(key(a1), Lease("sweeper", world.clock() + timedelta(seconds=60)), world.clock())

    # When the stream publisher gets the record
    response = world.invoke(world.publisher(), world.stream_event())

    # Then it publishes nothing and hands nothing back: the sweeper publishes it
    assert response == {"batchItemFailures": []}
    assert published_ids(world) == []
    assert statuses(world, a1) == ["PENDING"]


def test_a_late_row_already_published_by_the_sweeper_is_skipped_by_the_stream_publisher(world: World) -> None:
    # Given A#1, swept after the grace, whose stream record arrives only now
    a1 = event("A", 1)
    world.write(a1)
    world.clock.advance(GRACE)
    world.sweep(world.sweeper())
    assert published_ids(world) == [a1.event_id]

    # When the stream publisher gets the record
    response = world.invoke(world.publisher(), world.stream_event())

    # Then it claims the row, finds it gone (settled), and publishes nothing again
    assert response == {"batchItemFailures": []}
    assert published_ids(world) == []


def test_the_table_may_be_named_by_its_arn(world: World) -> None:
    # Given the sweeper configured with the table's ARN (as a construct passes a table from another stack)
    a1 = event("A", 1)
    world.write(a1)
    world.clock.advance(GRACE)
    arn = f"arn:aws:dynamodb:us-east-1:123456789012:table/{world.tables.outbox}"

    # When it runs
    report = world.sweep(world.sweeper(OUTBOX_TABLE_NAME=arn))

    # Then it found and published the row
    assert report.swept == 1
    assert statuses(world, a1) == [OUT]
