"""The row marker's PartiQL statements, against AWS's documented grammar, and its reading of each statement's
answer (a stand-in client: the shapes DynamoDB documents, no moto).

The grammar, from "PartiQL update statements for DynamoDB"
(https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ql-reference.update.html):

    UPDATE table [SET | REMOVE] path [= data] [...] WHERE condition [RETURNING returnvalues]

each SET or REMOVE clause repeated with its own keyword, as in its example
`UPDATE "Music" SET AwardsWon=1 SET AwardDetail={...} WHERE Artist='Acme Band' AND SongTitle='PartiQL Rocks'`;
`+` and `IS [NOT] MISSING` from "PartiQL arithmetic, comparison, and logical operators for DynamoDB"
(https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ql-operators.html); at most 25 statements a
call, from "Running batch operations with PartiQL for DynamoDB"
(https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ql-reference.multiplestatements.batching.html);
per-statement `Error.Code` values from "BatchStatementError"
(https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_BatchStatementError.html).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

from outbox.deadline import Deadline
from outbox.marking import MARKING_CALL_MS, STATEMENT_BACKOFF_MS, DynamoDBRowMarker
from outbox.model import RowKey
from outbox.row_marks import FailedMark, PublishedMark
from tests.support.clock import START

_PATH = r'"[A-Za-z_][A-Za-z0-9_]*"'
_CLAUSE = rf"(?:SET {_PATH} = (?:\?|{_PATH} \+ \?)|REMOVE {_PATH})"
_CONDITION = rf"{_PATH} (?:= \?|IS MISSING|IS NOT MISSING)"
_GRAMMAR = re.compile(rf'UPDATE "[A-Za-z0-9_.-]+"(?: {_CLAUSE})+ WHERE {_CONDITION}(?: AND {_CONDITION})*')


class FakeDynamoDB:
    """Answers BatchExecuteStatement with the responses `answer` gives for each call's statements."""

    def __init__(
        self,
        answer: Callable[[int, list[dict[str, Any]]], list[dict[str, Any]]],
        moved_on: frozenset[RowKey] = frozenset(),
    ) -> None:
        self.answer = answer
        self.moved_on = moved_on
        """Rows whose UpdateItem fails its condition."""
        self.batches: list[list[dict[str, Any]]] = []
        self.updates: list[dict[str, Any]] = []

    def batch_execute_statement(self, *, Statements: list[dict[str, Any]]) -> dict[str, Any]:  # noqa: N803
        self.batches.append(Statements)
        return {"Responses": self.answer(len(self.batches), Statements)}

    def update_item(self, **arguments: Any) -> dict[str, Any]:
        self.updates.append(arguments)
        if RowKey.of(arguments["Key"]) in self.moved_on:
            raise ClientError({"Error": {"Code": "ConditionalCheckFailedException"}}, "UpdateItem")
        return {}


class Remaining(Deadline):
    def __init__(self, ms: int) -> None:
        self.ms = ms

    def remaining_ms(self) -> int:
        return self.ms


def keys(count: int) -> list[RowKey]:
    return [RowKey("Order#A", seq) for seq in range(1, count + 1)]


def test_a_published_mark_is_one_update_of_the_documented_grammar() -> None:
    # Given a marker and a mark made under a lease, at generation 2, for a known event
    client = FakeDynamoDB(lambda _, statements: [{} for _ in statements])
    marker = DynamoDBRowMarker(client, "outbox-table")
    marks = [
        PublishedMark(key, START, 1, lease_owner="stream:1", generation=2, event_id=f"e{key.seq}")
        for key in keys(2)
    ]

    # When two rows are marked
    marker.mark(marks)

    # Then one call carried one statement per row, exactly this, with its values as parameters in order
    (batch,) = client.batches
    statement = batch[0]
    assert statement["Statement"] == (
        'UPDATE "outbox-table" SET "status" = ? SET "published_at" = ? SET "expires_at" = ?'
        ' SET "attempts" = "attempts" + ? REMOVE "pending_shard" REMOVE "lease_owner" REMOVE "lease_until"'
        ' REMOVE "next_attempt_at" WHERE "aggregate_key" = ? AND "seq" = ? AND "status" = ?'
        ' AND "lease_owner" = ? AND "generation" = ? AND "event_id" = ? AND "attempts" IS NOT MISSING'
    )
    assert _GRAMMAR.fullmatch(statement["Statement"])
    assert statement["Parameters"] == [
        {"S": "PUBLISHED"},
        {"S": "2026-11-29T12:00:00.000Z"},
        {"N": str(int(START.timestamp()) + 7 * 86400)},
        {"N": "1"},
        {"S": "Order#A"},
        {"N": "1"},
        {"S": "PENDING"},
        {"S": "stream:1"},
        {"N": "2"},
        {"S": "e1"},
    ]
    assert statement["Statement"].count("?") == len(statement["Parameters"])
    assert statement["ReturnValuesOnConditionCheckFailure"] == "ALL_OLD"


