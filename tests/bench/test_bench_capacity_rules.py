"""DynamoDB's sizing rules as the benchmark applies them (bench.capacity): pure, no AWS."""

from __future__ import annotations

import pytest

from bench.capacity import IndexSchema, index_writes, item_size, number_size, read_units, write_units

PENDING = IndexSchema("pending", ("pending_shard", "occurred_at"), "INCLUDE", ("next_attempt_at",))
TABLE_KEYS = ("aggregate_key", "seq")


def test_an_item_is_its_attribute_names_plus_its_values() -> None:
    # Given a string (UTF-8 bytes), a number and a boolean
    item = {"pk": {"S": "héllo"}, "n": {"N": "19.98"}, "ok": {"BOOL": True}}

    # Then: pk 2 + 6, n 1 + (2 bytes for 4 significant digits + 1), ok 2 + 1
    assert item_size(item) == 8 + 4 + 3


@pytest.mark.parametrize(("text", "size"), [("0", 2), ("100", 2), ("19.98", 3), ("-12345", 4)])
def test_a_number_takes_a_byte_per_two_significant_digits_plus_one(text: str, size: int) -> None:
    assert number_size(text) == size


def test_lists_and_maps_cost_three_bytes_plus_one_per_element() -> None:
    # Given a list of one map of one string
    item = {"l": {"L": [{"M": {"a": {"S": "b"}}}]}}

    # Then: name 1 + list (3 + 1 + map (3 + 1 + name 1 + 1))
    assert item_size(item) == 1 + 3 + 1 + (3 + 1 + 1 + 1)


@pytest.mark.parametrize(("size", "units"), [(0, 1), (1024, 1), (1025, 2), (3000, 3)])
def test_writes_round_up_to_whole_kilobytes(size: int, units: int) -> None:
    assert write_units(size) == units


def test_reads_round_up_to_4_kb_and_eventually_consistent_ones_cost_half() -> None:
    assert read_units(0, consistent=True) == 1.0
    assert read_units(4097, consistent=True) == 2.0
    assert read_units(100, consistent=False) == 0.5


def test_a_sparse_index_costs_a_write_to_enter_and_one_to_leave_and_two_to_move() -> None:
    row = {"aggregate_key": {"S": "Order#1"}, "seq": {"N": "1"}, "occurred_at": {"S": "2026-11-29"}}
    pending = {**row, "pending_shard": {"N": "3"}}
    entry, moved = (
        PENDING.entry(pending, TABLE_KEYS),
        PENDING.entry({**pending, "pending_shard": {"N": "4"}}, TABLE_KEYS),
    )

    # Then a row without the index key is not in the index
    assert PENDING.entry(row, TABLE_KEYS) is None
    # And entering, leaving, moving and staying put cost 1, 1, 2 and 0 writes
    assert index_writes(PENDING, None, entry) == 1
    assert index_writes(PENDING, entry, None) == 1
    assert index_writes(PENDING, entry, moved) == 2
    assert index_writes(PENDING, entry, entry) == 0
