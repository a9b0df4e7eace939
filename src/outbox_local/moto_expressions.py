"""DynamoDB update expressions in moto, made cheap while a local runtime runs: the same answers for less CPU
(part of `outbox_local.moto_performance`, which gives the measured gain).

moto parses an update expression twice per UpdateItem (its request handler, then its backend), deep-copies
the tree for its validator (0.2 ms) and walks it ten times, rebuilding each walker's table of node types for
every node. Here each text is parsed once and kept (every user only reads the tree, except moto's
`Validator`, which gets a copy unpickled from the kept tree's pickle); each walk builds its table once and
visits the same nodes in the same order; and the three pure checks (clause counts, overlapping paths, a key
attribute updated), which read only the tree, the names and the table's key, are skipped for a combination
that passed them.

tests/integration/local/test_local_moto_expressions.py compares every answer with moto's own, and fails if
moto's shape changes under these.
"""

from __future__ import annotations

import copy
import functools
import pickle
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import moto.dynamodb.parsing.ast_nodes
import moto.dynamodb.parsing.expressions
import moto.dynamodb.parsing.validators

from outbox_local.moto_imports import as_method

# moto's update-expression modules are untyped (mypy sees none of their names): handled as Any here.
_ast_nodes: Any = moto.dynamodb.parsing.ast_nodes
_validators: Any = moto.dynamodb.parsing.validators
_expressions: Any = moto.dynamodb.parsing.expressions
Node = _ast_nodes.Node
DepthFirstTraverser = _ast_nodes.DepthFirstTraverser
UpdateExpressionParser = _expressions.UpdateExpressionParser

_KEPT_EXPRESSIONS = 1024
"""Distinct expression texts kept, of each kind (an application has a handful; past this, all are dropped)."""


_KEPT_AS = "_outbox_kept_as"
"""Set on the copy of a kept tree that moto's validator works on: the text it was parsed from."""


@dataclass(frozen=True)
class _Kept:
    """What is kept, replaced whole when full (one assignment: a reader sees the old state or the new)."""

    trees: dict[str, Any] = field(default_factory=dict)
    # By id of a kept tree: the tree itself (so its id stays its own while the entry lives), its text, its
    # pickle.
    by_id: dict[int, tuple[Any, str, bytes]] = field(default_factory=dict)
    checked: set[tuple[str, tuple[tuple[str, str], ...], tuple[str, ...]]] = field(default_factory=set)


class _ParsedOnce:
    """Each expression text's tree, parsed by moto once, and its pickle, from which copies are made; and the
    (text, names, table key) combinations that passed moto's pure checks."""

    def __init__(self, parse: Any) -> None:
        self._parse = parse
        self._kept = _Kept()
        self._lock = threading.Lock()

    def make(self, expression: str) -> Any:
        tree = self._kept.trees.get(expression)
        if tree is not None:
            return tree
        tree = self._parse(expression)  # an invalid expression raises here, as in moto, and is not kept
        try:
            pickled = pickle.dumps(tree, pickle.HIGHEST_PROTOCOL)
        except RecursionError:
            return tree  # too deep to keep: moto's own copy, later, fails the way it does without this layer
        with self._lock:
            if len(self._kept.trees) >= _KEPT_EXPRESSIONS:
                self._kept = _Kept()
            kept = self._kept
            # Two threads may parse one new text at once: the first tree kept is every caller's.
            tree = kept.trees.setdefault(expression, tree)
            kept.by_id.setdefault(id(tree), (tree, expression, pickled))
        return tree

    def deepcopy(self, value: Any, memo: dict[int, Any] | None = None) -> Any:
        kept = self._kept.by_id.get(id(value))
        if kept is None or kept[0] is not value or memo is not None:
            return copy.deepcopy(value, memo)
        _, text, pickled = kept
        tree = pickle.loads(pickled)  # noqa: S301 - our own pickle of moto's tree, made in this process
        setattr(tree, _KEPT_AS, text)
        return tree

    def validate(self, validator: Any) -> Any:
        """moto's `Validator.validate`: every walker in turn. The pure checks (a tree's clause counts, its
        overlapping paths, a key attribute updated), which depend on the text, the names and the table's key
        only, are skipped where that combination passed them before."""
        node = validator.node_to_validate
        text = getattr(node, _KEPT_AS, None)
        names = validator.expression_attribute_names or {}
        combination = (text, tuple(sorted(names.items())), tuple(validator.table.table_key_attrs))
        kept = self._kept
        checked = text is not None and combination in kept.checked
        for walker in validator.processors:
            if checked and isinstance(walker, _PURE_CHECKS):
                continue
            node = walker.traverse(node)
        if text is not None and not checked:
            with self._lock:
                kept.checked.add(combination)  # type: ignore[arg-type]  # text is a str here
        return node


_PURE_CHECKS = (
    _validators.ActionCountValidator,
    _validators.OverlappingPathsValidator,
    _validators.UpdateHashRangeKeyValidator,
)
"""Walkers that only raise or return the node they were given, reading nothing but the tree, the names and
the table's key attributes."""


def _traverse_node_recursively(self: Any, node: Any, child_id: int = -1) -> Any:
    """moto's `DepthFirstTraverser.traverse_node_recursively`, with the walker's node types read once per walk
    and each node class tested against them once (moto's node classes are ABCs: `isinstance` is slow)."""
    return _Walk(self).visit(node, child_id)


class _Walk:
    def __init__(self, walker: Any) -> None:
        self._walker = walker
        self._processed = walker.nodes_to_be_processed()

    def visit(self, node: Any, child_id: int) -> Any:
        kind: Any = type(node)  # a class: hashable, though typeshed does not say so for type[Any]
        if not _is_subclass(kind, Node):
            return node
        walker, parent_node = self._walker, node.parent
        if node.children is not None:
            for index, child in enumerate(node.children):
                walker.pre_processing_of_child(node, index)
                self.visit(child, index)
        if _is_subclass(kind, self._processed):
            node = walker.process(node)
            node.parent = parent_node
            if parent_node:
                parent_node.children[child_id] = node
        return node


@functools.cache
def _is_subclass(kind: type, of: type | tuple[type, ...]) -> bool:
    """`issubclass`, answered once per pair: moto's node classes and each walker's tuple of them are few."""
    return issubclass(kind, of)


@contextmanager
def cheaper_expressions() -> Iterator[None]:
    """While in effect, this process's moto parses each update expression once and validates it faster."""
    make = UpdateExpressionParser.__dict__["make"]
    walk = DepthFirstTraverser.traverse_node_recursively
    deepcopy, validate = _validators.deepcopy, _validators.Validator.validate
    parsed = _ParsedOnce(make.__get__(None, UpdateExpressionParser))
    UpdateExpressionParser.make = parsed.make
    _validators.deepcopy = parsed.deepcopy
    _validators.Validator.validate = as_method(parsed.validate)
    DepthFirstTraverser.traverse_node_recursively = _traverse_node_recursively
    try:
        yield
    finally:
        UpdateExpressionParser.make = make
        _validators.deepcopy = deepcopy
        _validators.Validator.validate = validate
        DepthFirstTraverser.traverse_node_recursively = walk
