"""The publishing engine when calls fail: retries with backoff, destinations failing on their own, what is
left for later, where it stops, what it reports, deadlines."""

from __future__ import annotations

from collections.abc import Sequence

from outbox.errors import ThrottledError
from outbox.model import RowKey
from outbox_publisher.adapters import publishing_client
from outbox_publisher.candidates import Candidate
from outbox_publisher.errors import DestinationCallError, FailureKind
from outbox_publisher.messages import Message
from outbox_publisher.ports import EntryResult
from outbox_publisher.report import Status
from outbox_publisher.retry import PUBLISH_CONNECT_TIMEOUT_S, PUBLISH_READ_TIMEOUT_S, RetryPolicy
from outbox_publisher.routing import Destination
from outbox_publisher.row_updates import Settle
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


def test_backoff_grows_exponentially_up_to_the_cap_then_leaves_the_event_pending() -> None:
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
    # and it is left PENDING for the sweeper (undelivered), its row untouched: nothing is handed back
    assert report.stopped_at is None
    assert report.retry == []
    assert report.outcomes[0].status is Status.UNDELIVERED
    assert report.outcomes[0].code == "sns:ThrottlingException"
    assert report.outcomes[0].attempts == 6
    assert h.updater.updates == []


def test_an_undelivered_event_holds_its_aggregates_later_events_in_the_run() -> None:
    # Given ten events of one order (one call each), the third always failing
    events = [event("hot", seq) for seq in range(1, 11)]
    h = harness(destinations=SNS_ONLY)
    h.sns.fail_entry(events[2].event_id, transient("InternalError"), times=1000)

    # When they are published
    report = h.engine.publish(candidates(*events))

    # Then 1..2 are published, 3 is left PENDING, 4..10 are held behind it and never sent
    assert h.sns.accepted == ids(*events[:2])
    assert [o.status for o in report.outcomes] == [Status.PUBLISHED] * 2 + [Status.UNDELIVERED] + [
        Status.HELD
    ] * 7
    assert {o.code for o in report.outcomes[3:]} == {"predecessor_held"}
    # and nothing is handed back: the sweeper takes 3..10 from the table, in order
    assert report.retry == []
    assert [update.key.seq for update in h.updater.updates] == [1, 2]


def test_an_entry_failing_inside_a_call_does_not_hold_back_the_others() -> None:
    # Given ten events of ten orders (one call), the third always throttled, then an 11th event
    events = [event(f"o-{n}", 1) for n in range(11)]
    h = harness(destinations=SNS_ONLY)
    h.sns.fail_entry(events[2].event_id, transient(), times=1000)

    # When they are published
    report = h.engine.publish(candidates(*events))

    # Then the third is left PENDING and every other one is out, the 11th included, and settled
    assert report.stopped_at is None
    assert report.outcomes[2].status is Status.UNDELIVERED
    assert [o.status for o in report.outcomes[:2] + report.outcomes[3:]] == [Status.PUBLISHED] * 10
    assert sorted(update.key.aggregate_key for update in h.updater.updates) == sorted(
        e.aggregate_key for e in events[:2] + events[3:]
    )
    assert report.retry == []


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


def test_a_destination_failing_whole_calls_is_not_called_again_in_the_run() -> None:
    # Given eleven orders: the first call (ten of them) always fails as a whole, the eleventh needs a second
    events = [event(f"o-{n}", 1) for n in range(11)]
    h = harness(destinations=SNS_ONLY)
    h.sns.fail_call(
        DestinationCallError("x", code="InternalError", kind=FailureKind.TRANSIENT),
        times=1000,
        when=lambda messages: messages[0].event.event_id == events[0].event_id,
    )

    # When they are published
    report = h.engine.publish(candidates(*events))

    # Then the failing call was retried (5 attempts), and then SNS was not called for the eleventh: it got
    # the same failure without a call, and all eleven are left PENDING, nothing handed back
    assert h.sns.calls == [ids(*events[:10])] * 5
    assert [o.status for o in report.outcomes] == [Status.UNDELIVERED] * 11
    assert {o.code for o in report.outcomes} == {"sns:InternalError"}
    assert report.retry == []


def test_one_destination_down_never_holds_back_nor_repeats_the_other() -> None:
    # Given EventBridge failing every call, and three orders
    events = [event(f"o-{n}", 1) for n in range(3)]
    h = harness()
    h.eventbridge.fail_call(
        DestinationCallError("x", code="InternalException", kind=FailureKind.TRANSIENT), times=1000
    )

    # When they are published
    report = h.engine.publish(candidates(*events))

    # Then SNS took each event once, and each is left PENDING, saying SNS took it
    assert h.sns.calls == [ids(*events)]
    assert [o.status for o in report.outcomes] == [Status.UNDELIVERED] * 3
    assert [o.delivered_to for o in report.outcomes] == [(Destination.SNS,)] * 3
    assert [o.delivered_so_far for o in report.outcomes] == [frozenset({"sns"})] * 3
    assert h.updater.updates == []


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


def test_a_blocked_destination_is_not_retried_and_leaves_the_events_pending() -> None:
    # Given EventBridge refusing the source (a permissions problem, not the event's fault)
    events = [event("a", 1), event("a", 2)]
    h = harness(destinations=(Destination.EVENTBRIDGE,))
    h.eventbridge.fail_entry(
        events[0].event_id, EntryResult.failure("NotAuthorizedForSourceException", FailureKind.BLOCKED)
    )

    # When they are published
    report = h.engine.publish(candidates(*events))

    # Then nothing is retried or poisoned; a#1 is left PENDING and a#2 held behind it; nothing handed back
    assert h.sleep.delays == []
    assert h.poison.messages == []
    assert [o.status for o in report.outcomes] == [Status.UNDELIVERED, Status.HELD]
    assert report.outcomes[0].code == "eventbridge:NotAuthorizedForSourceException"
    assert report.retry == []


