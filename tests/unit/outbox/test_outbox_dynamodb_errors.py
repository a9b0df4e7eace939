"""Translating DynamoDB failures into typed errors, by code and CancellationReasons, never by message."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from outbox.dynamodb import DynamoDBTransactionExecutor
from outbox.errors import (
    AwsCallError,
    AwsUnavailableError,
    ConditionFailedError,
    DuplicateEventError,
    OutboxError,
    ThrottledError,
    TransactionCancelledError,
    TransactionConflictError,
    TransactionValidationError,
)
from outbox.limits import Item
from outbox.model import OutboxEvent
from outbox.transaction import TableKeys, Transaction
from outbox.writer import OutboxWriter


class ScriptedClient:
    """A DynamoDB client that raises what it is told to and records its calls."""

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        self.calls: list[dict[str, Any]] = []

    def transact_write_items(self, **arguments: Any) -> dict[str, Any]:
        self.calls.append(arguments)
        if self.error is not None:
            raise self.error
        return {}


def cancelled(*reasons: dict[str, Any]) -> ClientError:
    # The message is deliberately misleading: translation must not read it.
    response: dict[str, Any] = {
        "Error": {"Code": "TransactionCanceledException", "Message": "ConditionalCheckFailed Throttling"},
        "CancellationReasons": list(reasons),
    }
    return ClientError(response, "TransactWriteItems")


def error(code: str, status: int = 400) -> ClientError:
    response: Any = {"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": status}}
    return ClientError(response, "TransactWriteItems")


class OrderTakenError(ConditionFailedError):
    def __init__(self, label: str, index: int, old: Item | None) -> None:
        super().__init__(label, index=index)
        self.old = old


def two_actions() -> Transaction:
    transaction = Transaction()
    transaction.put(
        TableKeys("orders", "pk"),
        {"pk": {"S": "ORDER#1"}},
        label="order",
        condition="attribute_not_exists(pk)",
        on_condition_failed=OrderTakenError,
    )
    OutboxWriter("outbox").append(
        transaction,
        OutboxEvent.new(
            aggregate_type="Order", aggregate_id="1", seq=1, event_type="OrderPlaced", payload={}
        ),
    )
    return transaction


def run(failure: Exception) -> Exception:
    # Every failure surfaces as a typed OutboxError, never as a raw botocore error.
    with pytest.raises(OutboxError) as raised:
        DynamoDBTransactionExecutor(ScriptedClient(failure)).execute(two_actions())
    return raised.value


def test_a_failed_condition_becomes_its_actions_error_with_the_old_item() -> None:
    # Given DynamoDB reports the order's condition failed and returns the old item
    old = {"pk": {"S": "ORDER#1"}, "version": {"N": "3"}}
    # When the transaction is executed
    failure = run(cancelled({"Code": "ConditionalCheckFailed", "Item": old}, {"Code": "None"}))
    # Then the order action's own factory built the error, with the old item and all reasons
    assert isinstance(failure, OrderTakenError)
    assert (failure.old, failure.action, failure.index) == (old, "order", 0)
    assert failure.reasons == ("ConditionalCheckFailed", "None")


def test_a_failed_outbox_condition_is_a_duplicate_event() -> None:
    # Given / When the outbox row's slot is taken / Then DuplicateEventError
    failure = run(cancelled({"Code": "None"}, {"Code": "ConditionalCheckFailed"}))
    assert isinstance(failure, DuplicateEventError)
    assert failure.index == 1


@pytest.mark.parametrize(
    ("reasons", "expected"),
    [
        (["TransactionConflict", "None"], TransactionConflictError),
        (["None", "ThrottlingError"], ThrottledError),
        (["ValidationError", "None"], TransactionValidationError),
        (["ItemCollectionSizeLimitExceeded", "None"], TransactionValidationError),
        (["None", "None"], TransactionCancelledError),
    ],
)
def test_other_cancellation_reasons_are_typed(reasons: list[str], expected: type[Exception]) -> None:
    # Given / When / Then
    failure = run(cancelled(*({"Code": code} for code in reasons)))
    assert type(failure) is expected


@pytest.mark.parametrize(
    ("client_error", "expected"),
    [
        (error("ThrottlingException"), ThrottledError),
        (error("ProvisionedThroughputExceededException"), ThrottledError),
        (error("InternalServerError", 500), AwsUnavailableError),
        (error("ValidationException"), TransactionValidationError),
        (error("IdempotentParameterMismatchException"), TransactionValidationError),
        (error("TransactionInProgressException"), TransactionConflictError),
        (error("AccessDeniedException"), AwsCallError),
        (EndpointConnectionError(endpoint_url="https://dynamodb"), AwsUnavailableError),
    ],
)
def test_call_failures_are_typed(client_error: Exception, expected: type[Exception]) -> None:
    # Given / When / Then
    assert type(run(client_error)) is expected


def test_an_empty_transaction_sends_nothing_and_a_token_is_passed_through() -> None:
    # Given a client that records calls
    client = ScriptedClient()
    executor = DynamoDBTransactionExecutor(client)
    # When an empty transaction and then a real one with a request token are executed
    executor.execute(Transaction())
    executor.execute(two_actions(), request_token="token-1")
    # Then only the real one was sent, with its token
    assert len(client.calls) == 1
    assert client.calls[0]["ClientRequestToken"] == "token-1"
    assert len(client.calls[0]["TransactItems"]) == 2
