"""The publishing engine when calls fail: retries with backoff, where it stops, what it reports, deadlines."""

from __future__ import annotations

from collections.abc import Sequence

from outbox.errors import ThrottledError
from outbox_publisher.adapters import publishing_client
from outbox_publisher.errors import DestinationCallError, FailureKind
from outbox_publisher.messages import Message
from outbox_publisher.ports import EntryResult
from outbox_publisher.report import Status
from outbox_publisher.retry import PUBLISH_CONNECT_TIMEOUT_S, PUBLISH_READ_TIMEOUT_S, RetryPolicy
from outbox_publisher.routing import Destination
from tests.support.events import event
from tests.unit.publisher.fakes import SNS_ONLY, FakeDeadline, candidates, harness, ids, transient


def test_a_throttled_entry_is_retried_after_a_jittered_backoff() -> None:
    # Given three events, the middle one throttled once by EventBridge
    events = [event(f"o-{n}", 1) for n in range(3)]
    h = harness()
    h.eventbridge.fail_entry(events[1].event_id, transient(), times=1)

    # When they are published
    report = h.engine.publish(candidates(*events))

    # Then only the throttled entry was sent again, after 0.5 x 100 ms, and all are published
    assert h.eventbridge.calls == [ids(*events), ids(events[1])]
    assert h.sleep.delays == [0.05]
    assert [o.status for o in report.outcomes] == [Status.PUBLISHED] * 3
    assert [o.attempts for o in report.outcomes] == [1, 2, 1]


def test_backoff_grows_exponentially_up_to_the_cap_then_gives_up() -> None:
    # Given an entry that is always throttled, and a policy of 6 attempts, 100 ms base, 1 s cap
    only = event("o-1", 1)
    h = harness(
        destinations=SNS_ONLY, retry=RetryPolicy(max_attempts=6, base_delay_ms=100, max_delay_ms=1000)
    )
    h.sns.fail_entry(only.event_id, transient(), times=1000)

    # When it is published
    report = h.engine.publish(candidates(only))

    # Then it was tried six times with full-jitter delays (random 0.5) of 50, 100, 200, 400, 500 ms
    assert len(h.sns.calls) == 6
    assert h.sleep.delays == [0.05, 0.1, 0.2, 0.4, 0.5]
    assert report.stopped_at == 0
    assert report.outcomes[0].status is Status.FAILED
    assert report.outcomes[0].code == "sns:ThrottlingException"
    assert report.outcomes[0].attempts == 6
    assert h.marker.marks == []


def test_failure_on_the_third_of_ten_events_of_one_aggregate_stops_there() -> None:
    # Given ten events of one order (one call each), the third always failing
    events = [event("hot", seq) for seq in range(1, 11)]
    h = harness(destinations=SNS_ONLY)
    h.sns.fail_entry(events[2].event_id, transient("InternalError"), times=1000)

    # When they are published
    report = h.engine.publish(candidates(*events))

    # Then 1..2 are published, 3 failed, 4..10 were never sent
    assert h.sns.accepted == ids(*events[:2])
    assert report.stopped_at == 2
    assert [o.status for o in report.outcomes] == [Status.PUBLISHED] * 2 + [Status.FAILED] + [
        Status.NOT_ATTEMPTED
    ] * 7
    assert [o.candidate.ref for o in report.retry] == [f"seq-{n:03d}" for n in range(2, 10)]
    assert [mark.key.seq for mark in h.marker.marks] == [1, 2]


def test_failure_inside_a_call_reports_later_entries_of_that_call_which_are_already_out() -> None:
    # Given ten events of ten orders (one call), the third always throttled, then an 11th event
    events = [event(f"o-{n}", 1) for n in range(11)]
    h = harness(destinations=SNS_ONLY)
    h.sns.fail_entry(events[2].event_id, transient(), times=1000)

    # When they are published
    report = h.engine.publish(candidates(*events))

    # Then the engine stops at the third: the 11th is never sent; 4..10 shared the call and are out
    assert report.stopped_at == 2
    assert events[10].event_id not in h.sns.accepted
    assert report.outcomes[10].status is Status.NOT_ATTEMPTED
    assert [o.status for o in report.outcomes[3:10]] == [Status.PUBLISHED] * 7
    # and their rows say so, so a sweeper does not publish them a third time
    assert sorted(mark.key.aggregate_key for mark in h.marker.marks) == sorted(
        e.aggregate_key for e in events[:2] + events[3:10]
    )
    assert len(report.retry) == 9


