"""Update expressions made cheap (outbox_local.moto_expressions) answer exactly what moto answers: the same
item after every update, the same error for every expression moto rejects; the kept trees are never changed;
and moto's shape, which the layer relies on, is checked so that an upgrade fails here loudly."""

from __future__ import annotations

import copy
import inspect
import pickle
import re
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.dynamodb.models import DynamoDBBackend, dynamodb_backends

from outbox_local import moto_expressions
from outbox_local.moto_expressions import DepthFirstTraverser, UpdateExpressionParser, cheaper_expressions

_validators: Any = moto_expressions._validators
REGION = "us-east-1"
ACCOUNT = "123456789012"

STORED: dict[str, Any] = {
    "pk": {"S": "a"},
    "sk": {"N": "1"},
    "count": {"N": "5"},
    "tags": {"SS": ["x", "y"]},
    "list": {"L": [{"S": "one"}, {"N": "2"}, {"M": {"deep": {"S": "v"}}}]},
    "map": {"M": {"inner": {"M": {"leaf": {"N": "1"}}}, "name": {"S": "n"}}},
    "blob": {"B": b"\x00\x01"},
    "flag": {"BOOL": True},
    "nothing": {"NULL": True},
}

# (update expression, names, values): what the project writes, and what moto's grammar covers besides.
UPDATES: list[tuple[str, dict[str, str], dict[str, Any]]] = [
    (
        "SET #last = :seq, #event = :event, #at = :at, #kind = :kind",
        {"#last": "last_seq", "#event": "event_id", "#at": "at", "#kind": "kind"},
        {":seq": {"N": "5"}, ":event": {"S": "e"}, ":at": {"S": "2026-12-01T00:00:00Z"}, ":kind": {"S": "k"}},
    ),
    (
        "SET #last = :seq ADD #skipped :skipped",
        {"#last": "last_seq", "#skipped": "skipped"},
        {":seq": {"N": "7"}, ":skipped": {"N": "2"}},
    ),
    (
        "SET #status = :status, last_seq = :seq",
        {"#status": "status"},
        {":status": {"S": "S"}, ":seq": {"N": "1"}},
    ),
    ("SET #c = #c + :one", {"#c": "count"}, {":one": {"N": "1"}}),
    ("SET #c = :ten - #c", {"#c": "count"}, {":ten": {"N": "10"}}),
    ("SET fresh = if_not_exists(fresh, :zero)", {}, {":zero": {"N": "0"}}),
    ("SET #l = list_append(#l, :more)", {"#l": "list"}, {":more": {"L": [{"S": "three"}]}}),
    ("SET #l = list_append(:first, #l)", {"#l": "list"}, {":first": {"L": [{"S": "zero"}]}}),
    (
        "SET #m.#i.#f = :v, #m.#n = :w",
        {"#m": "map", "#i": "inner", "#f": "leaf", "#n": "name"},
        {":v": {"N": "9"}, ":w": {"S": "w"}},
    ),
    ("SET #l[2].deep = :v", {"#l": "list"}, {":v": {"S": "changed"}}),
    ("REMOVE #l[0], flag", {"#l": "list"}, {}),
    ("REMOVE #m.#i", {"#m": "map", "#i": "inner"}, {}),
    ("ADD tags :more, #c :n", {"#c": "count"}, {":more": {"SS": ["z"]}, ":n": {"N": "-3"}}),
    ("DELETE tags :gone", {}, {":gone": {"SS": ["x"]}}),
    (
        "SET a = :v REMOVE #c ADD newset :s DELETE tags :gone",
        {"#c": "count"},
        {":v": {"S": "a"}, ":s": {"NS": ["1"]}, ":gone": {"SS": ["y"]}},
    ),
    # Rejected by moto, each for its own reason: the same error must come out.
    ("SET pk = :v", {}, {":v": {"S": "other"}}),
    ("SET a = :v, a = :w", {}, {":v": {"S": "1"}, ":w": {"S": "2"}}),
    ("SET a = :v SET b = :w", {}, {":v": {"S": "1"}, ":w": {"S": "2"}}),
    ("SET a = :undefined", {}, {}),
    ("SET #undefined = :v", {}, {":v": {"S": "1"}}),
    ("SET #c = #c + :text", {"#c": "count"}, {":text": {"S": "x"}}),
    ("SET #missing.#p = :v", {"#missing": "missing", "#p": "path"}, {":v": {"S": "1"}}),
    ("ADD #b :n", {"#b": "blob"}, {":n": {"N": "1"}}),
    ("SET a = ", {}, {}),
    ("SET", {}, {}),
]


