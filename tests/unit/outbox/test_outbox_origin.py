"""A row's `origin` (outbox across regions): stamped by the writer, validated like every field, read back; and
the publisher mapping's per-region filter patterns, matched by the local runtime's Lambda filter."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from outbox.errors import ConfigurationError, InvalidEventError, InvalidOutboxRowError
from outbox.model import OutboxEvent
from outbox.stream_mapping import PUBLISHER_FILTER_PATTERNS, publisher_filter_patterns
from outbox.transaction import Transaction
from outbox.writer import OutboxWriter
from outbox_local.filtering import FilterCriteria
from tests.support.events import event

A, B = "us-east-1", "eu-west-1"


def rows_written(writer: OutboxWriter, *events: OutboxEvent) -> list[dict[str, Any]]:
    transaction = Transaction()
    writer.append(transaction, *events)
    return [item["Put"]["Item"] for item in transaction.transact_items()]


def test_the_writer_stamps_its_origin_on_every_row() -> None:
    rows = rows_written(OutboxWriter("outbox", origin=A), event("A", 1), event("A", 2))
    assert [row["origin"] for row in rows] == [{"S": A}, {"S": A}]
    assert OutboxEvent.from_item(rows[0]).origin == A


def test_an_event_keeps_an_origin_of_its_own() -> None:
    rows = rows_written(OutboxWriter("outbox", origin=A), replace(event("A", 1), origin=B))
    assert rows[0]["origin"] == {"S": B}


def test_without_origin_no_row_carries_one() -> None:
    rows = rows_written(OutboxWriter("outbox"), event("A", 1))
    assert "origin" not in rows[0]
    assert OutboxEvent.from_item(rows[0]).origin is None


def test_the_envelope_does_not_carry_the_origin() -> None:
    stamped = replace(event("A", 1), origin=A)
    assert "origin" not in stamped.envelope()
    assert '"origin"' not in stamped.envelope_json()


@pytest.mark.parametrize("origin", ["", "US-EAST-1", "us_east_1", "mars", "us-east-1 ", 7])
def test_a_malformed_origin_is_refused(origin: Any) -> None:
    with pytest.raises(ConfigurationError, match="origin"):
        OutboxWriter("outbox", origin=origin)
    with pytest.raises(InvalidEventError) as refused:
        replace(event("A", 1), origin=origin)
    assert refused.value.field == "origin"


def test_a_row_with_a_malformed_origin_is_an_invalid_row() -> None:
    row = event("A", 1).to_item() | {"origin": {"S": "nowhere"}}
    with pytest.raises(InvalidOutboxRowError) as refused:
        OutboxEvent.from_item(row)
    assert refused.value.field == "origin"
    with pytest.raises(InvalidOutboxRowError):
        OutboxEvent.from_item(event("A", 1).to_item() | {"origin": {"N": "1"}})


# --- the publisher mapping's filter patterns ----------------------------------------------------------


def _insert(origin: str | None) -> dict[str, Any]:
    image = event("A", 1).to_item() | ({"origin": {"S": origin}} if origin else {})
    return {"eventName": "INSERT", "dynamodb": {"NewImage": image, "Keys": {}}}


def _modify(old: str, new: str) -> dict[str, Any]:
    return {
        "eventName": "MODIFY",
        "dynamodb": {"OldImage": {"status": {"S": old}}, "NewImage": {"status": {"S": new}}},
    }


def _accepts(patterns: tuple[Any, ...], record: dict[str, Any]) -> bool:
    return FilterCriteria.from_template({"Filters": [{"Pattern": json.dumps(p)} for p in patterns]}).accepts(
        record
    )


def test_the_single_region_patterns_are_unchanged() -> None:
    assert publisher_filter_patterns() is PUBLISHER_FILTER_PATTERNS


@pytest.mark.parametrize(
    ("region", "home", "origin", "accepted"),
    [
        (A, True, A, True),
        (A, True, B, False),
        (A, True, None, True),  # the home region's: another writer's row without origin
        (B, False, B, True),
        (B, False, A, False),
        (B, False, None, False),
    ],
)
def test_a_regions_patterns_pass_its_own_inserts_only(
    region: str, home: bool, origin: str | None, accepted: bool
) -> None:
    assert _accepts(publisher_filter_patterns(region, home=home), _insert(origin)) is accepted


def test_a_regions_patterns_keep_the_pending_modify_and_drop_settles() -> None:
    patterns = publisher_filter_patterns(B)
    assert _accepts(patterns, _modify("PENDING", "PENDING"))
    assert not _accepts(patterns, _modify("PENDING", "FAILED"))
    assert not _accepts(patterns, {"eventName": "REMOVE", "dynamodb": {"OldImage": {}}})
