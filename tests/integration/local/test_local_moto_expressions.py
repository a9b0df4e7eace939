"""Expressions made cheap (outbox_local.moto_expressions) answer exactly what moto answers: the same item
after every update, the same verdict for every condition, the same error for every expression moto
rejects; the kept trees and tokens are never changed; and moto's shape, which the layer relies on, is
checked so that an upgrade fails here loudly."""

from __future__ import annotations

import copy
import inspect
import pickle
import re
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import boto3
import moto.dynamodb.comparisons
import moto.dynamodb.models
import moto.dynamodb.models.table
import pytest
from moto import mock_aws
from moto.dynamodb.comparisons import ConditionExpressionParser
from moto.dynamodb.exceptions import InvalidConditionExpression
from moto.dynamodb.models import DynamoDBBackend, dynamodb_backends

from outbox_local import moto_expressions
from outbox_local.moto_expressions import DepthFirstTraverser, UpdateExpressionParser, cheaper_expressions
from outbox_local.moto_transactions import atomic_transactions

_validators: Any = moto_expressions._validators
_backend_module: Any = moto.dynamodb.models
"""Where DynamoDBBackend finds `get_filter_expression`, which parses through moto's own parser (the layer's
while it is in effect)."""
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


# (condition expression, names, values): what the project writes, and what moto's grammar covers besides.
CONDITIONS: list[tuple[str, dict[str, str], dict[str, Any]]] = [
    ("attribute_not_exists(pk)", {}, {}),
    ("attribute_exists(pk) AND #status = :pending", {"#status": "status"}, {":pending": {"S": "PENDING"}}),
    ("attribute_not_exists(pk) OR expires_at <= :now", {}, {":now": {"N": "10"}}),
    (
        "#c = :five AND #l[0] = :one",
        {"#c": "count", "#l": "list"},
        {":five": {"N": "5"}, ":one": {"S": "one"}},
    ),
    ("#c BETWEEN :low AND :high", {"#c": "count"}, {":low": {"N": "1"}, ":high": {"N": "9"}}),
    ("#c IN (:a, :b)", {"#c": "count"}, {":a": {"N": "4"}, ":b": {"N": "5"}}),
    (
        "NOT (#c <> :five) AND size(#l) > :two",
        {"#c": "count", "#l": "list"},
        {":five": {"N": "5"}, ":two": {"N": "2"}},
    ),
    (
        "contains(tags, :x) AND begins_with(#m.#n, :prefix)",
        {"#m": "map", "#n": "name"},
        {":x": {"S": "x"}, ":prefix": {"S": "n"}},
    ),
    (
        "attribute_type(flag, :bool) OR #c >= :big",
        {"#c": "count"},
        {":bool": {"S": "BOOL"}, ":big": {"N": "99"}},
    ),
    ("#c < :five", {"#c": "count"}, {":five": {"N": "5"}}),
    # Rejected by moto: the same error must come out.
    ("#c = :undefined", {"#c": "count"}, {}),
    ("#undefined = :v", {}, {":v": {"N": "1"}}),
    ("#c = = :v", {"#c": "count"}, {":v": {"N": "1"}}),
    ("#c = :v AND", {"#c": "count"}, {":v": {"N": "1"}}),
    ("((#c = :v))", {"#c": "count"}, {":v": {"N": "1"}}),
    ("#c ! :v", {"#c": "count"}, {":v": {"N": "1"}}),
]


def verdict(
    backend: DynamoDBBackend,
    expression: str,
    names: dict[str, str],
    values: dict[str, Any],
    stored: dict[str, Any] = STORED,
) -> Any:
    backend.put_item("t", copy.deepcopy(stored))
    item = backend.get_item("t", {"pk": stored["pk"], "sk": stored["sk"]})
    # The name moto's backend calls, looked up at each call: the layer's while it is in effect.
    parse = _backend_module.get_filter_expression
    try:
        return ("held", parse(expression, dict(names), copy.deepcopy(values)).expr(item))
    except Exception as error:  # the error itself is what is compared
        return ("raised", type(error).__name__, str(error))


def test_every_condition_answers_what_moto_answers(backend: DynamoDBBackend) -> None:
    expected = [verdict(backend, *condition) for condition in CONDITIONS]
    assert [result[1] for result in expected if result[0] == "held"].count(True) >= 6
    assert sum(1 for result in expected if result[0] == "raised") == 6
    with cheaper_expressions():
        for _ in range(3):  # lexed and parsed, then from the kept tokens and conditions
            assert [verdict(backend, *condition) for condition in CONDITIONS] == expected


