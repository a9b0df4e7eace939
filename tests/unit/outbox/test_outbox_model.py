"""The outbox row contract (docs/contracts.md, "Outbox row") as a value object. Pure: no AWS."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from outbox.errors import InvalidEventError, InvalidOutboxRowError, InvalidPayloadError
from outbox.model import (
    FAILED_INDEX_SHARDS,
    OutboxEvent,
    OutboxStatus,
    failed_shard,
    is_reserved,
    truncate_error,
)

MOMENT = datetime(2026, 11, 29, 12, 0, 0, 123000, tzinfo=UTC)


def event(**overrides: Any) -> OutboxEvent:
    arguments: dict[str, Any] = {
        "aggregate_type": "Order",
        "aggregate_id": "o-1",
        "seq": 1,
        "event_type": "OrderPlaced",
        "payload": {"total": "9.99"},
        "correlation_id": "req-1",
        "clock": lambda: MOMENT,
        "new_id": lambda: uuid.UUID(int=7),
    }
    arguments.update(overrides)
    return OutboxEvent.new(**arguments)


def test_a_new_event_is_pending_and_its_row_follows_the_contract() -> None:
    # Given / When a new event
    item = event().to_item()
    # Then its row has exactly the contract's attributes and types
    assert item == {
        "aggregate_key": {"S": "Order#o-1"},
        "seq": {"N": "1"},
        "event_id": {"S": str(uuid.UUID(int=7))},
        "event_type": {"S": "OrderPlaced"},
        "schema_version": {"N": "1"},
        "aggregate_type": {"S": "Order"},
        "aggregate_id": {"S": "o-1"},
        "payload": {"S": '{"total":"9.99"}'},
        "occurred_at": {"S": "2026-11-29T12:00:00.123Z"},
        "correlation_id": {"S": "req-1"},
        "status": {"S": "PENDING"},
        "attempts": {"N": "0"},
    }


def test_the_failed_shard_is_a_stable_crc32_bucket() -> None:
    # Given / When / Then the failed index's shard is the same answer in any language (crc32), in range
    assert failed_shard("Order#o-1") == 763223357 % FAILED_INDEX_SHARDS
    assert all(0 <= failed_shard(f"Order#o-{n}") < FAILED_INDEX_SHARDS for n in range(100))


def test_no_event_can_have_a_reserved_key() -> None:
    # Given / When / Then the outbox's own items start with '#', which an aggregate_type never does
    assert is_reserved("#audit#Order#o-1")
    assert is_reserved("#sweeper")
    assert not is_reserved(event().aggregate_key)
    with pytest.raises(InvalidEventError):
        event(aggregate_type="#audit")


def test_rows_round_trip_in_every_status() -> None:
    # Given events in each status / When written and read back / Then they are equal
    cases: list[tuple[OutboxStatus, dict[str, Any]]] = [
        (OutboxStatus.PENDING, {}),
        (OutboxStatus.PUBLISHED, {"expires_at": 1_800_000_000}),
        (OutboxStatus.FAILED, {"attempts": 3, "last_error": "SNS said no", "expires_at": 1_800_000_000}),
    ]
    for status, extra in cases:
        original = event().with_status(status, **extra)
        assert OutboxEvent.from_item(original.to_item()) == original


def test_the_envelope_has_exactly_the_published_fields() -> None:
    # Given / When / Then
    assert event().envelope() == {
        "event_id": str(uuid.UUID(int=7)),
        "event_type": "OrderPlaced",
        "schema_version": 1,
        "aggregate_type": "Order",
        "aggregate_id": "o-1",
        "seq": 1,
        "occurred_at": "2026-11-29T12:00:00.123Z",
        "correlation_id": "req-1",
        "payload": {"total": "9.99"},
    }


@pytest.mark.parametrize("payload", [[1, 2], "text", None, 42])
def test_a_payload_that_is_not_a_json_object_is_refused(payload: Any) -> None:
    # Given / When / Then
    with pytest.raises(InvalidPayloadError) as raised:
        event(payload=payload)
    assert raised.value.field == "payload"


@pytest.mark.parametrize("payload", [{"when": datetime.now(UTC)}, {"x": float("nan")}, {"s": {1, 2}}])
def test_a_payload_json_cannot_represent_is_refused_without_echoing_it(payload: Any) -> None:
    # Given / When / Then: the message names no value (payloads may be sensitive)
    with pytest.raises(InvalidPayloadError) as raised:
        event(payload=payload)
    assert "nan" not in str(raised.value).lower()


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"aggregate_type": "Or#der"}, "aggregate_type"),
        ({"aggregate_type": "Order\n"}, "aggregate_type"),
        ({"aggregate_id": ""}, "aggregate_id"),
        ({"seq": 0}, "seq"),
        ({"seq": True}, "seq"),
        ({"event_type": "Order Placed"}, "event_type"),
        ({"schema_version": 0}, "schema_version"),
        ({"correlation_id": ""}, "correlation_id"),
        # Not text at all: a length check alone would pass these, a pattern raise TypeError, the envelope fail
        *(
            ({name: value}, name)
            for name in ("aggregate_type", "aggregate_id", "event_type", "correlation_id")
            for value in (["o-1"], ("o", "1"), {"id": "o-1"}, 7, b"o-1")
        ),
    ],
)
def test_contract_breaches_are_typed_and_name_the_field(overrides: dict[str, Any], field: str) -> None:
    # Given / When / Then
    with pytest.raises(InvalidEventError) as raised:
        event(**overrides)
    assert raised.value.field == field


RULES = [
    ("aggregate_type", "Or#der", "aggregate_type must be 1-64 letters, digits, '_', '.', '-' (no '#')"),
    ("aggregate_id", "x" * 257, "aggregate_id must be 1-256 characters"),
    ("seq", 0, "seq must be an integer >= 1"),
    ("event_type", "Order Placed", "event_type must be 1-128 letters, digits, '_', '.', '-'"),
    ("schema_version", 0, "schema_version must be an integer >= 1"),
    ("event_id", "not-a-uuid", "event_id must be a UUID"),
    ("occurred_at", "yesterday", "occurred_at must be ISO-8601 UTC like 2026-11-29T12:00:00.123Z"),
    ("correlation_id", "", "correlation_id must be 1-256 characters"),
    ("attempts", -1, "attempts must be >= 0"),
    ("expires_at", 1, "a PENDING row must not expire"),
]
"""Every rule of what an event holds, in the order they are checked, with a value that breaks it and the
message it gives (a poison row's last_error carries it)."""


@pytest.mark.parametrize(("field", "value", "message"), RULES, ids=[rule[0] for rule in RULES])
def test_each_rule_names_its_field_with_its_message(field: str, value: Any, message: str) -> None:
    # Given / When / Then
    with pytest.raises(InvalidEventError) as raised:
        replace(event(), **{field: value})
    assert (raised.value.field, str(raised.value)) == (field, message)


@pytest.mark.parametrize("first", range(len(RULES)))
def test_an_event_breaking_several_rules_is_named_by_the_first_checked(first: int) -> None:
    # Given an event breaking this rule and every later one
    broken: dict[str, Any] = {field: value for field, value, _ in RULES[first:]}
    # When / Then the error names this one
    with pytest.raises(InvalidEventError) as raised:
        replace(event(), **broken)
    assert raised.value.field == RULES[first][0]


def test_a_pending_row_never_expires() -> None:
    # Given / When / Then
    with pytest.raises(InvalidEventError) as raised:
        replace(event(), expires_at=1)
    assert raised.value.field == "expires_at"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda item: item.pop("event_id"), "event_id"),
        (lambda item: item.update(seq={"S": "1"}), "seq"),
        (lambda item: item.update(seq={"N": "1.5"}), "seq"),
        (lambda item: item.update(status={"S": "LOST"}), "status"),
        (lambda item: item.update(payload={"S": "[1]"}), "payload"),
        (lambda item: item.update(payload={"S": "{nope"}), "payload"),
        (lambda item: item.update(payload={"S": '{"a": 1, "a": 2}'}), "payload"),
        (lambda item: item.update(aggregate_key={"S": "Order#other"}), "aggregate_key"),
        (lambda item: item.update(occurred_at={"S": "yesterday"}), "occurred_at"),
    ],
)
def test_a_row_breaking_the_contract_is_a_poison_row(change: Any, field: str) -> None:
    # Given a stored row damaged in one attribute
    item = event().to_item()
    change(item)
    # When / Then reading it names that attribute
    with pytest.raises(InvalidOutboxRowError) as raised:
        OutboxEvent.from_item(item)
    assert raised.value.field == field