def test_a_failed_mark_removes_the_ttl_and_publication_time_and_fits_the_grammar() -> None:
    # Given a FAILED mark of a first-generation row read without `attempts`
    client = FakeDynamoDB(lambda _, statements: [{} for _ in statements])
    marker = DynamoDBRowMarker(client, "outbox-table")

    # When it is marked with another
    marker.mark([FailedMark(key, "rejected", 1, START, attempts_stored=False) for key in keys(2)])

    # Then its statement sets FAILED, removes expires_at and published_at, and requires no generation
    statement = client.batches[0][0]["Statement"]
    assert _GRAMMAR.fullmatch(statement)
    assert 'SET "status" = ? SET "last_error" = ? SET "failed_at" = ? SET "failed_shard" = ?' in statement
    assert 'SET "attempts" = ? REMOVE' in statement
    assert 'REMOVE "expires_at" REMOVE "published_at" WHERE' in statement
    assert statement.endswith('AND "generation" IS MISSING AND "attempts" IS MISSING')
    assert client.batches[0][0]["Parameters"][0] == {"S": "FAILED"}


def test_at_most_25_statements_go_in_one_call() -> None:
    # Given 60 rows
    client = FakeDynamoDB(lambda _, statements: [{} for _ in statements])

    # When they are marked
    report = DynamoDBRowMarker(client, "t").mark([PublishedMark(key, START, 1) for key in keys(60)])

    # Then three calls of 25, 25 and 10 marked them all
    assert [len(batch) for batch in client.batches] == [25, 25, 10]
    assert (report.calls, len(report.marked)) == (3, 60)


