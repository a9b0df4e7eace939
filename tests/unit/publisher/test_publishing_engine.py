"""The publishing engine against in-memory ports: batching, order, retries, poison, stop, marking."""

from __future__ import annotations

from collections.abc import Sequence

from outbox.errors import ThrottledError
from outbox.marking import FailedMark, PublishedMark, RowKey
from outbox_publisher.adapters import publishing_client
from outbox_publisher.candidates import Candidate
from outbox_publisher.errors import DestinationCallError, FailureKind
from outbox_publisher.messages import Message
from outbox_publisher.poison import PoisonReason
from outbox_publisher.ports import EntryResult
from outbox_publisher.report import Status
from outbox_publisher.retry import PUBLISH_CONNECT_TIMEOUT_S, PUBLISH_READ_TIMEOUT_S, RetryPolicy
from outbox_publisher.routing import Destination, Route, Router
from tests.support.clock import START
from tests.support.events import event
from tests.unit.publisher.fakes import FakeDeadline, candidates, harness, transient

SNS_ONLY = (Destination.SNS,)


def ids(*events: object) -> list[str]:
    return [e.event_id for e in events]  # type: ignore[attr-defined]


def test_distinct_aggregates_share_one_call_per_destination() -> None:
    # Given ten events of ten different orders
    events = [event(f"o-{n}", 1) for n in range(10)]
    h = harness()

    # When they are published
    report = h.engine.publish(candidates(*events))

    # Then one call per destination carried all ten, in order, and every row is marked PUBLISHED
    assert h.sns.calls == [ids(*events)]
    assert h.eventbridge.calls == [ids(*events)]
    assert [outcome.status for outcome in report.outcomes] == [Status.PUBLISHED] * 10
    assert report.stopped_at is None
    assert report.calls == 2
    assert h.marker.marks == [PublishedMark(RowKey(e.aggregate_key, 1), START, 1) for e in events]
    assert all(outcome.latency_ms == 2000 for outcome in report.outcomes)


def test_an_eleventh_event_starts_a_second_call() -> None:
    # Given eleven events of distinct aggregates
    events = [event(f"o-{n}", 1) for n in range(11)]
    h = harness(destinations=SNS_ONLY)

    # When they are published
    h.engine.publish(candidates(*events))

    # Then no call holds more than ten entries
    assert [len(call) for call in h.sns.calls] == [10, 1]


def test_a_call_never_carries_two_events_of_one_aggregate() -> None:
    # Given A#1, B#1, A#2, A#3, B#2: A is hot
    a1, b1, a2, a3, b2 = event("A", 1), event("B", 1), event("A", 2), event("A", 3), event("B", 2)
    h = harness(destinations=SNS_ONLY)

    # When they are published
    h.engine.publish(candidates(a1, b1, a2, a3, b2))

    # Then calls are contiguous runs that end where an aggregate would repeat
    assert h.sns.calls == [ids(a1, b1), ids(a2), ids(a3, b2)]
    assert h.sns.accepted == ids(a1, b1, a2, a3, b2)


def test_calls_are_cut_to_stay_within_the_batch_byte_limit() -> None:
    # Given three events of about 100 KB each (three would exceed 256 KB together)
    big = {"blob": "x" * 100_000}
    events = [event(f"o-{n}", 1, payload=big) for n in range(3)]
    h = harness(destinations=SNS_ONLY)

    # When they are published
    report = h.engine.publish(candidates(*events))

    # Then the third goes in a second call
    assert [len(call) for call in h.sns.calls] == [2, 1]
    assert report.count(Status.PUBLISHED) == 3


def test_an_entry_over_256_kb_is_poison_and_the_batch_goes_on() -> None:
    # Given a normal event, an event whose envelope exceeds 256 KB, and another normal event
    small1, huge, small2 = event("a", 1), event("b", 1, payload={"blob": "x" * 270_000}), event("c", 1)
    h = harness(destinations=SNS_ONLY)

    # When they are published
    report = h.engine.publish(cands := candidates(small1, huge, small2))

    # Then the huge one went whole to the poison queue, was never sent, and the others were published
    assert h.sns.accepted == ids(small1, small2)
    [poison] = h.poison.messages
    assert poison.reason is PoisonReason.TOO_LARGE
    assert poison.error_code == "EntryTooLarge"
    assert poison.row == cands[1].row
    assert poison.attempts == 0
    assert [o.status for o in report.outcomes] == [Status.PUBLISHED, Status.POISONED, Status.PUBLISHED]
    assert report.stopped_at is None
    failed = [mark for mark in h.marker.marks if isinstance(mark, FailedMark)]
    assert failed == [FailedMark(RowKey(huge.aggregate_key, 1), failed[0].error, 0)]
    assert failed[0].error.startswith("too_large: EntryTooLarge: sns entry is ")
    assert "x" * 20 not in failed[0].error


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

    # Then the stop is at the first entry of the failing call
    assert report.stopped_at == 1
    assert h.sns.accepted == ids(first)
    assert [o.status for o in report.outcomes] == [Status.PUBLISHED, Status.FAILED, Status.NOT_ATTEMPTED]


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


