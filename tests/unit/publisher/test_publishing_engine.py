"""The publishing engine against in-memory ports: batching, order, routing, poison, and the rows' updates.

Retries, stops, deadlines, failing calls and destinations: test_publishing_engine_failures.py."""

from __future__ import annotations

from outbox.model import RowKey
from outbox_publisher.candidates import Candidate
from outbox_publisher.errors import FailureKind
from outbox_publisher.poison import PoisonReason
from outbox_publisher.ports import EntryResult
from outbox_publisher.report import Status
from outbox_publisher.routing import Destination, PoisonPolicy, Route, Router
from outbox_publisher.row_updates import MarkFailed, Settle
from tests.support.events import event
from tests.unit.publisher.fakes import SNS_ONLY, candidates, harness, ids


def test_distinct_aggregates_share_one_call_per_destination() -> None:
    # Given ten events of ten different orders
    events = [event(f"o-{n}", 1) for n in range(10)]
    h = harness()

    # When they are published
    report = h.engine.publish(candidates(*events))

    # Then one call per destination carried all ten, in order, and every row is settled (deleted)
    assert h.sns.calls == [ids(*events)]
    assert h.eventbridge.calls == [ids(*events)]
    assert [outcome.status for outcome in report.outcomes] == [Status.PUBLISHED] * 10
    assert report.stopped_at is None
    assert report.calls == 2
    assert h.updater.updates == [Settle(RowKey(e.aggregate_key, 1), e.event_id) for e in events]
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

    # Then calls are filled in waves (each aggregate's next event), never two events of one aggregate
    assert h.sns.calls == [ids(a1, b1), ids(a2, b2), ids(a3)]
    assert h.sns.accepted == ids(a1, b1, a2, b2, a3)


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
    failed = [update for update in h.updater.updates if isinstance(update, MarkFailed)]
    assert failed == [
        MarkFailed(RowKey(huge.aggregate_key, 1), failed[0].error, 0, h.clock(), event_id=huge.event_id)
    ]
    assert failed[0].error.startswith("too_large: EntryTooLarge: sns entry is ")
    assert "x" * 20 not in failed[0].error


def test_an_entry_refused_for_good_is_poison_and_holds_its_aggregate_while_the_batch_goes_on() -> None:
    # Given A#1 refused by EventBridge as MalformedDetail, then A#2, and B#1
    a1, a2, b1 = event("A", 1), event("A", 2), event("B", 1)
    h = harness()
    h.eventbridge.fail_entry(a1.event_id, EntryResult.failure("MalformedDetail", FailureKind.PERMANENT))

    # When they are published
    report = h.engine.publish(candidates(a1, a2, b1))

    # Then A#1 is poison (SNS did take it: the poison message says so)
    [poison] = h.poison.messages
    assert poison.reason is PoisonReason.REJECTED
    assert poison.error_code == "eventbridge:MalformedDetail"
    assert poison.delivered_to == (Destination.SNS,)
    assert poison.attempts == 1
    assert poison.event_id == a1.event_id
    # and A#2 is held behind it (never published ahead of it), while B goes on and nothing stops
    assert report.outcomes[1].status is Status.HELD
    assert report.outcomes[1].code == "predecessor_failed"
    assert a2.event_id not in h.sns.accepted + h.eventbridge.accepted
    assert report.outcomes[2].status is Status.PUBLISHED
    assert report.stopped_at is None


def test_a_route_that_continues_past_poison_lets_later_events_go_and_releases_the_row() -> None:
    # Given A's route continues past poison, and A#1 refused for good
    a1, a2 = event("A", 1), event("A", 2)
    router = Router((Route(SNS_ONLY, aggregate_type="Order", on_poison=PoisonPolicy.CONTINUE),), SNS_ONLY)
    h = harness(router=router, destinations=SNS_ONLY)
    h.sns.fail_entry(a1.event_id, EntryResult.failure("InvalidParameter", FailureKind.PERMANENT))

    # When they are published
    report = h.engine.publish(candidates(a1, a2))

    # Then A#1 is poison, marked FAILED and released at once, before A#2 is published after it
    assert [o.status for o in report.outcomes] == [Status.POISONED, Status.PUBLISHED]
    [failed] = [update for update in h.updater.updates if isinstance(update, MarkFailed)]
    assert failed.release_reason == "its route continues past poison"
    assert h.updater.updates[0] == failed
    assert len(h.updater.deadlines) == 2  # the release in its own call, before the run's settles


def test_a_poison_whose_release_was_not_recorded_holds_its_aggregate_for_the_run() -> None:
    # Given A's route continues past poison, A#1 refused for good, and DynamoDB failing A#1's mark
    a1, a2 = event("A", 1), event("A", 2)
    router = Router((Route(SNS_ONLY, aggregate_type="Order", on_poison=PoisonPolicy.CONTINUE),), SNS_ONLY)
    h = harness(router=router, destinations=SNS_ONLY)
    h.sns.fail_entry(a1.event_id, EntryResult.failure("InvalidParameter", FailureKind.PERMANENT))
    h.updater.fail = {RowKey("Order#A", 1)}

    # When they are published
    report = h.engine.publish(candidates(a1, a2))

    # Then A#1 is poison but A#2 waits: had it gone, A#1's row, still PENDING, would be published after it
    assert [o.status for o in report.outcomes] == [Status.POISONED, Status.HELD]
    assert a2.event_id not in h.sns.accepted
    # and the run's end tries the mark once more (it may release A#1 for a later run)
    assert [type(update).__name__ for update in h.updater.updates] == ["MarkFailed", "MarkFailed"]


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


def test_when_the_poison_queue_is_unavailable_the_event_stays_pending_not_dropped() -> None:
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

    # Then the bad row is left PENDING for later (not marked FAILED, not dropped), and the others went out
    assert report.outcomes[1].status is Status.UNDELIVERED
    assert report.outcomes[1].code == "PoisonQueue:AWS.SimpleQueueService.NonExistentQueue"
    assert report.stopped_at is None
    assert h.sns.accepted == ids(good1, good2)
    assert all(isinstance(update, Settle) for update in h.updater.updates)
    assert RowKey(bad["aggregate_key"]["S"], 1) not in [update.key for update in h.updater.updates]
