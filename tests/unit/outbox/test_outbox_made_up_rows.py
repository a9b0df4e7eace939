"""Rows and stream images of shapes DynamoDB never stores (made-up records, another writer's mistakes): each
is an InvalidOutboxRowError naming the field (poison with its reason), never a TypeError or ValueError."""

from __future__ import annotations

from typing import Any

import pytest

from outbox.errors import InvalidOutboxRowError
from outbox.generation import stored_generation
from outbox.model import OutboxEvent, RowKey, string_attribute
from tests.support.events import event

ROW = event("made-up", 1).to_item()


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(1, id="number"),
        pytest.param("xSx", id="text-holding-the-type-letter"),
        pytest.param(["S"], id="list-holding-the-type-letter"),
        pytest.param(True, id="bool"),
    ],
)
def test_an_attribute_value_that_is_not_a_map_is_an_invalid_row_not_a_type_error(value: Any) -> None:
    # Given a row whose event_id is no attribute value (a map) / When it is read / Then invalid, naming it
    with pytest.raises(InvalidOutboxRowError, match=r"^event_id must be of type S$") as error:
        OutboxEvent.from_item(ROW | {"event_id": value})
    assert error.value.field == "event_id"


@pytest.mark.parametrize("name", ["seq", "schema_version", "attempts"])
@pytest.mark.parametrize("digits", [39, 5000])
def test_a_number_of_more_digits_than_dynamodb_keeps_is_an_invalid_row_not_a_value_error(
    name: str, digits: int
) -> None:
    # Given a whole number past 38 digits (past int()'s 4,300 too, for the envelope's text)
    # When the row is read / Then invalid, naming the field (before its envelope could fail to print it)
    with pytest.raises(InvalidOutboxRowError, match=rf"^{name} has more digits than a whole number may$"):
        OutboxEvent.from_item(ROW | {name: {"N": "9" * digits}})


def test_the_longest_whole_numbers_are_read_and_published() -> None:
    # Given 38 digits / When / Then read, and the envelope spells them exactly
    row = OutboxEvent.from_item(ROW | {"seq": {"N": "9" * 38}, "aggregate_key": ROW["aggregate_key"]})
    assert row.seq == 10**38 - 1
    assert f'"seq":{"9" * 38}' in row.envelope_json()


def test_the_stored_key_of_a_5000_digit_seq_addresses_the_row_without_printing_the_number() -> None:
    # Given / When
    key = RowKey.stored(ROW | {"seq": {"N": "9" * 5000}})
    # Then the stored text addresses it; its seq is no number that could not be printed
    assert key is not None
    assert (key.seq, key.item()["seq"]) == (0, {"N": "9" * 5000})
    assert repr(key)


@pytest.mark.parametrize(
    ("stored", "seq"), [("1E+2", 100), ("100.0", 100), ("0100", 100), ("1e2", 100), ("-3", -3), ("7", 7)]
)
def test_a_whole_seq_spelled_otherwise_is_read_and_its_key_still_addresses_the_row(
    stored: str, seq: int
) -> None:
    # Given a seq moto keeps as a writer spelled it (DynamoDB would store it normalised)
    # When its key is read / Then it is the whole number, and the key addresses the row as stored
    key = RowKey.of(ROW | {"seq": {"N": stored}})
    assert key is not None
    assert (key.seq, key.item()["seq"]) == (seq, {"N": stored})
    assert key.predecessor == RowKey(key.aggregate_key, seq - 1)


@pytest.mark.parametrize("stored", ["1.5", "x", "NaN", "Infinity", "9" * 39])
def test_a_seq_that_is_no_whole_number_has_no_key_but_its_stored_one(stored: str) -> None:
    # Given / When / Then: no key for the gate; the stored one still addresses it (to mark it FAILED)
    assert RowKey.of(ROW | {"seq": {"N": stored}}) is None
    stored_key = RowKey.stored(ROW | {"seq": {"N": stored}})
    assert stored_key is None or stored_key.item()["seq"] == {"N": stored}


@pytest.mark.parametrize("image", [[], "text", 1, None])
def test_a_string_attribute_of_an_image_that_is_not_a_map_is_none_not_an_attribute_error(image: Any) -> None:
    # Given a MODIFY's OldImage of another shape / When / Then
    assert string_attribute(image, "event_id") is None


@pytest.mark.parametrize(
    "value",
    [
        pytest.param({}, id="no-type"),
        pytest.param({"N": "1", "S": "1"}, id="two-types"),
        pytest.param({"N": {}}, id="number-holding-a-map"),
        pytest.param({"X": "1"}, id="no-such-type"),
        pytest.param({1: "1"}, id="type-not-text"),
        pytest.param("1", id="not-a-map"),
        pytest.param({"B": "not base64!"}, id="binary-not-base64"),
    ],
)
def test_a_generation_no_table_stores_is_none_so_no_condition_sends_it(value: Any) -> None:
    # Given a made-up record's generation AWS would refuse in a condition (moto raised IndexError on {})
    # When / Then it is read as none
    assert stored_generation(ROW | {"generation": value}) is None


@pytest.mark.parametrize("value", [{"N": "2"}, {"S": "two"}, {"NULL": True}, {"M": {}}, {"L": []}])
def test_a_generation_a_table_stores_is_kept_as_stored(value: Any) -> None:
    assert stored_generation(ROW | {"generation": value}) == value


def test_a_binary_generation_of_a_stream_image_is_compared_as_its_bytes() -> None:
    # Given a stream image (base64, as Lambda delivers it) and a row read with boto3 (bytes) / When / Then
    # the same bytes (sent as the text, botocore would encode it again and the condition never match)
    assert stored_generation(ROW | {"generation": {"B": "AA=="}}) == {"B": b"\x00"}
    assert stored_generation(ROW | {"generation": {"B": b"\x00"}}) == {"B": b"\x00"}
    nested = {"M": {"0": {"B": "AA=="}, "l": {"L": [{"BS": ["AQ=="]}]}}}
    assert stored_generation(ROW | {"generation": nested}) == {
        "M": {"0": {"B": b"\x00"}, "l": {"L": [{"BS": [b"\x01"]}]}}
    }
    assert stored_generation(ROW | {"generation": {"M": {"0": {}}}}) is None
