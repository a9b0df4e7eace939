"""TransactWriteItems as DynamoDB does it, while a local runtime runs: corrects moto 5.2, whose cancelled
transaction leaves phantom stream records and a table the stream reader no longer follows.

moto (`DynamoDBBackend.transact_write_items`) applies each action as it checks it and, when a later one fails,
puts back a deep copy of every table it touched: the writes before the failure have already emitted their
stream records, and the copy's stream is not the one the runtime's reader follows. Here every action is
checked first (key unicity, conditions, evaluated as moto evaluates them) without writing; a failed condition
cancels with moto's own `TransactionCanceledException` and nothing is written. Then the actions are applied
through moto's own put/update/delete; one that fails while applied (an update expression DynamoDB would have
refused up front) puts the items it touched back and re-raises, its earlier stream records staying (the one
residue, documented in docs/local.md, "Where moto differs from AWS").

Every write of moto's DynamoDB backend also holds one lock, so a conditional write is atomic on its item and a
transaction serializable with every other write, as on DynamoDB (of two writers claiming one lease, one wins).
Reads are isolated by `outbox_local.moto_isolation`.
"""

from __future__ import annotations

import copy
import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from moto.dynamodb.comparisons import get_filter_expression
from moto.dynamodb.exceptions import (
    ConditionalCheckFailed,
    MockValidationException,
    MultipleTransactionsException,
    TooManyTransactionsException,
    TransactionCanceledException,
    TransactWriteSingleOpException,
)
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType

_OPERATIONS = frozenset({"ConditionCheck", "Put", "Delete", "Update"})


def transact_write_items(backend: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
    if len(transact_items) > 100:
        raise TooManyTransactionsException()
    planned = _check(backend, transact_items)
    before = {
        (table, str(key)): (table, key, _copy(backend.get_item(table, key))) for _, table, key, _ in planned
    }
    try:
        for op_type, table_name, key, op in planned:
            _apply(backend, op_type, table_name, key, op)
    except Exception:
        for table_name, key, item in before.values():
            _restore(backend, table_name, key, item)
        raise


def _check(
    backend: DynamoDBBackend, transact_items: list[dict[str, Any]]
) -> list[tuple[str, str, dict[str, Any], dict[str, Any]]]:
    """Every action checked, nothing written: the actions to apply, or TransactionCanceledException."""
    targets: set[tuple[str, str]] = set()
    errors: list[tuple[str | None, str | None, Any]] = []
    planned: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = []
    for item in transact_items:
        if len(item) > 1:
            raise TransactWriteSingleOpException
        op_type, op = next(iter(item.items()))
        original: dict[str, Any] | None = None
        try:
            if op_type not in _OPERATIONS:
                raise ValueError("Unsupported transaction operation")
            table_name = op["TableName"]
            key = _key(backend, op_type, op)
            target = (str(table_name), str(dict(sorted(key.items()))))
            if target in targets:
                raise MultipleTransactionsException()
            targets.add(target)
            current = backend.get_item(table_name, key)
            condition = op.get("ConditionExpression")
            if condition is not None:
                # moto's own parse, as moto evaluates a transaction's condition
                expression = get_filter_expression(
                    condition, op.get("ExpressionAttributeNames"), op.get("ExpressionAttributeValues")
                )
                if not expression.expr(current):
                    if op.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" and current:
                        original = current.to_json()["Attributes"]
                    raise ConditionalCheckFailed(item=original)
            planned.append((op_type, table_name, key, op))
            errors.append((None, None, None))
        except (MultipleTransactionsException, MockValidationException):
            raise
        except ConditionalCheckFailed as failed:
            errors.append(("ConditionalCheckFailed", str(failed.message), original))
        except Exception as error:  # moto reports any other failure per action, as here
            errors.append((type(error).__name__, str(error), original))
    if any(code is not None for code, _, _ in errors):
        raise TransactionCanceledException(errors)
    return planned


def _key(backend: DynamoDBBackend, op_type: str, op: dict[str, Any]) -> dict[str, Any]:
    if op_type != "Put":
        key: dict[str, Any] = op["Key"]
        return key
    table = backend.get_table(op["TableName"])
    attributes = op["Item"]
    put_key = {table.hash_key_attr: attributes[table.hash_key_attr]}
    if table.range_key_attr is not None:
        put_key[table.range_key_attr] = attributes[table.range_key_attr]
    return put_key


def _apply(
    backend: DynamoDBBackend, op_type: str, table_name: str, key: dict[str, Any], op: dict[str, Any]
) -> None:
    names, values = op.get("ExpressionAttributeNames") or {}, op.get("ExpressionAttributeValues") or {}
    # The conditions held when checked, and no other write can run until this transaction is applied: every
    # write holds the backend's write lock (`atomic_transactions`).
    if op_type == "Put":
        backend.put_item(
            table_name, op["Item"], expression_attribute_names=names, expression_attribute_values=values
        )
    elif op_type == "Delete":
        backend.delete_item(
            table_name, key, expression_attribute_names=names, expression_attribute_values=values
        )
    elif op_type == "Update":
        backend.update_item(
            table_name,
            key,
            update_expression=op["UpdateExpression"],
            expression_attribute_names=names,
            expression_attribute_values=values,
        )


def _copy(item: Any) -> Any:
    return copy.deepcopy(item) if item is not None else None


def _restore(backend: DynamoDBBackend, table_name: str, key: dict[str, Any], item: Any) -> None:
    table = backend.get_table(table_name)
    hash_value = table.hash_key_attr
    range_value = table.range_key_attr
    hash_key = DynamoType(key[hash_value])
    if range_value is None:
        if item is None:
            table.items.pop(hash_key, None)
        else:
            table.items[hash_key] = item
        return
    range_key = DynamoType(key[range_value])
    if item is None:
        table.items.get(hash_key, {}).pop(range_key, None)
    else:
        table.items[hash_key][range_key] = item


_WRITES = ("put_item", "update_item", "delete_item")
"""The backend's single-item writes (BatchWriteItem goes through them, item by item)."""


def _isolated(write: Callable[..., Any], lock: threading.RLock) -> Callable[..., Any]:
    @functools.wraps(write)
    def isolated(*arguments: Any, **keywords: Any) -> Any:
        with lock:
            return write(*arguments, **keywords)

    return isolated


@contextmanager
def atomic_transactions() -> Iterator[None]:
    """While in effect, every moto DynamoDB backend of this process runs TransactWriteItems atomically and
    isolates its writes from each other."""
    lock = threading.RLock()  # reentrant: a transaction applies its actions through the single-item writes
    originals = {name: getattr(DynamoDBBackend, name) for name in (*_WRITES, "transact_write_items")}
    for name in _WRITES:
        setattr(DynamoDBBackend, name, _isolated(originals[name], lock))
    DynamoDBBackend.transact_write_items = _isolated(transact_write_items, lock)  # type: ignore[method-assign]
    try:
        yield
    finally:
        for name, original in originals.items():
            setattr(DynamoDBBackend, name, original)
