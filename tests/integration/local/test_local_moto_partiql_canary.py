"""Canary for outbox_local.moto_partiql: moto as it is (the layer taken off) still mishandles the row
marker's PartiQL. The day a moto release parses AWS's UPDATE grammar, or fails a statement on its WHERE
clause, these fail: the layer then corrects something moto no longer gets wrong, and must be revisited
(or removed) rather than left to hide what moto now does."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import pytest
from moto.dynamodb.models import DynamoDBBackend

from outbox.marking import DynamoDBRowMarker
from outbox.model import RowKey
from outbox.row_marks import PublishedMark
from tests.support.aws import Tables
from tests.support.clock import START
from tests.support.events import event


@pytest.fixture
def plain_moto(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto's own BatchExecuteStatement, without the session-wide layer (tests/conftest.py)."""
    layered = DynamoDBBackend.batch_execute_statement
    original = cast(Callable[..., Any], layered.__wrapped__)  # type: ignore[attr-defined]
    monkeypatch.setattr(DynamoDBBackend, "batch_execute_statement", original)


def status(dynamodb: Any, table: str, key: RowKey) -> str:
    item = dynamodb.get_item(TableName=table, Key=key.item(), ConsistentRead=True)["Item"]
    return str(item["status"]["S"])


def test_plain_moto_cannot_run_the_markers_statement(plain_moto: None, dynamodb: Any, tables: Tables) -> None:
    # Given a pending row, and the marker's statement for it (AWS's documented grammar)
    dynamodb.put_item(TableName=tables.outbox, Item=event("A", 1).to_item())
    key = RowKey("Order#A", 1)
    statement = DynamoDBRowMarker(dynamodb, tables.outbox)._statement(PublishedMark(key, START, 1))

    # When moto as it is runs it
    try:
        answer: dict[str, Any] | None = dynamodb.batch_execute_statement(Statements=[statement])
    except Exception:  # how it fails (500, AssertionError) is moto's; that it fails is the canary
        answer = None

    # Then it refused it (or answered without writing): the row is still PENDING
    assert answer is None or "Error" in answer["Responses"][0]
    assert status(dynamodb, tables.outbox, key) == "PENDING"


def test_plain_moto_answers_success_for_a_where_clause_that_does_not_hold(
    plain_moto: None, dynamodb: Any, tables: Tables
) -> None:
    # Given a pending row, and an UPDATE in the one form moto parses, whose WHERE does not hold
    dynamodb.put_item(TableName=tables.outbox, Item=event("A", 1).to_item())
    key = RowKey("Order#A", 1)
    where = 'WHERE "aggregate_key" = ? AND "seq" = ? AND "status" = ?'
    statement = {
        "Statement": " ".join(("UPDATE", f'"{tables.outbox}"', 'SET "status" = ?', where)),
        "Parameters": [{"S": "PUBLISHED"}, {"S": key.aggregate_key}, {"N": key.seq_text}, {"S": "FAILED"}],
    }

    # When moto as it is runs it
    answer = dynamodb.batch_execute_statement(Statements=[statement])

    # Then it answered no error, where DynamoDB answers ConditionalCheckFailed
    assert "Error" not in answer["Responses"][0]
