"""The sweeper when things keep failing: backoff, the cutoff that turns a stuck event into a FAILED one with
its reason, reads that fail, and the entry point's metrics on every run."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import pytest

from outbox.aws import invocation_client
from outbox.clock import format_timestamp, utc_now
from outbox.errors import ConfigurationError
from outbox.model import OutboxEvent, OutboxStatus, RowKey
from outbox_ops.release import redrive
from outbox_publisher.dynamodb_rows import UPDATE_CALL_MS
from outbox_sweeper import handler as entry_point
from tests.integration.publisher.publisher_world import (
    SnsClientFailingEvents,
    World,
    client_error,
)
from tests.support.events import event
from tests.support.lambda_context import FakeLambdaContext
from tests.support.metrics import emitted_metrics

GRACE = timedelta(seconds=60)


def row(world: World, e: OutboxEvent) -> dict[str, Any]:
    return world.row(e)


def test_a_row_that_keeps_failing_backs_off_exponentially_then_fails_with_its_reason(world: World) -> None:
    # Given A#1 that SNS keeps refusing (a transient fault), A#2 behind it, a cutoff at 12 attempts (a sweep
    # makes up to 5) and a 40 s base backoff
    a1, a2 = event("A", 1), event("A", 2)
    world.write(a1, a2)
    world.clock.advance(GRACE)
    failing = SnsClientFailingEvents(world.sns, {a1.event_id}, code="InternalError")
    sweeper = world.sweeper(sns_client=failing, SWEEP_MAX_ATTEMPTS="12", SWEEP_BACKOFF_BASE_SECONDS="40")

    # When the sweeper runs
    first = world.sweep(sweeper)

    # Then A#1 was tried 5 times, then backed off for 40 s * (0.5 + 0.5 * jitter 0.5), unleased;
    # A#2 was not sent ahead of it
    assert (first.claimed, first.backed_off, first.swept) == (2, 1, 0)
    stored = row(world, a1)
    assert (stored["attempts"], stored["sweep_failures"]) == ({"N": "5"}, {"N": "1"})
    assert stored["last_error"] == {"S": "sns:InternalError"}
    assert "lease_owner" not in stored
    assert stored["next_attempt_at"] == {"N": str(math.ceil(world.clock().timestamp() + 30))}
    assert failing.published == []

    # When the sweeper runs again before the backoff is over
    world.clock.advance(seconds=29)
    waiting = world.sweep(sweeper)

    # Then it tries neither A#1 (backing off) nor A#2 (old enough, but behind a PENDING row that is not due)
    assert (waiting.due, waiting.claimed) == (0, 0)

    # When it runs after the backoff, and fails again
    world.clock.advance(seconds=2)
    again = world.sweep(sweeper)

    # Then the backoff doubled: 80 s * 0.75
    assert again.backed_off == 1
    stored = row(world, a1)
    assert (stored["attempts"], stored["sweep_failures"]) == ({"N": "10"}, {"N": "2"})
    assert stored["next_attempt_at"] == {"N": str(math.ceil(world.clock().timestamp() + 60))}

    # When the next run, which may reach the 12th attempt, fails too
    world.clock.advance(seconds=61)
    last = world.sweep(sweeper)

    # Then A#1 became FAILED (gave_up) with its reason, whole in the poison queue; A#2 waits behind it
    assert (last.gave_up, last.poisoned, last.held_aggregates) == (1, 1, 1)
    assert row(world, a1)["status"] == {"S": "FAILED"}
    assert row(world, a1)["last_error"]["S"].startswith("gave_up: sns:InternalError")
    [poison] = world.poison()
    assert (poison["reason"], poison["event_id"]) == ("gave_up", a1.event_id)
    assert row(world, a2)["status"] == {"S": "PENDING"}
    assert world.topic_envelopes() == []


def test_the_backoff_is_capped(world: World) -> None:
    # Given A#1 that has already failed 9 sweeps, and a 100 s cap
    a1 = event("A", 1)
    world.put_raw(a1.to_item() | {"sweep_failures": {"N": "9"}})
    world.clock.advance(GRACE)
    failing = SnsClientFailingEvents(world.sns, {a1.event_id}, code="InternalError")

    # When the sweeper fails once more
    world.sweep(world.sweeper(sns_client=failing, SWEEP_BACKOFF_MAX_SECONDS="100"))

    # Then it waits at most the cap (with its jitter), not 30 s * 2^9
    stored = row(world, a1)
    assert stored["next_attempt_at"] == {"N": str(math.ceil(world.clock().timestamp() + 75))}


@pytest.mark.parametrize("failures", ["40", "1000", "99999999999999999999", "9.9E+125"])
def test_a_row_that_failed_more_sweeps_than_a_timedelta_can_double_waits_the_cap(
    world: World, failures: str
) -> None:
    # Given A#1 that failed more sweeps than 30 s can be doubled without overflowing a timedelta (as a large
    # SWEEP_MAX_ATTEMPTS allows), up to the largest number DynamoDB stores
    a1 = event("A", 1)
    world.put_raw(a1.to_item() | {"sweep_failures": {"N": failures}})
    world.clock.advance(GRACE)
    failing = SnsClientFailingEvents(world.sns, {a1.event_id}, code="InternalError")

    # When the sweeper fails once more
    world.sweep(world.sweeper(sns_client=failing, SWEEP_BACKOFF_MAX_SECONDS="100"))

    # Then the row backs off as any other (no OverflowError): the cap, with its jitter
    stored = row(world, a1)
    assert stored["next_attempt_at"] == {"N": str(math.ceil(world.clock().timestamp() + 75))}
    assert stored["status"] == {"S": "PENDING"}


def test_a_redriven_row_starts_its_cutoffs_afresh(world: World) -> None:
    # Given A#1 that gave up two days ago after 100 attempts, redriven now
    a1 = event("A", 1)
    world.put_raw(
        a1.with_status(OutboxStatus.FAILED).to_item()
        | {"attempts": {"N": "100"}, "sweep_failures": {"N": "20"}, "last_error": {"S": "gave_up: x"}}
    )
    world.clock.advance(days=2)
    redrive(
        world.dynamodb,
        world.tables.outbox,
        RowKey(a1.aggregate_key, 1),
        reason="outage over",
        actor="ops",
        now=world.clock(),
    )
    failing = SnsClientFailingEvents(world.sns, {a1.event_id}, code="InternalError")

    # When the sweeper fails to publish it once more
    report = world.sweep(world.sweeper(sns_client=failing))

    # Then it backs off (first failure since the redrive) instead of failing it for good at once
    assert (report.backed_off, report.gave_up) == (1, 0)
    stored = row(world, a1)
    assert (stored["status"], stored["attempts"], stored["sweep_failures"]) == (
        {"S": "PENDING"},
        {"N": "5"},
        {"N": "1"},
    )


def test_a_row_older_than_the_age_cutoff_gets_one_last_chance(world: World) -> None:
    # Given A#1 two hours old that SNS refuses, with a one-hour age cutoff
    a1 = event("A", 1)
    world.write(a1)
    world.clock.advance(hours=2)
    failing = SnsClientFailingEvents(world.sns, {a1.event_id}, code="InternalError")

    # When the sweeper runs
    report = world.sweep(world.sweeper(sns_client=failing, SWEEP_FAIL_AFTER_SECONDS="3600"))

    # Then A#1 failed for good at its first failure
    assert report.gave_up == 1
    assert row(world, a1)["status"] == {"S": "FAILED"}


class DynamoDBClientFailingReads:
    """Wraps the real DynamoDB client: BatchGetItem (the predecessors' states) is throttled."""

    def __init__(self, real: Any) -> None:
        self._real = real

    def batch_get_item(self, **_: Any) -> None:
        raise client_error("ProvisionedThroughputExceededException", "BatchGetItem")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def test_a_row_whose_predecessor_cannot_be_read_waits_for_a_later_run(world: World) -> None:
    # Given A#1 and A#2 stranded, then B#1; a first run that takes one row (A#1) and stops there
    a1, a2, b1 = event("A", 1), event("A", 2), event("B", 1)
    world.write(a1, a2, b1)
    world.clock.advance(GRACE)
    world.sweep(world.sweeper(SWEEP_MAX_ROWS="1"))
    assert [e["event_id"] for e in world.topic_envelopes()] == [a1.event_id]

    # When the next run (another container: it never settled A#1) resumes at A#2, whose predecessor it must
    # read, and reads of predecessors are throttled
    failing = DynamoDBClientFailingReads(world.dynamodb)
    report = world.sweep(world.sweeper(dynamodb_client=failing, SWEEP_MAX_ROWS="1"))

    # Then A#2 is not published (the run cannot tell whether it may go): PENDING, its lease dropped
    assert (report.claimed, report.swept) == (1, 0)
    assert row(world, a2)["status"] == {"S": "PENDING"}
    assert "lease_owner" not in row(world, a2)
    assert world.topic_envelopes() == []

    # And with DynamoDB back, the run reads on from there (B#1), and the next pass takes A#2
    sweeper = world.sweeper()
    assert world.sweep(sweeper).complete
    world.sweep(sweeper)
    assert [e["event_id"] for e in world.topic_envelopes()] == [b1.event_id, a2.event_id]


class Deadline:
    def __init__(self, remaining_ms: int) -> None:
        self.remaining = remaining_ms

    def remaining_ms(self) -> int:
        return self.remaining


class SnsClientThenLittleTime:
    """Wraps the real SNS client: every entry is throttled, and once the call has returned the invocation has
    less time left than one DynamoDB call takes."""

    def __init__(self, real: Any, deadline: Deadline) -> None:
        self._real = real
        self._deadline = deadline

    def publish_batch(self, **arguments: Any) -> Any:
        self._deadline.remaining = UPDATE_CALL_MS - 1
        entries = arguments["PublishBatchRequestEntries"]
        return {
            "Successful": [],
            "Failed": [{"Id": entry["Id"], "Code": "Throttling", "SenderFault": False} for entry in entries],
        }


class DynamoDBClientTimed:
    """Wraps the real DynamoDB client, noting each write call with the time left when it started."""

    def __init__(self, real: Any, deadline: Deadline) -> None:
        self._real = real
        self._deadline = deadline
        self.writes: list[tuple[str, int]] = []

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._real, name)
        if name not in {"update_item", "put_item", "delete_item"}:
            return method

        def timed(**arguments: Any) -> Any:
            self.writes.append((name, self._deadline.remaining))
            return method(**arguments)

        return timed


