"""What the order gate reads of predecessors, on moto: batched, strongly consistent, and a missing row told
apart from one that expired after publication."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from outbox.errors import OutOfTimeError, ThrottledError
from outbox.model import OutboxEvent, OutboxStatus, RowKey
from outbox.predecessors import DynamoDBPredecessorReader, PredecessorState
from tests.support.aws import Tables
from tests.support.clock import START, FakeClock
from tests.support.events import event


class CountingClient:
    """Wraps the real client and counts its calls by operation."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self.calls: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._real, name)

        def counted(**arguments: Any) -> Any:
            self.calls[name] = self.calls.get(name, 0) + 1
            return method(**arguments)

        return counted


def put(dynamodb: Any, tables: Tables, e: OutboxEvent, **extra: Any) -> RowKey:
    dynamodb.put_item(TableName=tables.outbox, Item=e.to_item() | extra)
    return RowKey(e.aggregate_key, e.seq)


def published(e: OutboxEvent, expires_in: timedelta) -> OutboxEvent:
    return e.with_status(OutboxStatus.PUBLISHED, expires_at=int((START + expires_in).timestamp()))


def test_each_stored_state_is_read_as_the_gate_needs_it(dynamodb: Any, tables: Tables) -> None:
    # Given a published, a pending, a failed and a failed-then-released row
    keys = [
        put(dynamodb, tables, published(event("A", 1), timedelta(days=7))),
        put(dynamodb, tables, event("B", 1)),
        put(dynamodb, tables, event("C", 1).with_status(OutboxStatus.FAILED)),
        put(
            dynamodb,
            tables,
            event("D", 1).with_status(OutboxStatus.FAILED),
            released_at={"S": "2026-11-29T12:00:00.000Z"},
        ),
    ]
    client = CountingClient(dynamodb)

    # When the gate reads them
    states = DynamoDBPredecessorReader(client, tables.outbox, clock=FakeClock()).states(keys)

    # Then one call answered all four
    assert [states[key] for key in keys] == [
        PredecessorState.PUBLISHED,
        PredecessorState.PENDING,
        PredecessorState.FAILED,
        PredecessorState.RELEASED,
    ]
    assert client.calls == {"batch_get_item": 1}


def test_a_missing_row_is_a_gap_while_a_lower_row_still_lives_and_expired_once_none_does(
    dynamodb: Any, tables: Tables
) -> None:
    # Given A#1 published and alive (A#2 never written), B#1 published but past its expiry (B#2 deleted by
    # TTL after it), and nothing at all below C#2
    put(dynamodb, tables, published(event("A", 1), timedelta(days=7)))
    put(dynamodb, tables, published(event("B", 1), -timedelta(hours=1)))
    gap, expired, alone = RowKey("Order#A", 2), RowKey("Order#B", 2), RowKey("Order#C", 2)

    # When the gate reads A#2, B#2 and C#2
    states = DynamoDBPredecessorReader(dynamodb, tables.outbox, clock=FakeClock()).states(
        [gap, expired, alone]
    )

    # Then A#2 is missing (holds A visibly), B#2 and C#2 expired (resolved)
    assert states == {
        gap: PredecessorState.MISSING,
        expired: PredecessorState.EXPIRED,
        alone: PredecessorState.EXPIRED,
    }


def test_a_missing_row_below_a_pending_one_is_a_gap(dynamodb: Any, tables: Tables) -> None:
    # Given A#1 still PENDING (no TTL yet) and A#2 never written
    put(dynamodb, tables, event("A", 1))

    # When the gate reads A#2
    states = DynamoDBPredecessorReader(dynamodb, tables.outbox).states([RowKey("Order#A", 2)])

    # Then it is missing
    assert states == {RowKey("Order#A", 2): PredecessorState.MISSING}


def test_more_than_a_hundred_keys_take_one_call_per_hundred(dynamodb: Any, tables: Tables) -> None:
    # Given 150 published rows
    keys = [put(dynamodb, tables, published(event(f"o-{n}", 1), timedelta(days=1))) for n in range(150)]
    client = CountingClient(dynamodb)

    # When the gate reads them all
    states = DynamoDBPredecessorReader(client, tables.outbox).states(keys)

    # Then two calls did (BatchGetItem takes 100 keys)
    assert set(states.values()) == {PredecessorState.PUBLISHED}
    assert len(states) == 150
    assert client.calls == {"batch_get_item": 2}


class LeavingKeysUnprocessed:
    """Wraps the real client: BatchGetItem answers nothing and hands every key back, as DynamoDB may."""

    def __init__(self, real: Any, rounds: int) -> None:
        self._real = real
        self.rounds = rounds
        self.calls = 0

    def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:  # noqa: N803 - boto3's name
        self.calls += 1
        if self.calls <= self.rounds:
            return {"Responses": {}, "UnprocessedKeys": RequestItems}
        return dict(self._real.batch_get_item(RequestItems=RequestItems))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def test_unprocessed_keys_are_asked_again_and_a_lasting_refusal_is_a_typed_error(
    dynamodb: Any, tables: Tables
) -> None:
    # Given a published row, and DynamoDB handing its key back twice, then three times
    key = put(dynamodb, tables, published(event("A", 1), timedelta(days=1)))

    # When the gate reads it
    twice = LeavingKeysUnprocessed(dynamodb, rounds=2)
    states = DynamoDBPredecessorReader(twice, tables.outbox).states([key])

    # Then two refusals are ridden out; three make the read fail with ThrottledError (the caller stops)
    assert states == {key: PredecessorState.PUBLISHED}
    assert twice.calls == 3
    with pytest.raises(ThrottledError, match="unprocessed"):
        DynamoDBPredecessorReader(LeavingKeysUnprocessed(dynamodb, rounds=3), tables.outbox).states([key])


def test_a_gap_behind_a_recently_skipped_event_is_still_a_gap(dynamodb: Any, tables: Tables) -> None:
    # Given A#1 FAILED and skipped an hour ago (it never expires), and no A#2
    put(
        dynamodb,
        tables,
        event("A", 1).with_status(OutboxStatus.FAILED),
        released_at={"S": "2026-11-29T11:00:00.000Z"},
    )

    # When the gate reads A#2 now, and 8 days later (past the 7-day retention after the skip)
    now = DynamoDBPredecessorReader(dynamodb, tables.outbox, clock=FakeClock()).states([RowKey("Order#A", 2)])
    later = DynamoDBPredecessorReader(
        dynamodb, tables.outbox, clock=FakeClock(START + timedelta(days=8))
    ).states([RowKey("Order#A", 2)])

    # Then A#2 is missing now (had it been published after the skip, it could not have expired yet), and
    # taken as expired later (it could have been published and deleted by its TTL)
    assert now == {RowKey("Order#A", 2): PredecessorState.MISSING}
    assert later == {RowKey("Order#A", 2): PredecessorState.EXPIRED}


def test_a_read_stops_before_a_call_there_is_no_time_for(dynamodb: Any, tables: Tables) -> None:
    # Given a read whose caller has no time left for a call
    client = CountingClient(dynamodb)

    # When the gate reads a predecessor
    # Then it raises OutOfTimeError without calling DynamoDB
    with pytest.raises(OutOfTimeError):
        DynamoDBPredecessorReader(client, tables.outbox).states(
            [RowKey("Order#A", 1)], may_call=lambda: False
        )
    assert client.calls == {}
