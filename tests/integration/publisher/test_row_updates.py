"""Settling, failing and parking rows on moto (outbox_publisher.dynamodb_rows): one conditional call per row,
each changing nothing unless the row is still the one the run published."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from botocore.exceptions import ReadTimeoutError

from outbox.model import OutboxEvent, RowKey
from outbox_publisher.dynamodb_rows import UPDATE_CALL_MS, DynamoDBRowUpdater
from outbox_publisher.row_updates import MarkFailed, Park, RowUpdate, Settle
from tests.integration.publisher.publisher_world import World, client_error
from tests.support.clock import START
from tests.support.events import event
from tests.unit.publisher.fakes import FakeDeadline


def key(e: OutboxEvent) -> RowKey:
    return RowKey(e.aggregate_key, e.seq)


def settle(e: OutboxEvent, generation: int | None = None) -> Settle:
    return Settle(key(e), e.event_id, None if generation is None else {"N": str(generation)})


class Calls:
    """Wraps the real client, counting DeleteItem and UpdateItem calls; the first calls fail as `failures`
    says, in order (None: that call goes through)."""

    def __init__(self, real: Any, failures: list[Exception | None] | None = None) -> None:
        self._real = real
        self._failures = failures or []
        self.count = 0
        self._lock = threading.Lock()

    def delete_item(self, **arguments: Any) -> Any:
        return self._call(self._real.delete_item, arguments)

    def update_item(self, **arguments: Any) -> Any:
        return self._call(self._real.update_item, arguments)

    def _call(self, method: Any, arguments: dict[str, Any]) -> Any:
        with self._lock:  # calls may come from the updater's threads
            self.count += 1
            failure = self._failures.pop(0) if self._failures else None
        if failure is not None:
            raise failure
        return method(**arguments)


def updater(world: World, client: Any = None, workers: int = 1) -> DynamoDBRowUpdater:
    """One call after another unless told otherwise, so that a test can say which call an answer is for."""
    return DynamoDBRowUpdater(
        client or world.dynamodb, world.tables.outbox, sleep=world.sleep, random=lambda: 0.5, workers=workers
    )


def test_a_settle_deletes_each_row_the_run_published_one_call_each(world: World) -> None:
    # Given three pending rows
    events = [event(f"o-{n}", 1) for n in range(3)]
    world.write(*events)
    client = Calls(world.dynamodb)

    # When the run settles them
    report = updater(world, client).apply([settle(e) for e in events])

    # Then they left the table, one DeleteItem each
    assert report.done == [key(e) for e in events]
    assert (report.already_moved, report.failed, report.calls, client.count) == ([], {}, 3, 3)
    assert all(world.stored(e) is None for e in events)


def test_a_runs_updates_are_in_flight_together_and_reported_in_their_order(world: World) -> None:
    # Given five rows, one another path has settled already, and a client whose calls each wait until four
    # are in flight at once (a barrier: one call after another would never get past it)
    events = [event(f"o-{n}", 1) for n in range(5)]
    world.write(*events[1:])
    together = threading.Barrier(4, timeout=10)

    class Together(Calls):
        def delete_item(self, **arguments: Any) -> Any:
            together.wait()
            return super().delete_item(**arguments)

    client = Together(world.dynamodb)

    # When four workers settle them
    report = updater(world, client, workers=4).apply([settle(e) for e in events[:4]])

    # Then the four calls overlapped, and the report lists the rows in the updates' order
    assert report.done == [key(e) for e in events[1:4]]
    assert report.already_moved == [key(events[0])]
    assert (report.failed, report.calls, client.count) == ({}, 4, 4)
    assert [world.stored(e) is None for e in events] == [True, True, True, True, False]


def test_the_updater_refuses_to_run_without_a_worker(world: World) -> None:
    # Given / When / Then
    with pytest.raises(ValueError, match="at least 1"):
        updater(world, workers=0)


def test_a_settle_leaves_a_row_that_is_no_longer_the_one_published(world: World) -> None:
    # Given a FAILED row, a row whose slot holds another event now, a row redriven since (generation 1),
    # and a row that is gone already
    failed, rewritten, redriven, gone = (event(name, 1) for name in "ABCD")
    world.put_raw(failed.to_item() | {"status": {"S": "FAILED"}})
    world.put_raw(event("B", 1).to_item())
    world.put_raw(redriven.to_item() | {"generation": {"N": "1"}})
    updates = [settle(failed), settle(rewritten), settle(redriven), settle(gone)]

    # When the run settles what it published (generation 0, the events it read)
    report = updater(world).apply(updates)

    # Then nothing was deleted: each condition said the row moved on
    assert report.done == []
    assert report.already_moved == [update.key for update in updates]
    assert world.stored(failed) is not None
    assert world.stored(redriven) is not None
    assert world.row(rewritten)["event_id"] != {"S": rewritten.event_id}


def test_a_redriven_row_is_settled_by_its_own_generation(world: World) -> None:
    # Given a row redriven twice
    redriven = event("A", 1)
    world.put_raw(redriven.to_item() | {"generation": {"N": "2"}})

    # When the sweeper, which read it at generation 2, settles it
    report = updater(world).apply([settle(redriven, generation=2)])

    # Then it is gone
    assert report.done == [key(redriven)]
    assert world.stored(redriven) is None


def test_a_failed_mark_keeps_the_row_for_an_operator_and_in_the_failed_index(world: World) -> None:
    # Given a pending row the sweeper holds and had backed off, with a legacy index attribute and a TTL
    e = event("A", 1)
    world.put_raw(
        e.to_item()
        | {
            "lease_owner": {"S": "sweeper:run"},
            "lease_until": {"N": "1"},
            "next_attempt_at": {"N": "1"},
            "pending_shard": {"N": "3"},
            "expires_at": {"N": "1"},
            "attempts": {"N": "7"},
        }
    )

    # When the sweeper marks it FAILED, SNS having taken it before EventBridge refused it for good
    mark = MarkFailed(
        key(e),
        "rejected: eventbridge:InvalidArgument",
        1,
        START,
        "sweeper:run",
        None,
        None,
        e.event_id,
        frozenset({"sns"}),
    )
    report = updater(world).apply([mark])

    # Then it is FAILED with its reason, in the failed index, attempts added, saying SNS took it; what only a
    # row on its way out carries is gone, and so is the TTL that would delete it
    assert report.done == [key(e)]
    row = world.row(e)
    assert (row["status"], row["last_error"], row["failed_at"], row["attempts"]) == (
        {"S": "FAILED"},
        {"S": "rejected: eventbridge:InvalidArgument"},
        {"S": "2026-11-29T12:00:00.000Z"},
        {"N": "8"},
    )
    assert "failed_shard" in row
    assert row["delivered_to"] == {"SS": ["sns"]}
    for gone in (
        "lease_owner",
        "lease_until",
        "next_attempt_at",
        "pending_shard",
        "expires_at",
        "released_at",
    ):
        assert gone not in row


def test_a_failed_mark_on_a_route_that_continues_releases_the_row_once(world: World) -> None:
    # Given a pending row, once released in an earlier life
    e = event("A", 1)
    world.put_raw(e.to_item() | {"first_released_at": {"S": "2026-11-01T00:00:00.000Z"}})

    # When it is marked FAILED on a route that continues past poison
    mark = MarkFailed(key(e), "rejected", 1, START, release_reason="its route continues", event_id=e.event_id)
    updater(world).apply([mark])

    # Then it is released now, and keeps when it was first released
    row = world.row(e)
    assert (row["released_at"], row["release_reason"]) == (
        {"S": "2026-11-29T12:00:00.000Z"},
        {"S": "its route continues"},
    )
    assert row["first_released_at"] == {"S": "2026-11-01T00:00:00.000Z"}


def test_a_failed_mark_or_a_park_needs_the_runs_lease_when_it_claimed_the_row(world: World) -> None:
    # Given a row another sweep holds now
    e = event("A", 1)
    world.put_raw(e.to_item() | {"lease_owner": {"S": "sweeper:other"}, "lease_until": {"N": "1"}})
    updates: list[RowUpdate] = [
        MarkFailed(key(e), "rejected", 1, START, "sweeper:mine", event_id=e.event_id),
        Park(key(e), e.event_id, None, frozenset({"sns"}), "eventbridge:Throttling", "sweeper:mine"),
    ]

    # When this run (which lost its lease) marks or parks it
    reports = [updater(world).apply([update]) for update in updates]

    # Then neither changed it
    assert [report.already_moved for report in reports] == [[key(e)], [key(e)]]
    row = world.row(e)
    assert (row["status"], row["lease_owner"]) == ({"S": "PENDING"}, {"S": "sweeper:other"})
    assert "delivered_to" not in row


def test_a_park_adds_the_destinations_that_took_the_event_and_drops_the_runs_lease(world: World) -> None:
    # Given a pending row EventBridge took in an earlier run, claimed by this one
    e = event("A", 1)
    world.put_raw(
        e.to_item()
        | {
            "delivered_to": {"SS": ["eventbridge"]},
            "lease_owner": {"S": "stream-publisher"},
            "lease_until": {"N": "1"},
        }
    )

    # When the run parks it after SNS took it and a third destination did not
    updater(world).apply(
        [Park(key(e), e.event_id, None, frozenset({"sns"}), "x:Throttling", "stream-publisher")]
    )

    # Then the row stays PENDING, records both destinations, why the rest did not, and is free to claim
    row = world.row(e)
    assert (row["status"], sorted(row["delivered_to"]["SS"]), row["last_error"]) == (
        {"S": "PENDING"},
        ["eventbridge", "sns"],
        {"S": "x:Throttling"},
    )
    assert "lease_owner" not in row


def test_a_throttled_or_unanswered_call_is_sent_once_more_then_reported(world: World) -> None:
    # Given three rows; DynamoDB throttles the first call and does not answer the second, then throttles the
    # first row's second call again
    events = [event(f"o-{n}", 1) for n in range(3)]
    world.write(*events)
    throttled = client_error("ProvisionedThroughputExceededException", "DeleteItem")
    unanswered = ReadTimeoutError(endpoint_url="https://dynamodb")
    client = Calls(world.dynamodb, [throttled, unanswered, None, throttled])

    # When they are settled
    report = updater(world, client).apply([settle(e) for e in events])

    # Then the third was settled at once, the second on its second call after a pause, and the first is
    # reported (left PENDING for the sweeper)
    assert sorted(report.done) == sorted([key(events[2]), key(events[1])])
    assert report.failed == {key(events[0]): "ThrottledError"}
    assert world.sleep.delays == [0.05]
    assert client.count == 5


def test_a_refusal_that_is_not_worth_a_second_call_is_reported_at_once(world: World) -> None:
    # Given DynamoDB refusing the call for the caller's fault (a missing permission, say)
    e = event("A", 1)
    world.write(e)
    client = Calls(world.dynamodb, [client_error("AccessDeniedException", "DeleteItem")])

    # When it is settled / Then it is reported after one call, and the row stays
    report = updater(world, client).apply([settle(e)])
    assert (report.failed, client.count) == ({key(e): "AwsCallError"}, 1)
    assert world.stored(e) is not None


def test_no_call_starts_without_the_time_for_it(world: World) -> None:
    # Given a row, and less time left than one call takes
    e = event("A", 1)
    world.write(e)
    client = Calls(world.dynamodb)

    # When it is settled / Then nothing is called, the row is reported and stays
    report = updater(world, client).apply([settle(e)], FakeDeadline(UPDATE_CALL_MS - 1))
    assert (report.failed, client.count) == ({key(e): "DeadlineExceeded"}, 0)
    assert world.stored(e) is not None


def test_two_updates_of_one_row_make_one_call(world: World) -> None:
    # Given two updates of one row in one call of the updater (the last one counts)
    e = event("A", 1)
    world.write(e)
    client = Calls(world.dynamodb)

    # When applied
    report = updater(world, client).apply(
        [Park(key(e), e.event_id, None, frozenset({"sns"}), "eventbridge:Throttling"), settle(e)]
    )

    # Then one call settled it
    assert (report.done, client.count) == ([key(e)], 1)
    assert world.stored(e) is None
