"""The benchmark's call-counting figures at a tiny size: the harness counts what the code does, and cannot
silently count nothing. These are counts, never timings (the benchmark asserts no timing anywhere).

The expected numbers are what today's publisher and write path do; a change that improves a figure changes
its expectation here, on purpose."""

from __future__ import annotations

from collections import Counter

import pytest

from bench import publish_figures, write_path_figures
from bench.publish_figures import deliver, gate_run, publish_calls_per_destination
from bench.scenarios import hot_aggregate, round_robin, skewed_interleave
from orders.model import Command

RECORDS = 20
AGGREGATES = 10


@pytest.fixture(scope="module")
def round_robin_ours() -> publish_figures.Delivery:
    return deliver(round_robin(RECORDS, AGGREGATES, prefix="t-ours"), naive=False, redeliver=True)


@pytest.fixture(scope="module")
def round_robin_naive() -> publish_figures.Delivery:
    return deliver(round_robin(RECORDS, AGGREGATES, prefix="t-naive"), naive=True, redeliver=True)


def test_round_robin_costs_us_one_call_per_ten_events_and_the_naive_publisher_one_per_event(
    round_robin_ours: publish_figures.Delivery, round_robin_naive: publish_figures.Delivery
) -> None:
    # Given 20 records round-robin over 10 aggregates, delivered as one batch to each publisher
    ours, naive = round_robin_ours.first, round_robin_naive.first

    # Then ours batches 10 distinct aggregates per call on each destination; the naive one calls per record
    assert publish_calls_per_destination(ours, RECORDS) == pytest.approx(0.10)
    assert publish_calls_per_destination(naive, RECORDS) == pytest.approx(1.0)
    assert ours.calls[("sns", "PublishBatch")] == 2
    assert ours.calls[("events", "PutEvents")] == 2
    assert naive.calls[("sns", "Publish")] == RECORDS
    assert naive.calls[("events", "PutEvents")] == RECORDS
    # And SNS bills each batch of small messages as one request; EventBridge bills every event
    assert ours.billed == {"sns_requests": 2, "eventbridge_events": RECORDS}
    assert naive.billed == {"sns_requests": RECORDS, "eventbridge_events": RECORDS}


def test_a_hot_aggregate_costs_us_one_call_per_event() -> None:
    # Given every record of one aggregate (no call may carry two events of one aggregate)
    ours = deliver(hot_aggregate(5, prefix="t-hot"), naive=False).first

    # Then each event is a call of its own on each destination
    assert publish_calls_per_destination(ours, 5) == pytest.approx(1.0)


def test_a_skewed_batch_costs_as_many_calls_as_its_busiest_aggregate_has_events() -> None:
    # Given 33 records over 10 aggregates, one of them holding 6, the others 3 each, shuffled
    events = skewed_interleave(33, AGGREGATES, busiest=6, prefix="t-skew")
    per_aggregate = Counter(event.aggregate_id for event in events)
    assert len(per_aggregate) == AGGREGATES
    assert sorted(per_aggregate.values()) == [3] * 9 + [6]
    ours = deliver(events, naive=False).first

    # Then each destination takes 6 calls: one per event of the busiest aggregate, the others riding along
    assert ours.calls[("sns", "PublishBatch")] == 6
    assert ours.calls[("events", "PutEvents")] == 6
    # And every event went out on each destination (the calls are not merely capped at 6)
    assert ours.billed == {"sns_requests": 6, "eventbridge_events": 33}


def test_marking_is_one_partiql_batch_per_25_rows_on_first_delivery_and_on_redelivery(
    round_robin_ours: publish_figures.Delivery, round_robin_naive: publish_figures.Delivery
) -> None:
    ours_first, ours_again = round_robin_ours.first, round_robin_ours.again
    naive_first = round_robin_naive.first
    assert ours_again is not None
    calls = -(-RECORDS // 25)

    # Then the first delivery marks the rows with BatchExecuteStatement, 25 a call: 1 WCU per row, and 1 more
    # for the pending index entry it removes
    assert ours_first.count("dynamodb", publish_figures.MARKING_CALLS) == calls
    assert ours_first.calls[("dynamodb", "BatchExecuteStatement")] == calls
    marked = ours_first.capacity(operations=publish_figures.MARKING_CALLS)
    assert marked.table_wcu == RECORDS
    assert marked.index_wcu == RECORDS
    # And a redelivery (rows already PUBLISHED) makes the same calls, each statement failing alone: charged,
    # nothing written, no row tried alone
    assert ours_again.count("dynamodb", publish_figures.MARKING_CALLS) == calls
    assert ours_again.calls.get(("dynamodb", "UpdateItem"), 0) == 0
    again = ours_again.capacity(operations=publish_figures.MARKING_CALLS)
    assert (again.table_wcu, again.index_wcu, again.cancelled_transaction_wcu) == (RECORDS, 0, 0)
    # And the naive publisher marks each row with one unconditional UpdateItem of 1 WCU
    assert naive_first.calls[("dynamodb", "UpdateItem")] == RECORDS
    assert naive_first.capacity(operations=publish_figures.MARKING_CALLS).table_wcu == RECORDS


def test_the_order_gate_reads_each_aggregates_first_predecessor_once_in_one_batch_get() -> None:
    # Given a round-robin batch whose predecessors an earlier batch published
    per_aggregate = RECORDS // AGGREGATES
    earlier = round_robin(RECORDS, AGGREGATES, prefix="t-gate")
    later = round_robin(RECORDS, AGGREGATES, prefix="t-gate", first_seq=per_aggregate + 1)

    # When our publisher takes the later batch
    snapshot = gate_run(earlier, later, naive=False).first

    # Then it reads the 10 predecessors outside the batch in one strongly consistent BatchGetItem
    assert snapshot.count("dynamodb", publish_figures.GATE_READS) == 1
    assert snapshot.capacity(operations=publish_figures.GATE_READS).rcu == AGGREGATES


@pytest.mark.parametrize(
    ("command", "keyed", "if_match", "calls", "wcu"),
    [
        # order Put + outbox row Put in one transaction (2 WCU each), + the row's pending-index entry (1)
        (Command.PLACE, False, False, {"dynamodb.TransactWriteItems": 1}, 5.0),
        # + the idempotency record's Put in the same transaction (2 WCU), read only on a replay
        (Command.PLACE, True, False, {"dynamodb.TransactWriteItems": 1}, 7.0),
        # + the order's GetItem before the transaction
        (Command.CONFIRM, False, False, {"dynamodb.GetItem": 1, "dynamodb.TransactWriteItems": 1}, 5.0),
        (Command.CANCEL, True, False, {"dynamodb.GetItem": 1, "dynamodb.TransactWriteItems": 1}, 7.0),
        # with the version it saw (If-Match): one Update of the order in the transaction, no read
        (Command.CONFIRM, False, True, {"dynamodb.TransactWriteItems": 1}, 5.0),
        (Command.CANCEL, True, True, {"dynamodb.TransactWriteItems": 1}, 7.0),
    ],
)
def test_each_order_command_makes_the_calls_the_repository_makes(
    command: Command, keyed: bool, if_match: bool, calls: dict[str, int], wcu: float
) -> None:
    # When one command of each kind runs through the sample's service and repository
    run = write_path_figures.command_run(command, keyed=keyed, commands=1, if_match=if_match)

    # Then the harness counts exactly its DynamoDB calls and their write units
    assert run.written.calls_detail() == calls
    assert run.written.capacity().wcu == wcu
    # And the row it wrote fits in 1 KB as written and as published
    assert 0 < run.pending_bytes < run.published_bytes <= 1024