def test_each_statement_is_answered_on_its_own() -> None:
    # Given DynamoDB answering: moved on, throttled (then fine), too large, a code nobody retries
    def answer(call: int, statements: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if call == 2:
            return [{} for _ in statements]
        return [
            {},
            {"Error": {"Code": "ConditionalCheckFailed", "Item": {"status": {"S": "PUBLISHED"}}}},
            {"Error": {"Code": "ThrottlingError"}},
            {"Error": {"Code": "ItemCollectionSizeLimitExceeded"}},
            {"Error": {"Code": "AccessDenied"}},
        ]

    client = FakeDynamoDB(answer)
    rows = keys(5)

    # When five rows are marked
    report = DynamoDBRowMarker(client, "t", sleep=lambda _: None).mark(
        [PublishedMark(key, START, 1) for key in rows]
    )

    # Then the throttled statement alone was sent again, and each row is reported as its statement went
    assert [len(batch) for batch in client.batches] == [5, 1]
    assert report.marked == [rows[0], rows[2]]
    assert report.already_moved == [rows[1]]
    assert report.failed == {rows[3]: "TransactionValidationError", rows[4]: "AwsCallError"}
    assert report.calls == 2


def test_a_statement_throttled_twice_is_left_pending_with_its_typed_error() -> None:
    # Given DynamoDB throttling one statement every time
    throttled = {"Error": {"Code": "ProvisionedThroughputExceeded"}}
    client = FakeDynamoDB(lambda call, _: [{}, throttled] if call == 1 else [throttled])

    # When two rows are marked
    report = DynamoDBRowMarker(client, "t", sleep=lambda _: None).mark(
        [PublishedMark(key, START, 1) for key in keys(2)]
    )

    # Then it was tried twice, then reported as throttled (the sweeper reconciles it)
    assert report.failed == {keys(2)[1]: "ThrottledError"}
    assert report.calls == 2


def test_a_condition_failed_on_a_row_another_path_holds_is_moved_on_not_retried() -> None:
    # Given the row still PENDING, but under another lease (a sweep run claimed it)
    held = {"status": {"S": "PENDING"}, "lease_owner": {"S": "sweeper:2"}, "attempts": {"N": "0"}}
    client = FakeDynamoDB(
        lambda _, statements: [{"Error": {"Code": "ConditionalCheckFailed", "Item": held}}] * 2
    )

    # When the stream publisher marks it, with another
    report = DynamoDBRowMarker(client, "t").mark(
        [PublishedMark(key, START, 1, lease_owner="stream:1") for key in keys(2)]
    )

    # Then both count as moved on, and no UpdateItem was tried
    assert report.already_moved == keys(2)
    assert client.updates == []


def test_a_refused_call_leaves_its_rows_pending_with_the_typed_error() -> None:
    # Given DynamoDB refusing the whole call (throttled)
    def refuse(_: int, __: list[dict[str, Any]]) -> list[dict[str, Any]]:
        raise ClientError({"Error": {"Code": "ThrottlingException"}}, "BatchExecuteStatement")

    # When two rows are marked
    report = DynamoDBRowMarker(FakeDynamoDB(refuse), "t").mark(
        [PublishedMark(key, START, 1) for key in keys(2)]
    )

    # Then both are reported, not raised
    assert report.failed == dict.fromkeys(keys(2), "ThrottledError")


def test_no_call_starts_that_could_outlast_the_deadline() -> None:
    # Given less time left than one marking call can take
    client = FakeDynamoDB(lambda _, statements: [{} for _ in statements])

    # When rows are marked
    report = DynamoDBRowMarker(client, "t").mark(
        [PublishedMark(key, START, 1) for key in keys(3)], Remaining(MARKING_CALL_MS - 1)
    )

    # Then nothing was sent; the rows stay PENDING for the sweeper
    assert client.batches == []
    assert report.failed == dict.fromkeys(keys(3), "DeadlineExceeded")


REFUSED_LOG = "PartiQL marking refused by DynamoDB: marking with UpdateItem from now on"


def refused_logs(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.getMessage() == REFUSED_LOG]


def test_a_statement_form_dynamodb_refuses_is_marked_with_update_item_from_then_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given DynamoDB refusing every statement as a form it does not take (ValidationError)
    client = FakeDynamoDB(lambda _, statements: [{"Error": {"Code": "ValidationError"}} for _ in statements])
    marker = DynamoDBRowMarker(client, "t")
    rows = keys(30)

    # When 30 rows are marked, then 3 more
    with caplog.at_level(logging.INFO, logger="outbox.marking"):
        first = marker.mark([PublishedMark(key, START, 1, event_id=f"secret-{key.seq}") for key in rows])
        second = marker.mark([FailedMark(key, "rejected", 1, START) for key in keys(33)[30:]])

    # Then one batch was tried, every row was marked with UpdateItem, and PartiQL was never tried again
    assert len(client.batches) == 1
    assert sorted(first.marked) == rows
    assert first.failed == {}
    assert first.calls == 1 + 30
    assert len(second.marked) == 3
    assert len(client.updates) == 33
    # Said once, at ERROR, with the code and nothing of the rows; counted at each fallback
    (record,) = refused_logs(caplog)
    assert record.levelno == logging.ERROR
    assert record.__dict__["error_code"] == "ValidationError"
    assert "secret" not in str(record.__dict__)
    assert (first.fallbacks, second.fallbacks) == (30, 3)


def test_a_call_dynamodb_refuses_as_a_form_is_marked_with_update_item(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given DynamoDB refusing the whole call (ValidationException), one row having moved on meanwhile
    def refuse(_: int, __: list[dict[str, Any]]) -> list[dict[str, Any]]:
        raise ClientError({"Error": {"Code": "ValidationException"}}, "BatchExecuteStatement")

    rows = keys(3)
    client = FakeDynamoDB(refuse, moved_on=frozenset({rows[1]}))

    # When the rows are marked
    with caplog.at_level(logging.ERROR, logger="outbox.marking"):
        report = DynamoDBRowMarker(client, "t").mark([PublishedMark(key, START, 1) for key in rows])

    # Then UpdateItem marked them, exactly: the moved-on row is counted as such, none is left PENDING
    assert report.marked == [rows[0], rows[2]]
    assert report.already_moved == [rows[1]]
    assert report.failed == {}
    assert refused_logs(caplog)[0].__dict__["error_code"] == "ValidationException"
    assert report.fallbacks == 3


def test_a_condition_failed_without_the_item_is_answered_by_update_item_not_guessed() -> None:
    # Given DynamoDB failing both statements' conditions without returning the items
    rows = keys(2)
    client = FakeDynamoDB(
        lambda _, statements: [{"Error": {"Code": "ConditionalCheckFailed"}} for _ in statements],
        moved_on=frozenset({rows[0]}),
    )

    # When both are marked
    report = DynamoDBRowMarker(client, "t").mark([PublishedMark(key, START, 1) for key in rows])

    # Then UpdateItem asked each: the first had moved on, the second was marked
    assert len(client.updates) == 2
    assert report.already_moved == [rows[0]]
    assert report.marked == [rows[1]]


def test_a_releasing_failed_mark_stays_in_the_batch() -> None:
    # Given FAILED marks that release their rows, one read without first_released_at and one with it
    client = FakeDynamoDB(lambda _, statements: [{} for _ in statements])
    first, again = keys(2)
    marks = [
        FailedMark(first, "rejected", 1, START, release_reason="continues"),
        FailedMark(again, "rejected", 1, START, release_reason="continues", first_released_stored=True),
    ]

    # When they are marked
    report = DynamoDBRowMarker(client, "t").mark(marks)

    # Then one call marked both: the first sets first_released_at where it is missing, the second keeps it
    assert (report.calls, client.updates) == (1, [])
    setting, keeping = (statement["Statement"] for statement in client.batches[0])
    for statement in (setting, keeping):
        assert _GRAMMAR.fullmatch(statement)
        assert 'SET "released_at" = ? SET "release_reason" = ?' in statement
    assert 'SET "first_released_at" = ?' in setting
    assert setting.endswith('AND "first_released_at" IS MISSING')
    assert '"first_released_at" = ?' not in keeping
    assert keeping.endswith('AND "first_released_at" IS NOT MISSING')
    for statement in client.batches[0]:
        assert statement["Statement"].count("?") == len(statement["Parameters"])
    assert client.batches[0][0]["Parameters"][4:7] == [
        {"S": "2026-11-29T12:00:00.000Z"},
        {"S": "continues"},
        {"S": "2026-11-29T12:00:00.000Z"},
    ]


def test_a_row_that_gained_first_released_at_since_it_was_read_is_rechecked_with_update_item() -> None:
    # Given the releasing statement failing: the row, still PENDING for this mark, has first_released_at now
    row = {"status": {"S": "PENDING"}, "attempts": {"N": "0"}, "first_released_at": {"S": "x"}}
    client = FakeDynamoDB(
        lambda _, statements: [{}, {"Error": {"Code": "ConditionalCheckFailed", "Item": row}}]
    )
    rows = keys(2)

    # When both are marked
    report = DynamoDBRowMarker(client, "t").mark(
        [FailedMark(key, "rejected", 1, START, release_reason="continues") for key in rows]
    )

    # Then UpdateItem (if_not_exists) marked the second
    assert [RowKey.of(update["Key"]) for update in client.updates] == [rows[1]]
    assert "if_not_exists(first_released_at" in client.updates[0]["UpdateExpression"]
    assert sorted(report.marked) == rows


def test_throttled_statements_are_sent_again_after_a_jittered_pause_within_the_deadline() -> None:
    # Given DynamoDB throttling the second statement of each first call, and a marker whose sleep and
    # jitter are recorded
    throttled = {"Error": {"Code": "ThrottlingError"}}
    client = FakeDynamoDB(lambda _, statements: [{}, throttled] if len(statements) == 2 else [{}])
    slept: list[float] = []
    marker = DynamoDBRowMarker(client, "t", sleep=slept.append, random=lambda: 0.5)

    # When two rows are marked with time enough, then with just time for the call
    plenty = marker.mark([PublishedMark(key, START, 1) for key in keys(2)])
    tight = marker.mark(
        [PublishedMark(key, START, 1) for key in keys(2)],
        Remaining(MARKING_CALL_MS + STATEMENT_BACKOFF_MS // 4),
    )

    # Then the first waited half the back-off before resending; the second resent at once, not to miss its
    # deadline
    assert slept == [STATEMENT_BACKOFF_MS * 0.5 / 1000]
    assert len(plenty.marked) == len(tight.marked) == 2
