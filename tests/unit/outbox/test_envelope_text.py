"""The envelope's text is written field by field with the string writer of a compact, ensure_ascii=False
JSON encoder: it must be byte for byte what that encoder writes for the envelope's fields, the payload's
stored text spliced in, whatever the fields hold."""

from __future__ import annotations

import json
from dataclasses import replace
from enum import IntEnum

import pytest

from outbox.model import OutboxEvent
from tests.support.events import event

TEXTS = [
    "o-1",
    'quote " and backslash \\',
    "control \x00\x01\x1f\x7f tab\t newline\n",
    "unicode é ü 中文 😀",
    "separators \u2028\u2029",
    "lone surrogate \ud800",
    "x" * 256,
]


class Version(IntEnum):
    TWO = 2


def encoder_text(outbox_event: OutboxEvent) -> str:
    """The envelope as a compact ensure_ascii=False encoder writes it, with the payload's text spliced in."""
    head = {name: value for name, value in outbox_event.envelope().items() if name != "payload"}
    text = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode(head)
    return f'{text[:-1]},"payload":{outbox_event.payload_json}}}'


@pytest.mark.parametrize("text", TEXTS, ids=repr)
def test_every_field_is_written_as_the_encoder_writes_it(text: str) -> None:
    # Given events whose free-text fields hold characters JSON escapes, or writes as they are
    base = event("o-1", 3, payload={"n": 1, "text": text})
    variants = [
        base,
        replace(base, aggregate_id=text),
        replace(base, correlation_id=text),
        replace(base, aggregate_id=text, correlation_id=text, seq=2**70, schema_version=Version.TWO),
    ]
    for variant in variants:
        # When its envelope is written, then it is the encoder's text, and JSON for the same envelope
        assert variant.envelope_json() == encoder_text(variant)
        assert json.loads(variant.envelope_json())["aggregate_id"] == variant.aggregate_id


def test_an_event_read_from_its_row_forwards_the_stored_payload_text() -> None:
    # Given a row whose payload text an encoder would write otherwise
    row = event("o-1", 1).to_item() | {"payload": {"S": '{"b": 1e400, "a":1.50}'}}
    # When its envelope is written, then the payload's text is the stored one
    read = OutboxEvent.from_item(row)
    assert read.envelope_json() == encoder_text(read)
    assert read.envelope_json().endswith(',"payload":{"b": 1e400, "a":1.50}}')
