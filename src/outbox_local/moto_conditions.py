"""DynamoDB condition expressions in moto, parsed once: the same answers for less CPU. Part of
`outbox_local.moto_expressions` (`cheaper_expressions`), a named correction of moto 5.2 while a local runtime
runs (docs/local.md, "Where moto differs from AWS").

moto lexes and parses a condition anew for every request that carries one, and twice for some: its request
handler parses it to list the names and values it uses, its backend again to evaluate it. A row marker's
PartiQL UPDATE becomes an UpdateItem whose condition (the row's status, generation and event id) takes a
quarter of its CPU that way. Here:

- each text is lexed once (the tokens depend on the text only; each caller gets its own copies);
- each condition is parsed once per combination of its text and the names and values it uses, from a private
  copy of them, and kept: moto only reads a parsed condition (each operator's `expr` reads the item and
  returns a new answer), and the names and values the parse found are handed to each parser as its own;
- where every value it uses is a scalar (S, N, B), once per SHAPE: its text, names and value types. The shape
  is parsed with a stand-in for each value and pickled with each stand-in operand as a persistent id; a
  request's condition is the shape unpickled with its own values put in as operands. That holds only if
  moto's parse makes each value one operand of its own and looks at nothing else of it: a shape is kept only
  when every value came out as one operand (else the combination is parsed as above), and any text moto
  refuses with stand-ins is left to moto's own parse.

A condition the private parse refuses is parsed by moto as it is, with the caller's names and values, so
moto's own error comes out. tests/integration/local/test_local_moto_expressions.py compares every answer with
moto's own, items and values varied, and fails loudly if moto's shape changes under these.
"""

from __future__ import annotations

import io
import json
import pickle
import re
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from moto.dynamodb.comparisons import AttributeValue, ConditionExpressionParser

from outbox_local.moto_imports import as_method

KEPT_CONDITIONS = 1024
"""Texts (their tokens), combinations and shapes kept, of each kind (past this, that kind's all dropped)."""

_PLACEHOLDER = re.compile(r"[:#][A-z0-9\-_]+")
"""A name or value placeholder, as moto's condition lexer reads one (`attribute_regex`)."""
_SCALAR_TYPES = frozenset({"S", "N", "B"})
_STAND_IN = "\x00outbox-stand-in:"
"""Marks the value a shape is parsed with in place of a placeholder's (the placeholder follows)."""

_Lex = Callable[[ConditionExpressionParser], deque[ConditionExpressionParser.Node]]
_Parse = Callable[[ConditionExpressionParser], Any]
_Parsed = tuple[Any, tuple[str, ...], tuple[str, ...]]
"""A parsed condition, and the names and values its parse found (moto's `expr_attr_names_found`, ...)."""
_Shape = tuple[bytes, tuple[str, ...], tuple[str, ...]]
"""A shape: its condition pickled with stand-ins, and the names and values its parse found."""


def _lexed_once(lex: _Lex) -> _Lex:
    """moto's `ConditionExpressionParser._lex_condition_expression`, each text's tokens kept."""
    kept: dict[str | None, tuple[ConditionExpressionParser.Node, ...]] = {}

    def lex_condition_expression(self: ConditionExpressionParser) -> deque[ConditionExpressionParser.Node]:
        text = self.condition_expression
        tokens = kept.get(text)
        if tokens is None:
            # An expression moto cannot lex raises here, as in moto, and is not kept.
            tokens = tuple(lex(self))
            if len(kept) >= KEPT_CONDITIONS:
                kept.clear()
            kept[text] = tokens
        # Tokens are named tuples; each gets its own (empty) children list, as moto's lexer gives it.
        return deque(token._replace(children=[]) for token in tokens)

    return lex_condition_expression


class _StandInsOut(pickle.Pickler):
    """Pickles a parsed condition, each stand-in operand as a persistent id: its placeholder."""

    def __init__(self, file: io.BytesIO) -> None:
        super().__init__(file, pickle.HIGHEST_PROTOCOL)
        self.found: set[str] = set()

    def persistent_id(self, obj: Any) -> str | None:
        if type(obj) is AttributeValue and isinstance(obj.value, str) and obj.value.startswith(_STAND_IN):
            placeholder = obj.value[len(_STAND_IN) :]
            self.found.add(placeholder)
            return placeholder
        return None


