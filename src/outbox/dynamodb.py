"""DynamoDB adapter: runs transactions and translates AWS errors into the library's typed errors.

Translation uses error codes and CancellationReasons, never message text: a failed condition is
told from a conflict or a throttle by the code DynamoDB gives each action of the transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError, ConnectionError, ReadTimeoutError

from outbox.aws_errors import THROTTLING_CODES, error_code, http_status
from outbox.errors import (
    AwsCallError,
    AwsUnavailableError,
    OutboxError,
    ThrottledError,
    TransactionCancelledError,
    TransactionConflictError,
    TransactionValidationError,
)
from outbox.model import RowKey
from outbox.transaction import Transaction

_CONFLICT_REASONS = frozenset({"TransactionConflict"})
_THROTTLE_REASONS = frozenset({"ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded"})


class DynamoDBTransactionExecutor:
    """Commits a `Transaction` with one TransactWriteItems call."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def execute(self, transaction: Transaction, *, request_token: str | None = None) -> None:
        if not len(transaction):
            return
        arguments: dict[str, Any] = {"TransactItems": transaction.transact_items()}
        if request_token is not None:
            # Deduplicates retries of this very call for 10 minutes only: request idempotency
            # beyond that is the caller's job (an idempotency record in the same transaction).
            arguments["ClientRequestToken"] = request_token
        try:
            self._client.transact_write_items(**arguments)
        except ClientError as error:
            raise translate_transaction_error(error, transaction) from error
        except (ConnectionError, ReadTimeoutError, BotoCoreError) as error:
            raise AwsUnavailableError(f"DynamoDB did not answer: {type(error).__name__}") from error


def translate_transaction_error(error: ClientError, transaction: Transaction) -> OutboxError:
    code = error_code(error)
    if code == "TransactionCanceledException":
        return _cancellation(error, transaction)
    if code == "TransactionInProgressException":
        return TransactionConflictError("a transaction with this request token is still in progress")
    if code == "IdempotentParameterMismatchException":
        return TransactionValidationError("request token reused with different parameters")
    return translate_client_error(error, "TransactWriteItems")


class ConditionNotMetError(OutboxError):
    """A single-item write's condition did not hold. `item` is the item as stored, when the call asked for it
    (`ReturnValuesOnConditionCheckFailure="ALL_OLD"`), else None."""

    def __init__(self, operation: str, item: Mapping[str, Any] | None) -> None:
        super().__init__(f"the condition of {operation} did not hold")
        self.item = item


def call(operation: str, method: Callable[..., Any], **arguments: Any) -> Any:
    """One DynamoDB call (`method` of a boto3 client), its failures as the library's typed errors: a failed
    condition as `ConditionNotMetError`, an answer that never came as `AwsUnavailableError`, any other
    error as `translate_client_error` says."""
    try:
        return method(**arguments)
    except ClientError as error:
        if error_code(error) == "ConditionalCheckFailedException":
            raise ConditionNotMetError(operation, error.response.get("Item")) from None
        raise translate_client_error(error, operation) from error
    except BotoCoreError as error:
        raise AwsUnavailableError(f"{operation} did not answer: {type(error).__name__}") from error


def translate_client_error(error: ClientError, operation: str) -> OutboxError:
    """Typed error for any DynamoDB call: throttling and 5xx are retryable, the rest is not."""
    code = error_code(error)
    if code in THROTTLING_CODES:
        return ThrottledError(f"{operation} was throttled ({code})")
    if http_status(error) >= 500 or code in ("InternalServerError", "ServiceUnavailable"):
        return AwsUnavailableError(f"{operation} failed on the AWS side ({code})")
    if code == "ValidationException":
        return TransactionValidationError(f"{operation} was rejected as invalid ({code})")
    return AwsCallError(f"{operation} failed ({code})", code=code)


def _cancellation(error: ClientError, transaction: Transaction) -> OutboxError:
    raw_reasons: list[dict[str, Any]] = error.response.get("CancellationReasons", [])
    codes = tuple(str(reason.get("Code", "None")) for reason in raw_reasons)
    for index, reason in enumerate(raw_reasons):
        if reason.get("Code") == "ConditionalCheckFailed" and index < len(transaction):
            failure = transaction.on_condition_failed(index)
            failed = failure(transaction.labels[index], index, reason.get("Item"))
            failed.reasons = codes
            return failed
    if _CONFLICT_REASONS & set(codes):
        return TransactionConflictError("another request changed these items at the same time", reasons=codes)
    if _THROTTLE_REASONS & set(codes):
        return ThrottledError("DynamoDB throttled the transaction")
    if "ValidationError" in codes or "ItemCollectionSizeLimitExceeded" in codes:
        return TransactionValidationError("DynamoDB rejected an action of the transaction", reasons=codes)
    return TransactionCancelledError(
        f"transaction cancelled ({', '.join(codes) or 'no reasons'})", reasons=codes
    )


UNPROCESSED_ROUNDS = 3
BATCH_GET_MAX_KEYS = 100
"""BatchGetItem's limit."""


def batch_get_rows(
    send: Callable[..., Any], table: str, keys: Sequence[RowKey], *, projection: str, names: Mapping[str, str]
) -> dict[RowKey, Mapping[str, Any]]:
    """The rows at `keys` (at most 100: one BatchGetItem), strongly consistent, by key; a missing row is
    absent. `send` makes the call (`call("BatchGetItem", client.batch_get_item, ...)`, or a caller's own
    deadline-checking wrapper). Keys DynamoDB leaves unprocessed are asked for again, a few rounds, then
    ThrottledError."""
    request: dict[str, Any] = {
        table: {
            "Keys": [key.item() for key in keys],
            "ConsistentRead": True,
            "ProjectionExpression": projection,
            "ExpressionAttributeNames": dict(names),
        }
    }
    rows: dict[RowKey, Mapping[str, Any]] = {}
    for _ in range(UNPROCESSED_ROUNDS):
        response = send(RequestItems=request)
        for item in response.get("Responses", {}).get(table, []):
            key = RowKey.stored(item)
            if key is not None:
                rows[key] = item
        request = response.get("UnprocessedKeys") or {}
        if not request:
            return rows
    raise ThrottledError(f"BatchGetItem left {len(request[table]['Keys'])} keys unprocessed")