def test_the_envelope_forwards_the_stored_payload_text_unchanged() -> None:
    # Given a row written by another service, with numbers beyond double precision and its own spacing
    stored = '{"amount": 12345678901234567890.123456789, "rate": 0.10, "lines": [1, 2]}'
    item = event().to_item() | {"payload": {"S": stored}}

    # When it is read back and its envelope built
    read = OutboxEvent.from_item(item)
    envelope = read.envelope_json()

    # Then the payload is spliced in exactly as stored (no float rounding), the rest is the contract
    assert envelope.endswith(',"payload":' + stored + "}")
    assert json.loads(envelope) == read.envelope() | {"payload": json.loads(stored)}
    assert read.to_item()["payload"] == {"S": stored}


def test_a_new_event_envelope_text_matches_its_envelope() -> None:
    # Given an event built in Python
    built = event(payload={"total": "9.99", "note": "é"})

    # When / Then its envelope text parses back to its envelope, payload last
    assert json.loads(built.envelope_json()) == built.envelope()
    assert built.envelope_json().endswith(',"payload":{"total":"9.99","note":"é"}}')


def test_last_error_is_truncated_with_a_marker() -> None:
    # Given / When / Then
    assert truncate_error("short") == "short"
    long = truncate_error("x" * 2000)
    assert len(long) == 512
    assert long.endswith("…")
