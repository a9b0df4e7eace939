"""PartiQL UPDATE in BatchExecuteStatement as DynamoDB runs it. A named correction of moto, installed while a
local runtime runs and in every test (docs/local.md, "Where moto differs from AWS").

moto 5.2 (`DynamoDBBackend.batch_execute_statement`, through py-partiql-parser) differs from DynamoDB on the
statements the row marker sends (outbox.marking):

- its parser refuses the grammar AWS documents, each clause with its own keyword
  (`UPDATE t SET a = ? SET b = ? REMOVE c WHERE ...`, "PartiQL update statements for DynamoDB"), and
  arithmetic (`SET n = n + ?`);
- a WHERE clause that does not hold is no error at all: the statement answers success and writes nothing,
  where DynamoDB answers that statement alone with `Error.Code` `ConditionalCheckFailed` (and, asked
  `ReturnValuesOnConditionCheckFailure=ALL_OLD`, the item as stored);
- `IS MISSING` / `IS NOT MISSING` are not evaluated as DynamoDB does.

Here an UPDATE of that grammar (`SET path = ?`, `SET path = path + ?` or `- ?`, `REMOVE path`; a WHERE of
`path = ?`, `path IS MISSING`, `path IS NOT MISSING` joined by AND, naming the whole primary key) runs as
the UpdateItem it stands for, through moto's own `update_item`: the key from the WHERE clause, the other
conditions as its condition expression, with `attribute_exists` on the partition key (an UPDATE never
creates an item). Each statement is answered on its own, as BatchStatementResponse: a failed condition as
`ConditionalCheckFailed`, a rejected expression as `ValidationError`, a missing table as `ResourceNotFound`.
A batch of more than 25 statements is refused whole, as DynamoDB does, and so is a batch of which two
statements name the same item ("Provided list of item keys contains duplicates"). An UPDATE of any other
shape (literals instead of parameters, a clause or operator outside that list) is never handed to moto, which
would crash on it or ignore its WHERE clause: it is answered `ValidationError`, as DynamoDB answers a
statement it cannot parse, and writes nothing. A batch of no UPDATE at all (SELECTs, INSERTs, DELETEs) goes
to moto as before; one that mixes UPDATEs with other statements is refused whole (ValidationException), never
half run by moto.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from moto.dynamodb.exceptions import ConditionalCheckFailed, MockValidationException
from moto.dynamodb.models import DynamoDBBackend

MAX_STATEMENTS = 25
_TOKEN = re.compile(r'\s*(?:("(?:[^"])*")|([A-Za-z_][A-Za-z0-9_]*)|(\?)|(=|\+|-))')


class _UnsupportedError(Exception):
    """Not an UPDATE of the corrected shape: answered `ValidationError`, never handed to moto."""


_NOT_WELL_FORMED = "Statement wasn't well formed, can't be processed"
_DUPLICATES = "Provided list of item keys contains duplicates"


@dataclass
class _Update:
    table: str
    sets: list[str] = field(default_factory=list)
    removes: list[str] = field(default_factory=list)
    conditions: list[str] = field(default_factory=list)
    key_equalities: dict[str, str] = field(default_factory=dict)
    """Attribute -> the value placeholder it is compared with (`:vN`)."""
    names: dict[str, str] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)


class _Parser:
    def __init__(self, statement: str, parameters: list[dict[str, Any]]) -> None:
        self._tokens = _tokens(statement)
        self._at = 0
        self._parameters = parameters
        self._used = 0

    def parse(self) -> _Update:
        self._keyword("UPDATE")
        update = _Update(self._identifier())
        while self._peek_keyword() in ("SET", "REMOVE"):
            if self._next().upper() == "SET":
                target = self._name(update, self._identifier())
                self._expect("=")
                if self._peek() == "?":
                    self._next()
                    update.sets.append(f"{target} = {self._value(update)}")
                else:
                    operand = self._name(update, self._identifier())
                    operator = self._next()
                    if operator not in ("+", "-"):
                        raise _UnsupportedError(operator)
                    self._expect("?")
                    update.sets.append(f"{target} = {operand} {operator} {self._value(update)}")
            else:
                update.removes.append(self._name(update, self._identifier()))
        if not update.sets and not update.removes:
            raise _UnsupportedError("no SET or REMOVE clause")
        self._keyword("WHERE")
        while True:
            self._condition(update)
            if self._peek_keyword() != "AND":
                break
            self._next()
        if self._at != len(self._tokens) or self._used != len(self._parameters):
            raise _UnsupportedError("trailing tokens or parameters")
        return update

    def _condition(self, update: _Update) -> None:
        attribute = self._identifier()
        name = self._name(update, attribute)
        if self._peek_keyword() == "IS":
            self._next()
            negated = self._peek_keyword() == "NOT"
            if negated:
                self._next()
            self._keyword("MISSING")
            update.conditions.append(
                f"attribute_exists({name})" if negated else f"attribute_not_exists({name})"
            )
            return
        self._expect("=")
        self._expect("?")
        value = self._value(update)
        update.key_equalities.setdefault(attribute, value)
        update.conditions.append(f"{name} = {value}")

    def _name(self, update: _Update, attribute: str) -> str:
        for placeholder, known in update.names.items():
            if known == attribute:
                return placeholder
        placeholder = f"#n{len(update.names)}"
        update.names[placeholder] = attribute
        return placeholder

    def _value(self, update: _Update) -> str:
        if self._used >= len(self._parameters):
            raise _UnsupportedError("fewer parameters than placeholders")
        placeholder = f":v{self._used}"
        update.values[placeholder] = self._parameters[self._used]
        self._used += 1
        return placeholder

    def _identifier(self) -> str:
        token = self._next()
        if token.startswith('"') and token.endswith('"') and len(token) > 1:
            return token[1:-1]
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", token):
            return token
        raise _UnsupportedError(token)

    def _keyword(self, word: str) -> None:
        if self._next().upper() != word:
            raise _UnsupportedError(word)

    def _expect(self, token: str) -> None:
        if self._next() != token:
            raise _UnsupportedError(token)

    def _peek(self) -> str | None:
        return self._tokens[self._at] if self._at < len(self._tokens) else None

    def _peek_keyword(self) -> str | None:
        token = self._peek()
        return token.upper() if token is not None and not token.startswith('"') else None

    def _next(self) -> str:
        token = self._peek()
        if token is None:
            raise _UnsupportedError("statement ends early")
        self._at += 1
        return token


def _tokens(statement: str) -> list[str]:
    tokens: list[str] = []
    at = 0
    text = statement.rstrip()
    while at < len(text):
        match = _TOKEN.match(text, at)
        if match is None or match.end() == at:
            raise _UnsupportedError(text[at:])
        tokens.append(next(group for group in match.groups() if group is not None))
        at = match.end()
    return tokens


def _run(backend: DynamoDBBackend, request: dict[str, Any], update: _Update) -> dict[str, Any]:
    """One statement, answered as a BatchStatementResponse."""
    try:
        table = backend.get_table(update.table)
    except Exception:
        return {"Error": {"Code": "ResourceNotFound", "Message": "Requested resource not found"}}
    key_attributes = [table.hash_key_attr] + ([table.range_key_attr] if table.range_key_attr else [])
    if set(key_attributes) - set(update.key_equalities):
        return {
            "Error": {"Code": "ValidationError", "Message": "Where clause does not contain a mandatory key"}
        }
    key = {attribute: update.values[update.key_equalities[attribute]] for attribute in key_attributes}
    hash_name = next(placeholder for placeholder, name in update.names.items() if name == table.hash_key_attr)
    expression = " ".join(
        part
        for part in (
            f"SET {', '.join(update.sets)}" if update.sets else "",
            f"REMOVE {', '.join(update.removes)}" if update.removes else "",
        )
        if part
    )
    condition = " AND ".join([f"attribute_exists({hash_name})", *update.conditions])
    try:
        backend.update_item(
            update.table,
            key,
            update_expression=expression,
            expression_attribute_names=dict(update.names),
            expression_attribute_values=dict(update.values),
            condition_expression=condition,
        )
    except ConditionalCheckFailed:
        failure: dict[str, Any] = {
            "Code": "ConditionalCheckFailed",
            "Message": "The conditional request failed",
        }
        if request.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD":
            stored = backend.get_item(update.table, key)
            if stored is not None:
                failure["Item"] = stored.to_json()["Attributes"]
        return {"Error": failure, "TableName": update.table}
    except MockValidationException as error:
        return {"Error": {"Code": "ValidationError", "Message": error.message}, "TableName": update.table}
    return {"TableName": update.table}


def _is_update(statement: str) -> bool:
    return statement.lstrip()[:6].upper() == "UPDATE"


def _item_of(backend: DynamoDBBackend, update: _Update) -> tuple[str, str] | None:
    """The item a statement names (its table, and its key's values as JSON), or None when it names none."""
    try:
        table = backend.get_table(update.table)
    except Exception:
        return None
    names = [table.hash_key_attr] + ([table.range_key_attr] if table.range_key_attr else [])
    if set(names) - set(update.key_equalities):
        return None
    key = [update.values[update.key_equalities[name]] for name in names]
    return update.table, json.dumps(key, sort_keys=True)


@contextmanager
def partiql_as_dynamodb() -> Iterator[None]:
    """moto's BatchExecuteStatement runs PartiQL UPDATEs of the documented grammar as DynamoDB does, while
    the context lasts."""
    original = DynamoDBBackend.batch_execute_statement

    def batch_execute_statement(
        self: DynamoDBBackend, statements: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        if len(statements) > MAX_STATEMENTS:
            raise MockValidationException(
                "1 validation error detected: Value at 'statements' failed to satisfy constraint: "
                f"Member must have length less than or equal to {MAX_STATEMENTS}"
            )
        is_update = [_is_update(request.get("Statement", "")) for request in statements]
        if not any(is_update):
            return original(self, statements)
        if not all(is_update):
            raise MockValidationException("UPDATE statements mixed with others: not emulated (moto_partiql)")
        updates: list[_Update | str] = []
        for request in statements:
            try:
                updates.append(_Parser(request["Statement"], list(request.get("Parameters", []))).parse())
            except _UnsupportedError as error:
                updates.append(f"{_NOT_WELL_FORMED}: {error}")
        items = [_item_of(self, update) for update in updates if isinstance(update, _Update)]
        named = [item for item in items if item is not None]
        if len(set(named)) != len(named):
            raise MockValidationException(_DUPLICATES)
        return [
            _run(self, request, update)
            if isinstance(update, _Update)
            else {"Error": {"Code": "ValidationError", "Message": update}}
            for request, update in zip(statements, updates, strict=True)
        ]

    batch_execute_statement.__wrapped__ = original  # type: ignore[attr-defined]
    DynamoDBBackend.batch_execute_statement = batch_execute_statement  # type: ignore[method-assign]
    try:
        yield
    finally:
        DynamoDBBackend.batch_execute_statement = original  # type: ignore[method-assign]