class _ValuesIn(pickle.Unpickler):
    """Unpickles a shape with a request's own values where the stand-ins were."""

    def __init__(self, pickled: bytes, values: dict[str, Any]) -> None:
        super().__init__(io.BytesIO(pickled))
        self._values = values

    def persistent_load(self, pid: Any) -> Any:
        return AttributeValue(self._values[pid])


class _ParsedOnce:
    """Conditions kept by combination, and shapes by text, names and value types."""

    def __init__(self, parse: _Parse) -> None:
        self._parse = parse
        self._kept: dict[tuple[str, str, str], _Parsed] = {}
        self._shapes: dict[tuple[str, str, str], _Shape | None] = {}
        self._lock = threading.Lock()

    def parse(self, parser: ConditionExpressionParser) -> Any:
        """moto's `ConditionExpressionParser.parse`, from what is kept where it can be."""
        names, values = parser.expression_attribute_names, parser.expression_attribute_values
        found = self._found(parser.condition_expression, names, values)
        if found is None:
            return self._parse(parser)  # moto's own parse: its answer, or its error
        condition, names_found, values_found = found
        parser.expr_attr_names_found.extend(names_found)
        parser.expr_attr_values_found.extend(values_found)
        return condition

    def _found(
        self, expression: str | None, names: dict[str, str] | None, values: dict[str, Any] | None
    ) -> _Parsed | None:
        if not expression:
            return None
        used = frozenset(_PLACEHOLDER.findall(expression))
        names_used = {name: value for name, value in (names or {}).items() if name in used}
        values_used = {name: value for name, value in (values or {}).items() if name in used}
        try:
            names_key = json.dumps(names_used, sort_keys=True)
        except (TypeError, ValueError):  # not JSON (no request carries such names): not kept
            return None
        if values_used and all(_is_scalar(value) for value in values_used.values()):
            types = json.dumps(sorted((name, next(iter(value))) for name, value in values_used.items()))
            shape_key = (expression, names_key, types)
            if shape_key not in self._shapes:
                self._keep(
                    self._shapes, shape_key, self._shape_of(expression, json.loads(names_key), values_used)
                )
            shape = self._shapes.get(shape_key)
            if shape is not None:
                pickled, names_found, values_found = shape
                return _ValuesIn(pickled, values_used).load(), names_found, values_found
        try:
            values_key = json.dumps(values_used, sort_keys=True)
        except (TypeError, ValueError):  # not JSON (no request carries such values): not kept
            return None
        key = (expression, names_key, values_key)
        parsed = self._kept.get(key)
        if parsed is None:
            # From a private copy: the parsed operands hold parts of the values they were given.
            parsed = self._private_parse(expression, json.loads(names_key), json.loads(values_key))
            if parsed is not None:
                self._keep(self._kept, key, parsed)
        return parsed

    def _shape_of(self, expression: str, names: dict[str, str], values: dict[str, Any]) -> _Shape | None:
        stand_ins = {name: {kind: _STAND_IN + name} for name, value in values.items() for kind in value}
        parsed = self._private_parse(expression, names, stand_ins)
        if parsed is None:
            return None
        condition, names_found, values_found = parsed
        shape = io.BytesIO()
        pickler = _StandInsOut(shape)
        try:
            pickler.dump(condition)
        except (pickle.PicklingError, RecursionError, TypeError, AttributeError):
            return None
        return (shape.getvalue(), names_found, values_found) if pickler.found == set(values) else None

    def _private_parse(
        self, expression: str, names: dict[str, str], values: dict[str, Any]
    ) -> _Parsed | None:
        parser = ConditionExpressionParser(expression, names, values)
        try:
            condition = self._parse(parser)
        except Exception:
            return None
        return condition, tuple(parser.expr_attr_names_found), tuple(parser.expr_attr_values_found)

    def _keep(self, kept: dict[Any, Any], key: Any, value: Any) -> None:
        with self._lock:
            if len(kept) >= KEPT_CONDITIONS:
                kept.clear()
            kept.setdefault(key, value)


def _is_scalar(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and next(iter(value)) in _SCALAR_TYPES


@contextmanager
def conditions_parsed_once() -> Iterator[None]:
    """While in effect, this process's moto lexes each condition text once, and parses each condition once per
    combination of names and values, or per shape."""
    parser: Any = ConditionExpressionParser
    lex, parse = parser._lex_condition_expression, parser.parse
    parser._lex_condition_expression = _lexed_once(lex)
    parser.parse = as_method(_ParsedOnce(parse).parse)
    try:
        yield
    finally:
        parser._lex_condition_expression, parser.parse = lex, parse
