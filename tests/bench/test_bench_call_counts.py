"""The benchmark's call-counting figures at a tiny size: the harness counts what the code does, and cannot
silently count nothing. These are counts, never timings (the benchmark asserts no timing anywhere).

The expected numbers are what today's publisher and write path do; a change that improves a figure changes
its expectation here, on purpose."""

from __future__ import annotations

from collections import Counter

import pytest

from bench import publish_figures, write_path_figures
from bench.publish_figures import after_earlier, deliver, publish_calls_per_destination
from bench.scenarios import hot_aggregate, one_each, round_robin, skewed_interleave
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


def test_each_row_is_settled_by_one_conditional_delete_and_nothing_else_is_written(
    round_robin_ours: publish_figures.Delivery, round_robin_naive: publish_figures.Delivery
) -> None:
    ours, naive = round_robin_ours.first, round_robin_naive.first

    # Then the first delivery settles every row with one DeleteItem of 1 WCU (the row is under 1 KB) ...
    assert ours.count("dynamodb", publish_figures.SETTLE_CALLS) == RECORDS
    settled = ours.capacity(operations=publish_figures.SETTLE_CALLS)
    assert (settled.table_wcu, settled.index_wcu) == (RECORDS, 0)
    # ... and writes nothing else: no index entry, no mark
    assert ours.count("dynamodb", publish_figures.ROW_WRITES) == RECORDS
    assert publish_figures.ours_capacity(ours, RECORDS)["other_write_wcu"] == 0
    # And the naive publisher marks each row with one unconditional UpdateItem of 1 WCU
    assert naive.calls[("dynamodb", "UpdateItem")] == RECORDS
    assert naive.capacity(operations=publish_figures.NAIVE_MARK_CALLS).table_wcu == RECORDS


def test_a_batch_redelivered_costs_nothing_to_the_container_that_settled_it_and_a_settle_per_row_elsewhere(
    round_robin_ours: publish_figures.Delivery,
) -> None:
    again, elsewhere = round_robin_ours.again, round_robin_ours.elsewhere
    assert again is not None
    assert elsewhere is not None

    # Then the container that settled the rows skips their records: no call at all
    assert again.calls == {}
    # And another container publishes them again and deletes rows that are gone: each delete fails its
    # condition, and is still charged 1 WCU
    assert publish_calls_per_destination(elsewhere, RECORDS) == pytest.approx(0.10)
    assert elsewhere.count("dynamodb", publish_figures.SETTLE_CALLS) == RECORDS
    assert elsewhere.capacity(operations=publish_figures.SETTLE_CALLS).table_wcu == RECORDS


@pytest.mark.parametrize(("warm", "reads"), [(False, 1), (True, 0)])
def test_the_order_gate_reads_the_predecessors_outside_the_batch_unless_the_container_settled_them(
    warm: bool, reads: int
) -> None:
    # Given a round-robin batch whose predecessors an earlier batch settled
    per_aggregate = RECORDS // AGGREGATES
    earlier = round_robin(RECORDS, AGGREGATES, prefix="t-gate")
    later = round_robin(RECORDS, AGGREGATES, prefix="t-gate", first_seq=per_aggregate + 1)

    # When the container that settled them (warm) or another one (cold) takes the later batch
    snapshot = after_earlier(earlier, later, naive=False, warm=warm).first

    # Then a cold container reads the 10 predecessors (absent: out) in one strongly consistent BatchGetItem,
    # 1 RCU each; a warm one knows them out from its memory
    assert snapshot.count("dynamodb", publish_figures.GATE_READS) == reads
    assert snapshot.capacity(operations=publish_figures.GATE_READS).rcu == reads * AGGREGATES


def test_an_order_like_batch_read_cold_costs_one_read_unit_per_event() -> None:
    # Given one event of each of 20 aggregates, each following one an earlier batch settled
    earlier, later = one_each(20, 1, "t-ol"), one_each(20, 2, "t-ol")

    # When a container that remembers nothing takes it
    ours = after_earlier(earlier, later, naive=False).first

    # Then it reads every predecessor in one call, and settles every row
    assert ours.calls[("dynamodb", "BatchGetItem")] == 1
    assert publish_figures.ours_capacity(ours, 20) == {
        "settle_wcu": 1.0,
        "other_write_wcu": 0.0,
        "other_write_calls": 0.0,
        "gate_rru": 1.0,
    }


@pytest.mark.parametrize(
    ("command", "keyed", "if_match", "calls", "wcu"),
    [
        # order Put + outbox row Put in one transaction (2 WCU each): no index entry any more
        (Command.PLACE, False, False, {"dynamodb.TransactWriteItems": 1}, 4.0),
        # + the idempotency record's Put in the same transaction (2 WCU), read only on a replay
        (Command.PLACE, True, False, {"dynamodb.TransactWriteItems": 1}, 6.0),
        # + the order's GetItem before the transaction
        (Command.CONFIRM, False, False, {"dynamodb.GetItem": 1, "dynamodb.TransactWriteItems": 1}, 4.0),
        (Command.CANCEL, True, False, {"dynamodb.GetItem": 1, "dynamodb.TransactWriteItems": 1}, 6.0),
        # with the version it saw (If-Match): one Update of the order in the transaction, no read
        (Command.CONFIRM, False, True, {"dynamodb.TransactWriteItems": 1}, 4.0),
        (Command.CANCEL, True, True, {"dynamodb.TransactWriteItems": 1}, 6.0),
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
    # And the row it wrote fits in 1 KB, and was settled by one DeleteItem
    assert 0 < run.row_bytes <= 1024
    assert run.settled.count("dynamodb", publish_figures.ROW_WRITES) == 1
    assert run.settled.calls[("dynamodb", "DeleteItem")] == 1


@pytest.mark.parametrize("keyed", [False, True])
def test_an_events_lifecycle_is_its_commands_writes_plus_one_settle(keyed: bool) -> None:
    # When a place runs and our publisher takes its row
    run = write_path_figures.command_run(Command.PLACE, keyed=keyed, commands=1)

    # Then the outbox row's life is its transactional Put (2) and its settle (1), whatever the key
    row = write_path_figures.outbox_row_figure(run)
    assert (row.detail["row_in_transaction_wcu"], row.detail["settle_wcu"]) == (2.0, 1.0)
    assert row.ours == 3.0
    # And the event's lifecycle adds the order (2) and, with a key, its record (2): 5 or 7
    lifecycle = write_path_figures.lifecycle_figure(run)
    assert lifecycle.ours == run.written.capacity().wcu + 1.0
    assert lifecycle.detail["other_publisher_write_wcu"] == 0
