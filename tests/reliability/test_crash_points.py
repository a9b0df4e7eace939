"""The crash-point matrix: the system stopped at each point, restarted (a fresh function instance: its
clients and wiring, the handler module's state, thrown away, as a new Lambda container), drained, checked.

The crash is a `Crash` (a BaseException, which no `except Exception` of the product catches) raised by a
botocore hook on the function's real client (tests.reliability.wire): no product code is changed."""

from __future__ import annotations

from collections import Counter
from typing import Any

from orders.model import Command
from tests.reliability.invariants import CAUSE_CRASH
from tests.reliability.scenarios import drain_and_check, place_orders, statuses
from tests.reliability.system import API, PUBLISHER, SUMMARY, SWEEPER, System, running_system
from tests.reliability.wire import EVENTBRIDGE, SNS, CallFault, CrashPoint
from tests.support.aws import scan_all


def test_crash_before_the_business_write_commits_nothing_and_the_retry_commits_once() -> None:
    with running_system(seed=10) as system:
        (order_id,) = place_orders(system, 1, transitions=False)
        # Given the API's instance dies before its first DynamoDB call of a confirm (reading the order)
        point = CrashPoint(API, "dynamodb", "GetItem", "before")
        system.wire.crash_points.append(point)
        before = statuses(system)
        outcome = system.transition(Command.CONFIRM, order_id, key="confirm-1")
        # Then nothing was written, and the client's retry (same key) on a fresh instance confirms it once
        assert point.fired
        assert not outcome.ok
        assert str(outcome.error).startswith("crash")
        assert statuses(system) == before
        assert system.restarts[API] == 1
        assert system.transition(Command.CONFIRM, order_id, key="confirm-1").ok
        drain_and_check(system)
        assert statuses(system) == {"OUT": 2}


def test_crash_inside_the_transaction_commits_nothing() -> None:
    with running_system(seed=11) as system:
        (order_id,) = place_orders(system, 1, transitions=False)
        orders_before = system.orders()
        # Given the API dies with its TransactWriteItems built (order, idempotency record, outbox row)
        point = CrashPoint(API, "dynamodb", "TransactWriteItems", "before")
        system.wire.crash_points.append(point)
        assert not system.transition(Command.CANCEL, order_id, key="cancel-1").ok
        assert point.fired
        assert system.restarts[API] == 1
        # And a transaction whose last action fails: another writer took the order's next outbox slot
        system.admin["dynamodb"].put_item(
            TableName=system.resources.tables.outbox,
            Item={
                "aggregate_key": {"S": f"Order#{order_id}"},
                "seq": {"N": "2"},
                "event_id": {"S": "squatter"},
            },
        )
        failed = system.transition(Command.CANCEL, order_id, key="cancel-2")
        # Then neither committed anything: the order, its idempotency records and its events are as before
        assert not failed.ok
        assert system.orders() == orders_before
        keys = [item["pk"]["S"] for item in _all_orders_items(system)]
        assert not [key for key in keys if key.startswith("IDEMPOTENCY#cancel")]
        rows = {(r["aggregate_key"]["S"], r["seq"]["N"]): r["event_id"]["S"] for r in system.outbox_rows()}
        assert rows[(f"Order#{order_id}", "2")] == "squatter"
        # And once the squatter is gone, the client's retry of the crashed cancel commits it once; drained,
        # every promise holds
        system.admin["dynamodb"].delete_item(
            TableName=system.resources.tables.outbox,
            Key={"aggregate_key": {"S": f"Order#{order_id}"}, "seq": {"N": "2"}},
        )
        assert system.transition(Command.CANCEL, order_id, key="cancel-1").ok
        drain_and_check(system)
        assert statuses(system) == {"OUT": 2}
        assert [o["status"]["S"] for o in system.orders()] == ["CANCELLED"]


def _all_orders_items(system: System) -> list[dict[str, Any]]:
    return scan_all(system.admin["dynamodb"], system.resources.tables.orders)


def test_crash_right_after_commit_is_retried_by_the_client_without_a_second_event() -> None:
    with running_system(seed=12) as system:
        # Given the API dies right after its TransactWriteItems returned (committed, no answer to the client)
        point = CrashPoint(API, "dynamodb", "TransactWriteItems", "after")
        system.wire.crash_points.append(point)
        outcome = system.place("customer-1", key="place-1")
        assert point.fired
        assert not outcome.ok
        assert statuses(system) == {"PENDING": 1}
        # When the client retries with the same idempotency key
        retried = system.place("customer-1", key="place-1")
        # Then it gets the committed order; there is one order and one event, published once drained
        assert retried.ok
        assert len(system.orders()) == 1
        drain_and_check(system)
        assert statuses(system) == {"OUT": 1}