def test_a_whole_call_failure_is_retried_for_every_entry() -> None:
    # Given a PutEvents call that fails as a whole once
    events = [event(f"o-{n}", 1) for n in range(3)]
    h = harness(destinations=(Destination.EVENTBRIDGE,))
    h.eventbridge.fail_call(DestinationCallError("x", code="InternalException", kind=FailureKind.TRANSIENT))

    # When they are published
    report = h.engine.publish(candidates(*events))

    # Then the same call is made again and everything is published
    assert h.eventbridge.calls == [ids(*events), ids(*events)]
    assert report.count(Status.PUBLISHED) == 3
    assert len(h.sleep.delays) == 1


def test_a_whole_call_failure_that_persists_stops_at_the_first_entry_of_the_call() -> None:
    # Given one published event, then a call that always fails
    first, second, third = event("a", 1), event("a", 2), event("b", 1)
    h = harness(destinations=SNS_ONLY)
    h.sns.fail_call(
        DestinationCallError("x", code="InternalError", kind=FailureKind.TRANSIENT),
        times=1000,
        when=lambda messages: messages[0].event.event_id == second.event_id,
    )

    # When they are published
    report = h.engine.publish(candidates(first, second, third))

    # Then the stop is at the first entry of the failing call. b#1 went in the first wave, with a#1: it is
    # out, and (after the stop in input order) handed back with the rest: the wave's duplicate on redelivery
    assert report.stopped_at == 1
    assert h.sns.accepted == ids(first, third)
    assert [o.status for o in report.outcomes] == [Status.PUBLISHED, Status.FAILED, Status.PUBLISHED]
    assert [o.candidate.event for o in report.retry] == [second, third]


def test_a_call_refused_for_its_content_is_split_to_find_the_culprit() -> None:
    # Given a call rejected as a whole (InvalidParameter) whenever it holds a bad event
    good1, bad, good2 = event("a", 1), event("b", 1), event("c", 1)
    h = harness(destinations=SNS_ONLY)
    h.sns.fail_call(
        DestinationCallError("x", code="InvalidParameter", kind=FailureKind.PERMANENT),
        times=2,
        when=lambda messages: any(m.event.event_id == bad.event_id for m in messages),
    )

    # When they are published
    report = h.engine.publish(candidates(good1, bad, good2))

    # Then each entry was sent alone; the bad one is poison and the good ones are out, with no sleep
    assert h.sns.calls == [ids(good1, bad, good2), ids(good1), ids(bad), ids(good2)]
    assert [o.status for o in report.outcomes] == [Status.PUBLISHED, Status.POISONED, Status.PUBLISHED]
    assert h.poison.messages[0].error_code == "sns:InvalidParameter"
    assert h.sleep.delays == []


def test_a_blocked_destination_is_not_retried_and_stops_the_batch() -> None:
    # Given EventBridge refusing the source (a permissions problem, not the event's fault)
    events = [event("a", 1), event("a", 2)]
    h = harness(destinations=(Destination.EVENTBRIDGE,))
    h.eventbridge.fail_entry(
        events[0].event_id, EntryResult.failure("NotAuthorizedForSourceException", FailureKind.BLOCKED)
    )

    # When they are published
    report = h.engine.publish(candidates(*events))

    # Then nothing is retried or poisoned, and both records are handed back
    assert h.sleep.delays == []
    assert h.poison.messages == []
    assert report.stopped_at == 0
    assert report.outcomes[0].code == "eventbridge:NotAuthorizedForSourceException"


def test_a_failure_on_one_destination_keeps_later_events_from_the_next_destination() -> None:
    # Given three orders; SNS always throttles the second
    events = [event(f"o-{n}", 1) for n in range(3)]
    h = harness()
    h.sns.fail_entry(events[1].event_id, transient(), times=1000)

    # When they are published
    report = h.engine.publish(candidates(*events))

    # Then EventBridge only got the first: the rest will be redelivered and published everywhere then
    assert h.eventbridge.calls == [ids(events[0])]
    assert report.stopped_at == 1
    assert report.outcomes[2].status is Status.NOT_ATTEMPTED
    assert report.outcomes[2].delivered_to == (Destination.SNS,)