def test_a_kept_condition_judges_each_item_as_a_new_parse_would(backend: DynamoDBBackend) -> None:
    # Given items that each condition judges differently, judged once by moto as it is
    items = [
        STORED,
        {**STORED, "count": {"N": "4"}, "status": {"S": "PENDING"}},
        {"pk": STORED["pk"], "sk": STORED["sk"]},
        {**STORED, "count": {"N": "100"}, "list": {"L": []}, "flag": {"S": "BOOL"}},
    ]
    expected = [[verdict(backend, *condition, item) for condition in CONDITIONS] for item in items]
    assert len({str(answers) for answers in expected}) == len(items)  # each item judged differently

    # When the conditions are kept, and each item judged with the kept ones, in turn and twice
    with cheaper_expressions():
        for _ in range(2):
            assert [
                [verdict(backend, *condition, item) for condition in CONDITIONS] for item in items
            ] == expected


def test_a_condition_is_parsed_once_per_names_and_values_and_the_caller_s_values_stay_its_own(
    backend: DynamoDBBackend,
) -> None:
    # Given a stored item, and moto's parser, counted
    backend.put_item("t", copy.deepcopy(STORED))
    parsed: list[str] = []
    parse = ConditionExpressionParser.parse

    def counting(self: ConditionExpressionParser) -> Any:
        parsed.append(self.condition_expression or "")
        return parse(self)

    expression, names = "#t = :tags", {"#t": "tags"}
    ConditionExpressionParser.parse = counting  # type: ignore[method-assign]
    try:
        with cheaper_expressions():
            get = _backend_module.get_filter_expression
            values = {":tags": {"SS": ["x", "y"]}}
            first = get(expression, names, values)
            values[":tags"]["SS"].append("z")  # the caller changes its own values after the call
            again = get(expression, names, {":tags": {"SS": ["x", "y"]}})
            other = get(expression, names, {":tags": {"SS": ["x"]}})
            renamed = get(expression, {"#t": "list"}, {":tags": {"SS": ["x", "y"]}})
            item = backend.get_item("t", {"pk": STORED["pk"], "sk": STORED["sk"]})
    finally:
        ConditionExpressionParser.parse = parse  # type: ignore[method-assign]

    # Then each combination was parsed once, and the kept one still compares with the set it was given
    assert parsed == [expression] * 3
    assert again is first
    assert (first.expr(item), other.expr(item), renamed.expr(item)) == (True, False, False)


def _other_values(values: dict[str, Any]) -> dict[str, Any]:
    """The same placeholders and types, other scalar values (a number one more, a text or binary longer)."""
    changed: dict[str, Callable[[Any], Any]] = {
        "N": lambda v: str(int(v) + 1),
        "S": lambda v: v + "z",
        "B": lambda v: v + b"z",
    }
    return {
        name: {
            kind: changed[kind](content) if kind in changed else content for kind, content in value.items()
        }
        for name, value in values.items()
    }


def test_a_condition_of_scalar_values_judges_as_moto_with_each_request_s_own_values(
    backend: DynamoDBBackend,
) -> None:
    # Given every condition with its values, and with other values of the same types, judged by moto as it is
    items = [STORED, {**STORED, "count": {"N": "6"}, "status": {"S": "PENDINGz"}}]
    cases = [
        case
        for condition in CONDITIONS
        for case in (condition, (*condition[:2], _other_values(condition[2])))
    ]
    expected = [[verdict(backend, *case, item) for case in cases] for item in items]
    assert expected[0] != expected[1]  # the other values and the other item change verdicts

    # When parsed once per shape, each request's values put in, Then each verdict is moto's
    with cheaper_expressions():
        for _ in range(2):
            assert [[verdict(backend, *case, item) for case in cases] for item in items] == expected


def test_a_shape_is_kept_per_names_too(backend: DynamoDBBackend) -> None:
    # Given one text and one value type, with names that point it at different attributes, judged by moto
    expression = "#a = :v AND attribute_exists(#b)"
    cases = [
        (expression, {"#a": "count", "#b": "tags"}, {":v": {"N": "5"}}),
        (expression, {"#a": "sk", "#b": "tags"}, {":v": {"N": "5"}}),
        (expression, {"#a": "count", "#b": "missing"}, {":v": {"N": "5"}}),
        (expression, {"#a": "sk", "#b": "tags"}, {":v": {"N": "1"}}),
    ]
    expected = [verdict(backend, *case) for case in cases]
    assert [answer[1] for answer in expected] == [True, False, False, True]

    # When parsed once per shape, Then the names are the condition's as much as its text
    with cheaper_expressions():
        for _ in range(2):
            assert [verdict(backend, *case) for case in cases] == expected