def test_an_event_already_taken_by_every_destination_is_settled_without_a_call() -> None:
    # Given a row whose `delivered_to` says both destinations took it (its settle failed after)
    only = event("a", 1)
    row = only.to_item() | {"delivered_to": {"SS": ["eventbridge", "sns"]}}
    h = harness()

    # When it is published
    report = h.engine.publish([Candidate.from_row("1", row)])

    # Then nothing is sent, and its row is settled
    assert h.sns.calls == h.eventbridge.calls == []
    assert report.outcomes[0].status is Status.PUBLISHED
    assert h.updater.updates == [Settle(RowKey(only.aggregate_key, 1), only.event_id)]


def test_an_event_goes_only_to_the_destinations_its_row_says_have_not_taken_it() -> None:
    # Given a row SNS took already, and EventBridge did not
    only = event("a", 1)
    row = only.to_item() | {"delivered_to": {"SS": ["sns"]}}
    h = harness()

    # When it is published
    report = h.engine.publish([Candidate.from_row("1", row)])

    # Then it goes to EventBridge only, and is out
    assert h.sns.calls == []
    assert h.eventbridge.calls == [ids(only)]
    assert report.outcomes[0].status is Status.PUBLISHED


def test_a_failure_to_update_rows_does_not_fail_published_events() -> None:
    # Given an updater that raises
    events = [event("a", 1), event("b", 1)]
    h = harness(destinations=SNS_ONLY)
    h.updater.error = ThrottledError("throttled")

    # When they are published
    report = h.engine.publish(candidates(*events))

    # Then the events count as published and the rows as not settled (the sweeper reconciles them)
    assert report.stopped_at is None
    assert report.count(Status.PUBLISHED) == 2
    assert set(report.rows.failed.values()) == {"ThrottledError"}
    assert len(report.rows.failed) == 2
    # and nothing unsettled is remembered as settled
    assert RowKey(events[0].aggregate_key, 1) not in h.engine.memory


def test_retries_never_run_into_the_safety_margin() -> None:
    # Given 3.2 s left with a 3 s margin, and an entry throttled twice
    only = event("a", 1)
    h = harness(destinations=SNS_ONLY, retry=RetryPolicy(base_delay_ms=400, safety_margin_ms=3000))
    h.sns.fail_entry(only.event_id, transient(), times=2)

    # When it is published with that deadline
    report = h.engine.publish(candidates(only), FakeDeadline(remaining=3_200))

    # Then it does not sleep 200 ms into the margin: the event is left PENDING for later
    assert h.sleep.delays == []
    assert report.outcomes[0].status is Status.UNDELIVERED


def test_no_call_starts_inside_the_safety_margin() -> None:
    # Given less time left than the margin
    h = harness(destinations=SNS_ONLY)

    # When events are published
    report = h.engine.publish(candidates(event("a", 1), event("b", 1)), FakeDeadline(remaining=2_000))

    # Then nothing is sent and all is handed back, and no row is touched
    assert h.sns.calls == []
    assert report.stopped_at == 0
    assert [o.status for o in report.outcomes] == [Status.NOT_ATTEMPTED] * 2
    assert report.outcomes[0].code == "DeadlineExceeded"
    assert h.updater.updates == []


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

    # Then EventBridge is never called; both are left PENDING saying SNS took them (not handed back: SNS
    # would get them again), and no row is settled
    assert h.sns.calls == [ids(a, b)]
    assert h.eventbridge.calls == []
    assert [o.status for o in report.outcomes] == [Status.UNDELIVERED] * 2
    assert report.outcomes[0].code == "eventbridge:DeadlineExceeded"
    assert [o.delivered_to for o in report.outcomes] == [(Destination.SNS,)] * 2
    assert h.updater.updates == []


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
    assert [o.status for o in report.outcomes] == [Status.UNDELIVERED] * 2
    assert report.outcomes[0].code == "sns:IncompleteResponse"


def test_one_entry_failing_alone_in_its_call_does_not_take_its_destination_down() -> None:
    # Given SNS carrying one entry per call (its batch limit), and x#1's entry always throttled
    events = [event(f"x-{n}", 1) for n in range(3)]
    h = harness(destinations=SNS_ONLY)
    h.sns.max_batch_bytes = h.sns.size_of(Message.of(events[0])) + 10
    h.sns.fail_entry(events[0].event_id, transient(), times=1000)

    # When they are published
    report = h.engine.publish(candidates(*events))

    # Then x#1 is left PENDING after its retries, and SNS still takes the two others: one bad entry is no
    # outage
    assert [o.status for o in report.outcomes] == [Status.UNDELIVERED, Status.PUBLISHED, Status.PUBLISHED]
    assert h.sns.accepted == ids(*events[1:])


def test_events_not_sent_to_a_destination_that_is_down_are_not_tried_so_never_given_up() -> None:
    # Given eleven events on their last chance (the sweeper's cutoff), and SNS failing every call as a whole
    events = [event(f"o-{n}", 1) for n in range(11)]
    h = harness(destinations=SNS_ONLY)
    h.sns.fail_call(DestinationCallError("x", code="InternalError", kind=FailureKind.TRANSIENT), times=1000)

    # When they are published
    report = h.engine.publish([c.but(last_chance=True) for c in candidates(*events)])

    # Then the ten SNS was called for gave up (poison), and the eleventh, never sent, is left PENDING, untried
    assert [o.status for o in report.outcomes] == [Status.POISONED] * 10 + [Status.UNDELIVERED]
    assert (report.outcomes[10].tried, report.outcomes[10].attempts) == (False, 0)
    assert report.stopped_at is None
