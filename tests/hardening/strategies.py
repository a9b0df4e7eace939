"""Hypothesis strategies shared by the catalogue: hostile text, JSON documents, DynamoDB attribute values.

Marker strings (`checks.marker`) go where a leak would matter: payload values, key names, header values and
fake secrets. Never in ids (event_id, aggregate_id, correlation ids), which are logged on purpose.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from hypothesis import strategies as st

from tests.hardening.checks import marker

# Text that broke, or could break, a parser: non-ASCII digits (Decimal and int() read them as digits),
# numbers past any float or 64-bit integer, signs and exponents, controls, direction marks.
TRICKY_TEXTS = (
    "",
    " ",
    "\t\n",
    "\u0669.\u0669\u0669",
    "\uff19.\uff19\uff19",
    "1\u0660",
    "\u0662\u0660\u0662\u0666-11-29T12:00:00.123Z",
    "1e400",
    "-1e400",
    "9" * 5000,
    "1.5",
    "-1",
    "0",
    "+1",
    " 1",
    "1_000",
    "0x10",
    "NaN",
    "Infinity",
    "null",
    "true",
    "\x00",
    "\x7f",
    "\u202e",
    "\ufeff",
    "\u00e9",
    "\U0001f600",
    "a#b",
    "../../etc/passwd",
    "%2e%2e%2f",
    "<script>",
    "' OR 1=1 --",
    "${jndi:x}",
)

markers = st.integers(min_value=1, max_value=9999).map(marker)
"""A marker string: must never show in logs, printed output or a stored reason."""

short_text = st.text(max_size=16)
tricky_text = st.sampled_from(TRICKY_TEXTS)


def _around(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.builds(lambda before, middle, after: before + middle + after, short_text, inner, short_text)


marked_text = st.one_of(markers, _around(markers))
"""Text holding a marker, alone or inside other text."""

unmarked_text = st.one_of(tricky_text, short_text, st.text(min_size=100, max_size=400))
"""Hostile text without markers: for ids and other fields that are logged on purpose."""
hostile_text = st.one_of(unmarked_text, marked_text)

json_numbers = st.one_of(
    st.integers(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.decimals(allow_nan=False, allow_infinity=False),
)


def json_values_of(texts: st.SearchStrategy[str], keys: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    return st.recursive(
        st.one_of(st.none(), st.booleans(), json_numbers, texts),
        lambda children: st.one_of(
            st.lists(children, max_size=4), st.dictionaries(keys, children, max_size=4)
        ),
        max_leaves=12,
    )


json_keys = st.one_of(short_text, markers, tricky_text)
"""Object keys: marker key names must never be logged either."""
json_values = json_values_of(hostile_text, json_keys)
unmarked_json_values = json_values_of(unmarked_text, st.one_of(short_text, tricky_text))
json_objects = st.dictionaries(json_keys, json_values, max_size=5)


def json_text(value: Any) -> str:
    """JSON text of a generated value, Decimals written as their digits (so 1E+400 stays a number)."""
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dict):
        members = (f"{json.dumps(key, ensure_ascii=False)}:{json_text(item)}" for key, item in value.items())
        return "{" + ",".join(members) + "}"
    if isinstance(value, list):
        return "[" + ",".join(json_text(item) for item in value) + "]"
    return json.dumps(value, ensure_ascii=False)


# What makes JSON text hard: exotic numbers, lone-surrogate escapes, duplicate keys, NaN, nesting, truncation.
_JSON_ODDITIES = (
    '{"a":1e400}',
    '{"a":-1e400}',
    '{"a":' + "9" * 5000 + "}",
    '{"a":1E-400}',
    '{"\\ud800":1}',
    '{"a":"\\udfff"}',
    '{"a":1,"a":2}',
    '{"a":NaN}',
    '{"a":Infinity}',
    "[" * 5000 + "]" * 5000,
    '{"a":',
    "{}",
    "[]",
    '""',
    "null",
    "0",
    "\ufeff{}",
    '{"a":1}{"b":2}',
    "{'a': 1}",
)


def raw_json_texts(documents: st.SearchStrategy[Any] = json_values) -> st.SearchStrategy[str]:
    """Text that is JSON, almost JSON, or JSON with the oddities above spliced in."""
    return st.one_of(
        documents.map(json_text),
        st.sampled_from(_JSON_ODDITIES),
        st.builds(lambda text, cut: text[:cut], documents.map(json_text), st.integers(0, 40)),
        st.text(alphabet='{}[]":,0123456789.eE+-tfnaulsr \\', max_size=40),
        hostile_text,
    )


def mutated(
    base: dict[str, Any], *, values: st.SearchStrategy[Any] = json_values
) -> st.SearchStrategy[dict[str, Any]]:
    """`base` with a few fields replaced, removed or added (marker key names among the added)."""

    @st.composite
    def build(draw: Callable[..., Any]) -> dict[str, Any]:
        document = dict(base)
        for _ in range(draw(st.integers(1, 3))):
            change = draw(st.sampled_from(("replace", "remove", "add")))
            if change == "add" or not document:
                document[draw(json_keys)] = draw(values)
            elif change == "remove":
                document.pop(draw(st.sampled_from(sorted(document))))
            else:
                document[draw(st.sampled_from(sorted(document)))] = draw(values)
        return document

    return build()


# --- DynamoDB attribute values ----------------------------------------------------------------------

# DynamoDB keeps 38 significant digits and exponents up to 125; made-up records go past both, and past the
# 4,300 digits Python's int() spells.
number_texts = st.one_of(
    st.integers(min_value=-(10**38) + 1, max_value=10**38 - 1).map(str),
    st.decimals(allow_nan=False, allow_infinity=False, places=3).map(str),
    st.sampled_from(
        (
            "1.5",
            "0",
            "-1",
            "1e3",
            "1E+2",
            "1E+125",
            "0.0",
            "-0",
            "1e400",
            "9" * 60,
            "9" * 5000,
            "abc",
            "",
            " 1",
        )
    ),
)
binary_texts = st.binary(max_size=8).map(lambda data: base64.b64encode(data).decode("ascii"))


def attribute_values(
    strings: st.SearchStrategy[str] = hostile_text, values: st.SearchStrategy[Any] = json_values
) -> st.SearchStrategy[dict[str, Any]]:
    """Every DynamoDB attribute type as a stream record carries it (Binary as base64 text), with contents
    DynamoDB never stores (empty sets, numbers it cannot hold, NULL false), and wrappers it never sends:
    contents of the wrong JSON type, two types at once, an unknown type letter, none, no map at all."""
    scalar = st.one_of(
        strings.map(lambda text: {"S": text}),
        number_texts.map(lambda text: {"N": text}),
        binary_texts.map(lambda text: {"B": text}),
        st.lists(strings, max_size=3).map(lambda texts: {"SS": texts}),
        st.lists(number_texts, max_size=3).map(lambda texts: {"NS": texts}),
        st.lists(binary_texts, max_size=3).map(lambda texts: {"BS": texts}),
        st.booleans().map(lambda flag: {"NULL": flag}),
        st.booleans().map(lambda flag: {"BOOL": flag}),
    )
    wrong = st.one_of(
        st.just({}),
        st.builds(lambda kind, value: {kind: value}, st.sampled_from(("S", "N", "B", "M", "L", "X")), values),
        st.just({"S": "a", "N": "1"}),
        st.sampled_from((1, "S", "xNx", ["S"], True)),
    )
    nested = st.recursive(
        scalar,
        lambda children: st.one_of(
            st.dictionaries(json_keys, children, max_size=3).map(lambda items: {"M": items}),
            st.lists(children, max_size=3).map(lambda items: {"L": items}),
        ),
        max_leaves=6,
    )
    return st.one_of(nested, wrong)


def stored_attribute_values(
    strings: st.SearchStrategy[str], *, as_sent: bool = False
) -> st.SearchStrategy[dict[str, Any]]:
    """Attribute values DynamoDB stores, of every type: what another writer can put (Binary as bytes, as boto3
    takes it), or (`as_sent`) what a stream record then carries (Binary as base64 text)."""
    numbers = st.integers(min_value=-(10**30), max_value=10**30).map(str)
    binary = st.binary(min_size=1, max_size=8)
    binaries = binary.map(lambda data: base64.b64encode(data).decode("ascii")) if as_sent else binary
    scalar = st.one_of(
        strings.map(lambda text: {"S": text}),
        numbers.map(lambda text: {"N": text}),
        binaries.map(lambda data: {"B": data}),
        st.lists(strings, min_size=1, max_size=3, unique=True).map(lambda texts: {"SS": texts}),
        st.lists(numbers, min_size=1, max_size=3, unique=True).map(lambda texts: {"NS": texts}),
        st.just({"NULL": True}),
        st.booleans().map(lambda flag: {"BOOL": flag}),
    )
    # DynamoDB names are never empty, map keys included (moto's stream cannot even serialize an empty one).
    names = st.text(min_size=1, max_size=16)
    return st.recursive(
        scalar,
        lambda children: st.one_of(
            st.dictionaries(names, children, max_size=3).map(lambda items: {"M": items}),
            st.lists(children, max_size=3).map(lambda items: {"L": items}),
        ),
        max_leaves=5,
    )