def test_marking_failure_does_not_fail_published_events() -> None:
    # Given a marker that raises
    events = [event("a", 1), event("b", 1)]
    h = harness(destinations=SNS_ONLY)
    h.marker.error = ThrottledError("throttled")

    # When they are published
    report = h.engine.publish(candidates(*events))

    # Then the events count as published and the rows as not marked
    assert report.stopped_at is None
    assert report.count(Status.PUBLISHED) == 2
    assert set(report.marking.failed.values()) == {"ThrottledError"}
    assert len(report.marking.failed) == 2


def test_retries_never_run_into_the_safety_margin() -> None:
    # Given 3.2 s left with a 3 s margin, and an entry throttled twice
    only = event("a", 1)
    h = harness(destinations=SNS_ONLY, retry=RetryPolicy(base_delay_ms=400, safety_margin_ms=3000))
    h.sns.fail_entry(only.event_id, transient(), times=2)

    # When it is published with that deadline
    report = h.engine.publish(candidates(only), FakeDeadline(remaining=3_200))

    # Then it does not sleep 200 ms into the margin: it hands the record back
    assert h.sleep.delays == []
    assert report.stopped_at == 0


def test_no_call_starts_inside_the_safety_margin() -> None:
    # Given less time left than the margin
    h = harness(destinations=SNS_ONLY)

    # When events are published
    report = h.engine.publish(candidates(event("a", 1), event("b", 1)), FakeDeadline(remaining=2_000))

    # Then nothing is sent and all is handed back, and nothing is marked
    assert h.sns.calls == []
    assert report.stopped_at == 0
    assert report.outcomes[0].code == "DeadlineExceeded"
    assert h.marker.marks == []


def test_no_call_to_the_next_destination_starts_once_time_ran_low_during_the_first() -> None:
    # Given SNS and EventBridge, and an SNS call after which little time is left
    a, b = event("a", 1), event("b", 1)
    deadline = FakeDeadline(remaining=60_000)
    h = harness()
    sns_publish = h.sns.publish

    def slow_sns(messages: Sequence[Message]) -> list[EntryResult]:
        deadline.remaining = 5_000
        return sns_publish(messages)

    h.sns.publish = slow_sns  # type: ignore[method-assign]

    # When the events are published
    report = h.engine.publish(candidates(a, b), deadline)

    # Then EventBridge is never called, and the batch is handed back from the first event
    assert h.sns.calls == [ids(a, b)]
    assert h.eventbridge.calls == []
    assert report.stopped_at == 0
    assert report.outcomes[0].code == "eventbridge:DeadlineExceeded"
    assert h.marker.marks == []


def test_the_margin_outlasts_the_longest_publish_call() -> None:
    # Given the publishing clients' timeouts and the default retry policy
    config = publishing_client("sns").meta.config

    # Then a call started just outside the margin ends inside it, leaving time to mark and answer
    assert config.connect_timeout == PUBLISH_CONNECT_TIMEOUT_S
    assert config.read_timeout == PUBLISH_READ_TIMEOUT_S
    assert RetryPolicy().safety_margin_ms > (PUBLISH_CONNECT_TIMEOUT_S + PUBLISH_READ_TIMEOUT_S) * 1000


def test_an_incomplete_answer_counts_as_a_transient_failure() -> None:
    # Given a destination that answers for fewer entries than it was sent
    events = [event("a", 1), event("b", 1)]
    h = harness(destinations=SNS_ONLY, retry=RetryPolicy(max_attempts=1))
    original = h.sns.publish
    h.sns.publish = lambda messages: original(messages)[:1]  # type: ignore[method-assign]

    # When they are published
    report = h.engine.publish(candidates(*events))

    # Then nothing of that call is trusted as done
    assert report.stopped_at == 0
    assert report.outcomes[0].code == "sns:IncompleteResponse"