def test_crash_after_a_publish_call_returned_before_the_next() -> None:
    with running_system(seed=13) as system:
        # Given the publisher dies right after its first PublishBatch returned (10 entries out, more to go)
        point = CrashPoint(PUBLISHER, SNS, "PublishBatch", "after")
        system.wire.crash_points.append(point)
        place_orders(system, 15, transitions=False)
        system.run_for(3)
        assert point.fired
        assert system.restarts[PUBLISHER] == 1
        # Then a fresh instance publishes the rest; what went out twice is counted as the crash's
        drain_and_check(system)
        assert statuses(system) == {"OUT": 15}
        duplicates = system.verdict().duplicates
        assert set(duplicates) <= {CAUSE_CRASH}
        assert duplicates[CAUSE_CRASH] > 0


def test_crash_after_all_publishing_before_settling() -> None:
    with running_system(seed=14) as system:
        # Given the publisher dies at its first settle (DeleteItem), everything published
        at_crash: list[tuple[dict[str, int], int]] = []
        point = CrashPoint(PUBLISHER, "dynamodb", "DeleteItem", "before")
        point.on_fire = lambda: at_crash.append(
            (statuses(system), len({p.event_id for p in system.wire.published}))
        )
        system.wire.crash_points.append(point)
        place_orders(system, 8, transitions=False)
        system.run_for(2)
        assert point.fired
        assert system.restarts[PUBLISHER] == 1
        assert at_crash == [({"PENDING": 8}, 8)]
        # Then every event is published again (the mapping retries the batch) and settled; duplicates counted
        drain_and_check(system)
        assert statuses(system) == {"OUT": 8}
        assert system.verdict().duplicates[CAUSE_CRASH] >= 8


def test_crash_in_the_middle_of_settling_some_rows_deleted() -> None:
    with running_system(seed=15) as system:
        # Given 30 rows in one batch, settled one DeleteItem each, the publisher dying after the 25th
        at_crash: list[dict[str, int]] = []
        point = CrashPoint(PUBLISHER, "dynamodb", "DeleteItem", "after", nth=25)
        point.on_fire = lambda: at_crash.append(statuses(system))
        system.wire.crash_points.append(point)
        place_orders(system, 30, transitions=False)
        system.run_for(5)
        # Then 25 rows had left the table and 5 were still PENDING when it died
        assert point.fired
        assert system.restarts[PUBLISHER] == 1
        assert at_crash == [{"OUT": 25, "PENDING": 5}]
        # And, drained, every event is out; what went out twice is the crash's
        drain_and_check(system)
        assert statuses(system) == {"OUT": 30}
        assert set(system.verdict().duplicates) == {CAUSE_CRASH}


def test_crash_in_the_sweeper_after_its_claim_before_its_publish() -> None:
    with running_system(seed=16) as system:
        # Given rows the publisher left PENDING (SNS refusing every call; EventBridge took them, recorded on
        # each row)
        refusing = CallFault("sns_authorization", SNS, frozenset({"PublishBatch"}), "AuthorizationError", 403)
        system.wire.call_faults.append(refusing)
        place_orders(system, 3, transitions=False)
        system.run_for(5)
        assert [row["delivered_to"]["SS"] for row in system.outbox_rows()] == [[EVENTBRIDGE]] * 3
        system.wire.call_faults.remove(refusing)
        # And the sweeper dying after its claims, before its PublishBatch
        point = CrashPoint(SWEEPER, SNS, "PublishBatch", "before")
        system.wire.crash_points.append(point)
        system.run_until(lambda: system.restarts[SWEEPER] == 1, deadline=system.clock.seconds() + 180)
        assert point.fired
        assert system.restarts[SWEEPER] == 1
        claimed = [row for row in system.outbox_rows() if "lease_owner" in row]
        assert claimed
        assert all(row["status"]["S"] == "PENDING" for row in claimed)
        # Then a later sweep (its lease expired) publishes them to SNS only: EventBridge got each one once
        drain_and_check(system)
        assert statuses(system) == {"OUT": 3}
        sent = Counter((p.function, p.destination) for p in system.wire.published)
        assert sent == {(SWEEPER, SNS): 3, (PUBLISHER, EVENTBRIDGE): 3}


def test_crash_in_a_consumer_between_its_effect_and_its_acknowledgement() -> None:
    with running_system(seed=17) as system:
        # Given the order-summary consumer dying right after its transaction (effect + inbox) committed
        point = CrashPoint(SUMMARY, "dynamodb", "TransactWriteItems", "after")
        system.wire.crash_points.append(point)
        place_orders(system, 2)
        system.run_for(3)
        assert point.fired
        assert system.restarts[SUMMARY] == 1
        # Then the message comes back after its visibility timeout, is a duplicate, and the effect stays once
        drain_and_check(system)
        assert system.queues[SUMMARY].redeliveries >= 1
        effects = system.history().effects[SUMMARY]
        assert effects
        assert set(effects.values()) == {1}