@pytest.fixture
def backend() -> Iterator[DynamoDBBackend]:
    with mock_aws():
        boto3.client("dynamodb", region_name=REGION).create_table(
            TableName="t",
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "N"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        yield dynamodb_backends[ACCOUNT][REGION]


def outcome(backend: DynamoDBBackend, expression: str, names: dict[str, str], values: dict[str, Any]) -> Any:
    """The stored item after the update from STORED, or the error moto raised, as comparable values."""
    backend.put_item("t", copy.deepcopy(STORED))
    key = {"pk": STORED["pk"], "sk": STORED["sk"]}
    try:
        backend.update_item("t", key, expression, copy.deepcopy(names), copy.deepcopy(values))
    except Exception as error:  # the error itself is what is compared
        return ("raised", type(error).__name__, str(error))
    item = backend.get_item("t", key)
    assert item is not None
    return ("stored", item.to_json()["Attributes"])


@pytest.mark.parametrize(("expression", "names", "values"), UPDATES, ids=[u[0] for u in UPDATES])
def test_every_update_answers_what_moto_answers(
    backend: DynamoDBBackend, expression: str, names: dict[str, str], values: dict[str, Any]
) -> None:
    expected = outcome(backend, expression, names, values)
    with cheaper_expressions():
        first = outcome(backend, expression, names, values)
        again = outcome(backend, expression, names, values)  # the kept tree, this time
    assert first == expected
    assert again == expected


def test_the_whole_set_answers_as_moto_when_run_in_turn_with_trees_kept(backend: DynamoDBBackend) -> None:
    expected = [outcome(backend, *update) for update in UPDATES]
    assert (
        sum(1 for result in expected if result[0] == "raised") == 10
    )  # the rejected ones are really rejected
    with cheaper_expressions():
        for _ in range(3):
            assert [outcome(backend, *update) for update in UPDATES] == expected


def test_a_kept_tree_is_never_changed_by_the_updates_that_use_it(backend: DynamoDBBackend) -> None:
    expression, names, values = UPDATES[1]
    with cheaper_expressions():
        tree = UpdateExpressionParser.make(expression)
        before = pickle.dumps(tree)
        for _ in range(3):
            outcome(backend, expression, names, values)
        assert UpdateExpressionParser.make(expression) is tree
        assert pickle.dumps(tree) == before


def test_the_pure_checks_are_walked_once_per_combination_and_still_refuse_a_new_one(
    backend: DynamoDBBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    walked: list[str] = []
    traverse = DepthFirstTraverser.traverse

    def counting(self: Any, node: Any) -> Any:
        walked.append(type(self).__name__)
        return traverse(self, node)

    monkeypatch.setattr(DepthFirstTraverser, "traverse", counting)
    expression, values = "SET #k = :v", {":v": {"S": "new"}}
    with cheaper_expressions():
        for _ in range(3):
            assert outcome(backend, expression, {"#k": "attr"}, values)[0] == "stored"
        refused = outcome(backend, expression, {"#k": "pk"}, values)  # the same text, naming the key
    assert walked.count("ActionCountValidator") == 2  # the first update, then the new combination
    assert walked.count("UpdateHashRangeKeyValidator") == 2
    assert walked.count("ExecuteOperations") == 3  # the walks that do the work: every update that got there
    assert refused[:2] == ("raised", "UpdateHashRangeKeyException")


def test_past_its_bound_the_cache_starts_again_and_still_answers(
    backend: DynamoDBBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(moto_expressions, "_KEPT_EXPRESSIONS", 2)
    expected = [outcome(backend, *update) for update in UPDATES[:6]]
    with cheaper_expressions():
        assert [outcome(backend, *update) for update in UPDATES[:6]] == expected


def test_moto_is_as_it_was_after() -> None:
    make, walk, deepcopy, validate = (
        UpdateExpressionParser.__dict__["make"],
        DepthFirstTraverser.traverse_node_recursively,
        _validators.deepcopy,
        _validators.Validator.validate,
    )
    with cheaper_expressions():
        assert _validators.deepcopy is not deepcopy
    assert UpdateExpressionParser.__dict__["make"] is make
    assert DepthFirstTraverser.traverse_node_recursively is walk
    assert _validators.deepcopy is deepcopy is copy.deepcopy
    assert _validators.Validator.validate is validate


def test_moto_canary_the_shape_the_layer_relies_on() -> None:
    """moto 5.2's shape: if an upgrade changes any of it, re-profile and re-check the layer."""
    assert isinstance(UpdateExpressionParser.__dict__["make"], classmethod)
    # The validation walks the walkers in turn; the pure checks only raise or return their node.
    validate = inspect.getsource(_validators.Validator.validate)
    assert "for processor in self.processors:" in validate
    assert "n = processor.traverse(n)" in validate
    processors = inspect.getsource(_validators.UpdateExpressionValidator.get_ast_processors)
    for pure in ("ActionCountValidator()", "OverlappingPathsValidator(", "UpdateHashRangeKeyValidator("):
        assert pure in processors
    for pure in moto_expressions._PURE_CHECKS:
        source = inspect.getsource(pure)
        assert "return node" in source
        assert not re.search(r"\.(children|parent)(\[[^\]]*\])*\s*=[^=]", source)  # reads, never sets
    # The validator copies the tree it is given before working on it: why a kept tree can be shared.
    assert "deepcopy(expression)" in inspect.getsource(_validators.Validator.__init__)
    assert _validators.deepcopy is copy.deepcopy
    # The backend parses the text and hands the tree to the validators only.
    update_item = inspect.getsource(DynamoDBBackend.update_item)
    assert "UpdateExpressionParser.make(update_expression)" in update_item
    assert update_item.count("update_expression_ast") == 3
    # The walk the layer re-does: its hooks and its per-node processing.
    walk = inspect.getsource(DepthFirstTraverser.traverse_node_recursively)
    for hook in ("pre_processing_of_child", "nodes_to_be_processed", "self.process(node)"):
        assert hook in walk
    for walker in DepthFirstTraverser.__subclasses__():
        assert "traverse_node_recursively" not in vars(walker)
        assert "traverse" not in vars(walker)


def test_two_threads_parsing_one_new_text_share_one_kept_tree() -> None:
    both_parsing = threading.Barrier(2)

    def slow_parse(expression: str) -> Any:
        both_parsing.wait(timeout=10)  # both threads are inside the parse before either keeps its tree
        return UpdateExpressionParser.make(expression)

    parsed = moto_expressions._ParsedOnce(slow_parse)
    with ThreadPoolExecutor(max_workers=2) as pool:
        trees = list(pool.map(parsed.make, ["SET a = :v", "SET a = :v"]))
    assert trees[0] is trees[1]
    assert list(parsed._kept.trees) == ["SET a = :v"]
    assert [entry[0] for entry in parsed._kept.by_id.values()] == [trees[0]]
    copied = parsed.deepcopy(trees[0])
    assert copied is not trees[0]
    assert getattr(copied, moto_expressions._KEPT_AS) == "SET a = :v"
    other = {"not": ["kept"]}
    assert parsed.deepcopy(other) == other
    assert parsed.deepcopy(other) is not other


def test_an_expression_too_deep_to_keep_fails_as_moto_fails(backend: DynamoDBBackend) -> None:
    terms = 300
    expression = "SET a = " + " + ".join(f":v{index}" for index in range(terms))
    values = {f":v{index}": {"N": "1"} for index in range(terms)}
    expected = outcome(backend, expression, {}, values)
    with cheaper_expressions():
        assert outcome(backend, expression, {}, values) == expected
    assert expected[:2] == ("raised", "RecursionError")
