"""One DynamoDB transaction, built and checked before it is sent.

A `Transaction` collects the actions of one TransactWriteItems call: the caller's business items
and the outbox rows that announce them. It enforces DynamoDB's limits as actions are added
(typed errors, nothing sent), and remembers, per action, which typed error a failed condition
means, so the executor can translate DynamoDB's CancellationReasons without reading messages.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from outbox.errors import (
    ConditionFailedError,
    DuplicateItemKeyError,
    ItemTooLargeError,
    OutboxValidationError,
    TooManyActionsError,
    TransactionTooLargeError,
)
from outbox.limits import (
    MAX_ITEM_BYTES,
    MAX_TRANSACTION_ACTIONS,
    MAX_TRANSACTION_BYTES,
    Item,
    attribute_value_size,
    item_size,
)

# Builds the error a failed condition stands for. It receives the action's label, its index and
# the item as it was (present when DynamoDB returned it), and returns the error to raise.
ConditionFailure = Callable[[str, int, Item | None], ConditionFailedError]


@dataclass(frozen=True, slots=True)
class TableKeys:
    """A table's name and key schema: enough to tell which item an action targets."""

    table_name: str
    partition_key: str
    sort_key: str | None = None

    def key_of(self, item: Item) -> dict[str, Any]:
        names = (self.partition_key,) if self.sort_key is None else (self.partition_key, self.sort_key)
        missing = [name for name in names if name not in item]
        if missing:
            raise OutboxValidationError(
                f"item for {self.table_name} lacks key attribute(s) {', '.join(missing)}",
                field=missing[0],
            )
        return {name: dict(item[name]) for name in names}


class _Action(NamedTuple):
    """One action and what its failed condition means."""

    label: str
    request: dict[str, Any]
    on_condition_failed: ConditionFailure


def _default_failure(label: str, index: int, _old: Item | None) -> ConditionFailedError:
    return ConditionFailedError(label, index=index)


class Transaction:
    """The actions of one TransactWriteItems call, validated as they are added."""

    def __init__(self) -> None:
        self._actions: list[_Action] = []
        self._targets: set[tuple[str, str]] = set()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._actions)

    @property
    def size_bytes(self) -> int:
        return self._bytes

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(action.label for action in self._actions)

    def transact_items(self) -> list[dict[str, Any]]:
        """The `TransactItems` argument of TransactWriteItems."""
        return [action.request for action in self._actions]

    @contextmanager
    def all_or_nothing(self) -> Iterator[Transaction]:
        """Actions added inside are kept only if the block ends without an error: a refusal of the third
        leaves out the first two as well."""
        count, targets, size = len(self._actions), set(self._targets), self._bytes
        try:
            yield self
        except BaseException:
            del self._actions[count:]
            self._targets, self._bytes = targets, size
            raise

    def on_condition_failed(self, index: int) -> ConditionFailure:
        return self._actions[index].on_condition_failed

    def put(
        self,
        table: TableKeys,
        item: Item,
        *,
        label: str,
        condition: str | None = None,
        names: Mapping[str, str] | None = None,
        values: Item | None = None,
        on_condition_failed: ConditionFailure = _default_failure,
    ) -> None:
        size = item_size(item)
        if size > MAX_ITEM_BYTES:
            raise ItemTooLargeError(f"{label}: item is {size} bytes, over the {MAX_ITEM_BYTES}-byte limit")
        request: dict[str, Any] = {"TableName": table.table_name, "Item": dict(item)}
        self._add(
            "Put",
            table,
            table.key_of(item),
            request,
            size=size,
            label=label,
            condition=condition,
            names=names,
            values=values,
            on_condition_failed=on_condition_failed,
        )

    def update(
        self,
        table: TableKeys,
        key: Item,
        update_expression: str,
        *,
        label: str,
        condition: str | None = None,
        names: Mapping[str, str] | None = None,
        values: Item | None = None,
        on_condition_failed: ConditionFailure = _default_failure,
    ) -> None:
        request: dict[str, Any] = {
            "TableName": table.table_name,
            "Key": table.key_of(key),
            "UpdateExpression": update_expression,
        }
        self._add(
            "Update",
            table,
            request["Key"],
            request,
            size=item_size(key),
            label=label,
            condition=condition,
            names=names,
            values=values,
            on_condition_failed=on_condition_failed,
        )

    def delete(
        self,
        table: TableKeys,
        key: Item,
        *,
        label: str,
        condition: str | None = None,
        names: Mapping[str, str] | None = None,
        values: Item | None = None,
        on_condition_failed: ConditionFailure = _default_failure,
    ) -> None:
        self._add_keyed(
            "Delete",
            table,
            key,
            label=label,
            condition=condition,
            names=names,
            values=values,
            on_condition_failed=on_condition_failed,
        )

    def condition_check(
        self,
        table: TableKeys,
        key: Item,
        condition: str,
        *,
        label: str,
        names: Mapping[str, str] | None = None,
        values: Item | None = None,
        on_condition_failed: ConditionFailure = _default_failure,
    ) -> None:
        self._add_keyed(
            "ConditionCheck",
            table,
            key,
            label=label,
            condition=condition,
            names=names,
            values=values,
            on_condition_failed=on_condition_failed,
        )

    def _add_keyed(
        self,
        kind: str,
        table: TableKeys,
        key: Item,
        *,
        label: str,
        condition: str | None,
        names: Mapping[str, str] | None,
        values: Item | None,
        on_condition_failed: ConditionFailure,
    ) -> None:
        """An action named by its key alone (a Delete, a ConditionCheck)."""
        request: dict[str, Any] = {"TableName": table.table_name, "Key": table.key_of(key)}
        self._add(
            kind,
            table,
            request["Key"],
            request,
            size=item_size(key),
            label=label,
            condition=condition,
            names=names,
            values=values,
            on_condition_failed=on_condition_failed,
        )

    def _add(
        self,
        kind: str,
        table: TableKeys,
        key: Item,
        request: dict[str, Any],
        *,
        size: int,
        label: str,
        condition: str | None,
        names: Mapping[str, str] | None,
        values: Item | None,
        on_condition_failed: ConditionFailure,
    ) -> None:
        if len(self._actions) >= MAX_TRANSACTION_ACTIONS:
            raise TooManyActionsError(
                f"a transaction holds at most {MAX_TRANSACTION_ACTIONS} actions; {label} would be one more"
            )
        target = (table.table_name, _canonical_key(key))
        if target in self._targets:
            raise DuplicateItemKeyError(
                f"{label}: another action of this transaction already targets that item"
            )
        if condition is not None:
            request["ConditionExpression"] = condition
            # Lets the error factory see the item that broke the condition, without a second read.
            request["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        if names:
            request["ExpressionAttributeNames"] = dict(names)
        if values:
            request["ExpressionAttributeValues"] = dict(values)
            size += sum(attribute_value_size(value) for value in values.values())
        if self._bytes + size > MAX_TRANSACTION_BYTES:
            raise TransactionTooLargeError(
                f"a transaction holds at most {MAX_TRANSACTION_BYTES} bytes; {label} would bring it to "
                f"{self._bytes + size}"
            )
        self._actions.append(_Action(label, {kind: request}, on_condition_failed))
        self._targets.add(target)
        self._bytes += size


def _canonical_key(key: Item) -> str:
    return "|".join(f"{name}={sorted(value.items())}" for name, value in sorted(key.items()))


class TransactionExecutor(Protocol):
    """Port: commits a transaction, all or nothing, or raises a typed OutboxError."""

    def execute(self, transaction: Transaction, *, request_token: str | None = None) -> None: ...