def test_a_sweep_with_no_time_left_after_publishing_starts_no_call_it_could_not_finish(world: World) -> None:
    # Given three stranded rows, a run with a minute left, and SNS throttling every entry, after which less
    # time is left than one DynamoDB call takes
    events = [event(f"o-{n}", 1) for n in range(3)]
    world.write(*events)
    world.clock.advance(GRACE)
    deadline = Deadline(60_000)
    dynamodb = DynamoDBClientTimed(world.dynamodb, deadline)
    sweeper = world.sweeper(
        sns_client=SnsClientThenLittleTime(world.sns, deadline), dynamodb_client=dynamodb, EVENT_BUS_NAME=""
    )

    # When the sweep runs
    report = sweeper.run(deadline)

    # Then it claimed the rows with time to spare, and after the publish call started nothing: no backoff, no
    # release, no saved position (the leases end with the invocation; the next run reads again)
    assert report.claimed == 3
    assert [name for name, left in dynamodb.writes if left < UPDATE_CALL_MS] == []
    assert report.backed_off == 0
    assert all(world.row(e)["status"] == {"S": "PENDING"} for e in events)


@pytest.fixture
def deployed(world: World, monkeypatch: pytest.MonkeyPatch) -> World:
    """The entry point with the deployed environment, built from it on first use."""
    for name, value in world.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(entry_point, "_sweeper", None)
    invocation_client.cache_clear()  # a client cached by an earlier test points at its finished moto
    # Powertools keeps one metric set per process: drop what tests that call `handle` directly left there.
    entry_point.metrics.clear_metrics()
    return world


