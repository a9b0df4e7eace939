"""A row's `origin` (outbox across regions): stamped by the writer, validated like every field, read back; and
the publisher mapping's per-region filter patterns, matched by the local runtime's Lambda filter."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from outbox.errors import ConfigurationError, InvalidEventError
from outbox.model import OutboxEvent
from outbox.transaction import Transaction
from outbox.writer import OutboxWriter
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


def test_a_row_whose_origin_names_no_region_is_read_without_one() -> None:
    # Given rows another writer saved with an `origin` attribute of its own meaning (no region's name, or not
    # a string): a single-region outbox must publish them as before
    for value in ({"S": "checkout-web"}, {"N": "1"}, {"S": ""}):
        # When each is read
        read = OutboxEvent.from_item(event("A", 1).to_item() | {"origin": value})
        # Then it is a valid row without origin (across regions: the home region's)
        assert read.origin is None
    assert OutboxEvent.from_item(event("A", 1).to_item() | {"origin": {"S": B}}).origin == B
