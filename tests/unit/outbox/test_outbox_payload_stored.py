"""A payload read back from a row keeps its text and its numbers exactly, and cannot be changed behind it."""

import sys
from collections.abc import Callable
from decimal import Decimal

import pytest

from outbox import payload as payload_module
from outbox.errors import InvalidPayloadError
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


def reference_decode_payload(text: str) -> StoredPayload:
    """What `decode_payload` did before compact text was read by `raw_decode` alone: json's own `decode` with
    the same options (whitespace around the value, the value, nothing else), one call deep, as it is."""
    try:
        value = payload_module._DECODER.decode(text)
    except payload_module._DuplicateKeyError:
        raise InvalidPayloadError("payload has duplicate keys", field="payload") from None
    except (ValueError, RecursionError):
        raise InvalidPayloadError("payload is not valid JSON", field="payload") from None
    if not isinstance(value, dict):
        raise InvalidPayloadError("payload must be a JSON object", field="payload")
    stored = StoredPayload(value)
    stored.text = text
    return stored


def outcome(decode: Callable[[str], StoredPayload], text: str) -> tuple[str, object, object]:
    try:
        read = decode(text)
    except InvalidPayloadError as error:
        return ("refused", str(error), error.field)
    return ("read", dict(read), read.text)


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_a_payload_is_read_as_json_decode_reads_it_whatever_surrounds_it(text: str) -> None:
    # Given / When the stored text is read, compact text by raw_decode alone, the rest by decode
    # Then it is the same payload, or refused with the same words, as decode alone read it
    assert outcome(decode_payload, text) == outcome(reference_decode_payload, text)


@pytest.mark.parametrize(("before", "after"), [("", ""), (" ", ""), ("", " "), ("\t", "\r\n"), ("", " x")])
def test_a_deeply_nested_payload_is_read_or_refused_at_the_same_depth_as_before(
    before: str, after: str
) -> None:
    # Given payloads nested to every depth around where the interpreter's recursion limit refuses them
    # (json's C scanner counts its depth with the interpreter's own frames)
    limit = sys.getrecursionlimit()
    texts = [before + '{"a":' * depth + "1" + "}" * depth + after for depth in range(limit - 300, limit + 10)]

    # When each is read, at the same call depth as the reading before this change
    # Then each is read, or refused, exactly where it was: no path reads a payload deeper than it did
    differ = [
        text.count("{")
        for text in texts
        if outcome(decode_payload, text) != outcome(reference_decode_payload, text)
    ]
    assert differ == []
    # (and the range holds the limit: some are refused, and the rest read unless trailing data spoils all)
    outcomes = {outcome(decode_payload, text)[0] for text in texts}
    assert outcomes == ({"read", "refused"} if after.isspace() or not after else {"refused"})