def test_a_condition_is_parsed_once_per_shape_and_the_names_and_values_found_are_moto_s(
    backend: DynamoDBBackend,
) -> None:
    # Given moto's parser, counted, and what it finds in a condition of scalar values
    parsed: list[str] = []
    parse = ConditionExpressionParser.parse

    def counting(self: ConditionExpressionParser) -> Any:
        parsed.append(self.condition_expression or "")
        return parse(self)

    expression = "#s = :status AND #e = :event AND attribute_exists(#s)"
    names = {"#s": "status", "#e": "event_id", "#unused": "x"}

    def found(values: dict[str, Any]) -> Any:
        parser = ConditionExpressionParser(expression, names, values)
        condition = parser.parse()
        return condition, parser.expr_attr_names_found, parser.expr_attr_values_found

    _, names_found, values_found = found({":status": {"S": "PENDING"}, ":event": {"S": "e0"}})
    ConditionExpressionParser.parse = counting  # type: ignore[method-assign]
    try:
        with cheaper_expressions():
            # When conditions of one shape come with their own values (a marker's event ids), and of another
            conditions = [found({":status": {"S": "PENDING"}, ":event": {"S": f"e{n}"}}) for n in range(3)]
            numbers = found({":status": {"S": "PENDING"}, ":event": {"N": "1"}})
    finally:
        ConditionExpressionParser.parse = parse  # type: ignore[method-assign]

    # Then each shape was parsed once, every parser found what moto's finds, and each condition has its values
    assert parsed == [expression, expression]
    assert all((names, values) == (names_found, values_found) for _, names, values in [*conditions, numbers])
    backend.put_item("t", {**copy.deepcopy(STORED), "status": {"S": "PENDING"}, "event_id": {"S": "e1"}})
    item = backend.get_item("t", {"pk": STORED["pk"], "sk": STORED["sk"]})
    assert [condition.expr(item) for condition, *_ in conditions] == [False, True, False]
    assert len({id(condition) for condition, *_ in conditions}) == 3  # each request's own copy


def test_an_update_s_condition_is_parsed_once_for_every_row_it_marks(backend: DynamoDBBackend) -> None:
    # Given rows, one of which has moved on, and moto's parser, counted
    for sk, status in (("1", "PENDING"), ("2", "PENDING"), ("3", "PUBLISHED")):
        backend.put_item("t", {"pk": {"S": "m"}, "sk": {"N": sk}, "status": {"S": status}, "n": {"N": "0"}})
    parsed: list[str] = []
    parse = ConditionExpressionParser.parse

    def counting(self: ConditionExpressionParser) -> Any:
        parsed.append(self.condition_expression or "")
        return parse(self)

    def mark(sk: str) -> str:
        try:
            backend.update_item(
                "t",
                {"pk": {"S": "m"}, "sk": {"N": sk}},
                "SET #s = :done, n = n + :one",
                {"#s": "status"},
                {
                    ":done": {"S": "PUBLISHED"},
                    ":pending": {"S": "PENDING"},
                    ":one": {"N": "1"},
                    ":sk": {"N": sk},
                },
                condition_expression="#s = :pending AND sk = :sk",
            )
        except Exception as error:  # the error is what is compared
            return type(error).__name__
        return "marked"

    ConditionExpressionParser.parse = counting  # type: ignore[method-assign]
    try:
        with cheaper_expressions():
            # When an UpdateItem marks each row under a condition naming its own key
            answers = [mark(sk) for sk in "123"]
    finally:
        ConditionExpressionParser.parse = parse  # type: ignore[method-assign]

    # Then the condition was parsed once, and each row was judged on its own values
    assert parsed == ["#s = :pending AND sk = :sk"]
    assert answers == ["marked", "marked", "ConditionalCheckFailed"]
    stored = [backend.get_item("t", {"pk": {"S": "m"}, "sk": {"N": sk}}) for sk in "123"]
    assert [item.attrs["n"].value for item in stored if item is not None] == ["1", "1", "0"]


def test_a_condition_text_is_lexed_once_and_its_tokens_are_never_shared(backend: DynamoDBBackend) -> None:
    expression, names, values = CONDITIONS[1]
    lexed: list[str | None] = []
    lex = ConditionExpressionParser._lex_condition_expression

    def counting(self: ConditionExpressionParser) -> Any:
        lexed.append(self.condition_expression)
        return lex(self)

    ConditionExpressionParser._lex_condition_expression = counting  # type: ignore[method-assign]
    try:
        with cheaper_expressions():
            first = ConditionExpressionParser(expression, names, values)._lex_condition_expression()
            second = ConditionExpressionParser(expression, names, values)._lex_condition_expression()
            assert verdict(backend, expression, names, values) == ("held", False)  # the item has no status
    finally:
        ConditionExpressionParser._lex_condition_expression = lex  # type: ignore[method-assign]
    assert lexed == [expression]
    assert list(first) == list(second)
    assert all(a.children is not b.children for a, b in zip(first, second, strict=True))


