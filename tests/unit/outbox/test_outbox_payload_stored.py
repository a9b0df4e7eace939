"""A payload read back from a row keeps its text and its numbers exactly, and cannot be changed behind it."""

import json
from decimal import Decimal

import pytest

from outbox import payload as payload_module
from outbox.payload import StoredPayload, decode_payload, encode_payload


def test_a_stored_payload_keeps_its_text_and_exact_numbers() -> None:
    text = '{"big":1e400,"n":12345678901234567890123,"p":19.990}'
    payload = decode_payload(text)
    assert isinstance(payload, StoredPayload)
    assert encode_payload(payload) == text
    assert payload["big"] == Decimal("1e400")
    assert payload["n"] == Decimal("12345678901234567890123")
    assert str(payload["p"]) == "19.990"


@pytest.mark.parametrize(
    "change",
    [
        lambda p: p.__setitem__("n", 3),
        lambda p: p.update(n=3),
        lambda p: p.pop("n"),
        lambda p: p.clear(),
        lambda p: p.setdefault("m", 1),
        lambda p: p.__delitem__("n"),
    ],
)
def test_a_stored_payload_is_read_only_so_its_text_cannot_go_stale(change: object) -> None:
    payload = decode_payload('{"n":2}')
    with pytest.raises(TypeError, match="read-only"):
        change(payload)  # type: ignore[operator]
    assert encode_payload(payload) == '{"n":2}'


DEEP = "[" * 100_000 + "]" * 100_000
TEXTS = [
    '{"a":1}',
    ' {"a":1}',
    '{"a":1} ',
    '\n\t{"a": [1, 2.5, "x"]}\r\n',
    '{"a":1} x',
    '{"a":1}{"b":2}',
    '{"a":1,"a":2}',
    ' {"a":1,"a":2}',
    '{"a":{"b":1,"b":1}}',
    '{"a":NaN}',
    '{"a":Infinity}',
    '{"a":',
    "",
    "   ",
    "[]",
    "1",
    '"text"',
    "null",
    "{'a':1}",
    '{"a":1}\u00a0',
    "\u00a0{}",
    '{"deep":' + DEEP + "}",
]


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_a_payload_is_read_as_json_decode_reads_it_whatever_surrounds_it(text: str) -> None:
    # Given the general reading, json's own decode with the same options (whitespace around the value, then
    # the value, then nothing else)
    decoder = json.JSONDecoder(
        parse_constant=payload_module._reject_constant,
        parse_float=Decimal,
        parse_int=Decimal,
        object_pairs_hook=payload_module._unique_keys,
    )
    try:
        expected: object = ("value", decoder.decode(text))
    except (ValueError, RecursionError) as error:
        expected = ("error", type(error))

    # When the stored text is read, compact text by raw_decode alone
    try:
        read: object = ("value", payload_module._parse(text))
    except (ValueError, RecursionError) as error:
        read = ("error", type(error))

    # Then it is the same value, or the same error
    assert read == expected
