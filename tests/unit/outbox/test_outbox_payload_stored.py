"""A payload read back from a row keeps its text and its numbers exactly, and cannot be changed behind it."""

from decimal import Decimal

import pytest

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