def test_moto_is_as_it_was_after() -> None:
    make, walk, deepcopy, lex, validate = (
        UpdateExpressionParser.__dict__["make"],
        DepthFirstTraverser.traverse_node_recursively,
        _validators.deepcopy,
        ConditionExpressionParser._lex_condition_expression,
        _validators.Validator.validate,
    )
    parse_condition = ConditionExpressionParser.parse
    with cheaper_expressions():
        assert _validators.deepcopy is not deepcopy
        assert ConditionExpressionParser._lex_condition_expression is not lex
        assert ConditionExpressionParser.parse is not parse_condition
    assert ConditionExpressionParser.parse is parse_condition
    assert UpdateExpressionParser.__dict__["make"] is make
    assert DepthFirstTraverser.traverse_node_recursively is walk
    assert _validators.deepcopy is deepcopy is copy.deepcopy
    assert ConditionExpressionParser._lex_condition_expression is lex
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
    # The condition parser lexes the text alone, into named tuples whose children no later step changes.
    parse = inspect.getsource(ConditionExpressionParser.parse)
    assert "nodes = self._lex_condition_expression()" in parse
    lexer = inspect.getsource(ConditionExpressionParser._lex_condition_expression)
    assert "self.condition_expression" in lexer
    assert "expression_attribute" not in lexer
    assert ConditionExpressionParser.Node._fields == ("nonterminal", "kind", "text", "value", "children")
    source = inspect.getsource(ConditionExpressionParser)
    for change in (
        ".children.append",
        ".children.extend",
        ".children.insert",
        ".children.pop",
        "children[0] =",
    ):
        assert change not in source


def _untouched(name: str) -> Any:
    def touched(*_: Any) -> Any:
        raise AssertionError(f"moto's condition parse read a value's content ({name})")

    return touched


_Untouchable = type(
    "_Untouchable",
    (),
    {
        name: _untouched(name)
        for name in (
            "__getattribute__",
            "__str__",
            "__bytes__",
            "__format__",
            "__eq__",
            "__ne__",
            "__lt__",
            "__le__",
            "__gt__",
            "__ge__",
            "__hash__",
            "__bool__",
            "__len__",
            "__iter__",
            "__contains__",
            "__getitem__",
            "__int__",
            "__float__",
            "__index__",
            "__add__",
            "__radd__",
            "__mul__",
            "__mod__",
        )
    },
)
"""A value's content that fails on any look at it: moto's parse may carry it, never read it."""


def test_moto_canary_a_condition_s_parse_reads_no_scalar_value_s_content() -> None:
    """What a shape relies on: moto's parse looks at a value's type only, so a shape parsed with stand-ins is
    the condition parsed with any values of those types (if this fails, shapes are no longer sound)."""
    parsed = 0
    for expression, names, values in CONDITIONS:
        untouchable = {name: {kind: _Untouchable() for kind in value} for name, value in values.items()}
        try:
            moto_parse = ConditionExpressionParser(expression, names, untouchable).parse()
        except (ValueError, KeyError, InvalidConditionExpression):  # rejected before any value is read
            continue
        parsed += 1
        assert type(moto_parse).__module__ == "moto.dynamodb.comparisons"
    assert parsed == len(CONDITIONS) - 6


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


def test_a_transaction_s_conditions_are_parsed_once_too(backend: DynamoDBBackend) -> None:
    # Given the runtime's atomic transactions (which check each condition before writing) and moto's parser,
    # counted
    parsed: list[str] = []
    parse = ConditionExpressionParser.parse

    def counting(self: ConditionExpressionParser) -> Any:
        parsed.append(self.condition_expression or "")
        return parse(self)

    ConditionExpressionParser.parse = counting  # type: ignore[method-assign]
    try:
        with atomic_transactions(), cheaper_expressions():
            # When two transactions put new items under the same condition
            for sk in ("1", "2"):
                backend.transact_write_items(
                    [
                        {
                            "Put": {
                                "TableName": "t",
                                "Item": {"pk": {"S": "tx"}, "sk": {"N": sk}},
                                "ConditionExpression": "attribute_not_exists(#p)",
                                "ExpressionAttributeNames": {"#p": "pk"},
                            }
                        }
                    ]
                )
    finally:
        ConditionExpressionParser.parse = parse  # type: ignore[method-assign]

    # Then the condition was parsed once for both, checks and writes alike, and both items were written
    assert parsed.count("attribute_not_exists(#p)") == 1
    assert [backend.get_item("t", {"pk": {"S": "tx"}, "sk": {"N": sk}}) is not None for sk in "12"] == [
        True,
        True,
    ]