def test_an_idle_sweep_emits_every_metric(deployed: World, capsys: pytest.CaptureFixture[str]) -> None:
    # Given nothing pending
    # When the scheduled sweep runs
    summary = entry_point.handler({}, FakeLambdaContext())

    # Then it says so, and every metric an alarm watches has a data point (zero), not a gap
    assert summary["pending"] == 0
    metrics = emitted_metrics(capsys.readouterr().out)
    assert metrics == {
        "OldestPendingAgeSeconds": [0.0],
        "PendingEvents": [0.0],
        "HeldAggregates": [0.0],
        "SweptEvents": [0.0],
        "BackedOffEvents": [0.0],
        "GaveUpEvents": [0.0],
        "RowUpdateFailures": [0.0],
        "WriterContractViolations": [0.0],
    }


def test_a_sweep_reports_what_it_did(deployed: World, capsys: pytest.CaptureFixture[str]) -> None:
    # Given two pending events: one that occurred days ago, one that occurred just now (the handler runs on
    # the real clock, as deployed)
    old, fresh = event("A", 1), event("B", 1)
    deployed.write(old)
    deployed.put_raw(fresh.to_item() | {"occurred_at": {"S": format_timestamp(utc_now())}})

    # When the scheduled sweep runs
    summary = entry_point.handler({}, FakeLambdaContext())

    # Then the old one was swept and the fresh one left to the stream, the only one still pending
    assert (summary["rows_read"], summary["due"], summary["swept"], summary["pending"]) == (2, 1, 1, 1)
    metrics = emitted_metrics(capsys.readouterr().out)
    assert metrics["SweptEvents"] == [1.0]
    assert metrics["PendingEvents"] == [1.0]
    assert metrics["OldestPendingAgeSeconds"][0] < 60
    assert [e["event_id"] for e in deployed.topic_envelopes()] == [old.event_id]


@pytest.mark.filterwarnings("ignore:No application metrics to publish")
def test_a_bad_sweep_configuration_fails_every_run(deployed: World, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a backoff ceiling below its base
    monkeypatch.setenv("SWEEP_BACKOFF_BASE_SECONDS", "60")
    monkeypatch.setenv("SWEEP_BACKOFF_MAX_SECONDS", "30")

    # When the schedule invokes the sweeper
    # Then it fails loudly, every time
    for _ in range(2):
        with pytest.raises(ConfigurationError, match="SWEEP_BACKOFF_MAX_SECONDS"):
            entry_point.handler({}, FakeLambdaContext())