def test_an_entry_refused_for_good_is_poison_and_the_batch_goes_on() -> None:
    # Given A#1 refused by EventBridge as MalformedDetail, then A#2
    a1, a2 = event("A", 1), event("A", 2)
    h = harness()
    h.eventbridge.fail_entry(a1.event_id, EntryResult.failure("MalformedDetail", FailureKind.PERMANENT))

    # When they are published
    report = h.engine.publish(candidates(a1, a2))

    # Then A#1 is poison (SNS did take it: the poison message says so) and A#2 is published after it
    [poison] = h.poison.messages
    assert poison.reason is PoisonReason.REJECTED
    assert poison.error_code == "eventbridge:MalformedDetail"
    assert poison.delivered_to == (Destination.SNS,)
    assert poison.attempts == 1
    assert poison.event_id == a1.event_id
    assert report.outcomes[1].status is Status.PUBLISHED
    assert report.stopped_at is None


def test_unreadable_rows_are_poison_with_the_field_named() -> None:
    # Given a row whose payload is not JSON and a row missing event_type, between two good rows
    good1, good2 = event("a", 1), event("b", 1)
    bad_json = event("c", 1).to_item() | {"payload": {"S": "{not json"}}
    missing = {k: v for k, v in event("d", 1).to_item().items() if k != "event_type"}
    rows = [
        Candidate.from_row("1", good1.to_item()),
        Candidate.from_row("2", bad_json),
        Candidate.from_row("3", missing),
        Candidate.from_row("4", good2.to_item()),
    ]
    h = harness(destinations=SNS_ONLY)

    # When they are published
    report = h.engine.publish(rows)

    # Then both bad rows went whole to the poison queue with their reason, the good ones were published
    assert [(m.reason, m.error_code) for m in h.poison.messages] == [
        (PoisonReason.INVALID_ROW, "InvalidPayload"),
        (PoisonReason.INVALID_ROW, "InvalidOutboxRow"),
    ]
    assert h.poison.messages[0].row == bad_json
    assert "event_type" in h.poison.messages[1].detail
    assert "not json" not in h.poison.messages[0].detail
    assert h.sns.accepted == ids(good1, good2)
    assert [o.status for o in report.outcomes] == [
        Status.PUBLISHED,
        Status.POISONED,
        Status.POISONED,
        Status.PUBLISHED,
    ]


def test_routes_pick_destinations_per_aggregate_and_event_type() -> None:
    # Given Orders' OrderPlaced to both, other Order events to SNS, Customers to EventBridge, nothing else
    router = Router(
        routes=(
            Route((Destination.SNS, Destination.EVENTBRIDGE), "Order", "OrderPlaced"),
            Route((Destination.SNS,), "Order"),
            Route((Destination.EVENTBRIDGE,), "Customer"),
        ),
        default=(),
    )
    placed = event("o", 1)
    shipped = event("o", 2, event_type="OrderShipped")
    customer = event("c", 1, aggregate_type="Customer", event_type="CustomerRenamed")
    other = event("p", 1, aggregate_type="Payment", event_type="PaymentTaken")
    h = harness(router=router)

    # When they are published
    report = h.engine.publish(candidates(placed, shipped, customer, other))

    # Then each went where its route says, and the unrouted one is poison
    assert h.sns.accepted == ids(placed, shipped)
    assert h.eventbridge.accepted == ids(placed, customer)
    assert h.poison.messages[0].reason is PoisonReason.NO_ROUTE
    assert report.outcomes[3].status is Status.POISONED


def test_when_the_poison_queue_is_unavailable_the_record_is_retried_not_dropped() -> None:
    # Given a bad row between good ones, and a poison queue that does not answer
    good1, good2 = event("a", 1), event("b", 1)
    bad = event("c", 1).to_item() | {"payload": {"S": "[]"}}
    rows = [
        Candidate.from_row("1", good1.to_item()),
        Candidate.from_row("2", bad),
        Candidate.from_row("3", good2.to_item()),
    ]
    h = harness(destinations=SNS_ONLY)
    h.poison.unavailable = True

    # When they are published
    report = h.engine.publish(rows)

    # Then the bad row is handed back, nothing after it was sent, and its row is not marked
    assert report.stopped_at == 1
    assert report.outcomes[1].status is Status.FAILED
    assert report.outcomes[1].code == "PoisonQueue:AWS.SimpleQueueService.NonExistentQueue"
    assert h.sns.accepted == ids(good1)
    assert all(isinstance(mark, PublishedMark) for mark in h.marker.marks)


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
