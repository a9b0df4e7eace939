"""What the order gate reads of predecessors, on moto: batched, strongly consistent, and only a PENDING or
FAILED row holding its successor (a row not in the table is out)."""

from __future__ import annotations

from typing import Any

import pytest

from outbox.errors import OutOfTimeError, ThrottledError
from outbox.model import OutboxEvent, OutboxStatus, RowKey
from outbox_publisher.predecessors import DynamoDBPredecessorReader, PredecessorState
from tests.support.aws import Tables
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


def test_each_stored_state_is_read_as_the_gate_needs_it(dynamodb: Any, tables: Tables) -> None:
    # Given a pending row, a failed one, a failed one its route continues past, one an earlier release kept
    # PUBLISHED, one whose status this library does not know, and a key with no row (its event is out)
    keys = [
        put(dynamodb, tables, event("A", 1)),
        put(dynamodb, tables, event("B", 1).with_status(OutboxStatus.FAILED)),
        put(
            dynamodb,
            tables,
            event("C", 1).with_status(OutboxStatus.FAILED),
            released_at={"S": "2026-11-29T12:00:00.000Z"},
        ),
        put(dynamodb, tables, event("D", 1).with_status(OutboxStatus.PUBLISHED)),
        put(dynamodb, tables, event("E", 1), status={"S": "ARCHIVED"}),
        RowKey("Order#F", 1),
    ]
    client = CountingClient(dynamodb)

    # When the gate reads them
    states = DynamoDBPredecessorReader(client, tables.outbox).states(keys)

    # Then one call answered all six: only a PENDING or a FAILED (or unknown) row holds its successor
    assert [states[key] for key in keys] == [
        PredecessorState.PENDING,
        PredecessorState.FAILED,
        PredecessorState.OUT,
        PredecessorState.OUT,
        PredecessorState.FAILED,
        PredecessorState.OUT,
    ]
    assert client.calls == {"batch_get_item": 1}


def test_more_than_a_hundred_keys_take_one_call_per_hundred(dynamodb: Any, tables: Tables) -> None:
    # Given 150 pending rows
    keys = [put(dynamodb, tables, event(f"o-{n}", 1)) for n in range(150)]
    client = CountingClient(dynamodb)

    # When the gate reads them all
    states = DynamoDBPredecessorReader(client, tables.outbox).states(keys)

    # Then two calls did (BatchGetItem takes 100 keys)
    assert set(states.values()) == {PredecessorState.PENDING}
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
    # Given a pending row, and DynamoDB handing its key back twice, then three times
    key = put(dynamodb, tables, event("A", 1))

    # When the gate reads it
    twice = LeavingKeysUnprocessed(dynamodb, rounds=2)
    states = DynamoDBPredecessorReader(twice, tables.outbox).states([key])

    # Then two refusals are ridden out; three make the read fail with ThrottledError (the caller stops)
    assert states == {key: PredecessorState.PENDING}
    assert twice.calls == 3
    with pytest.raises(ThrottledError, match="unprocessed"):
        DynamoDBPredecessorReader(LeavingKeysUnprocessed(dynamodb, rounds=3), tables.outbox).states([key])


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
