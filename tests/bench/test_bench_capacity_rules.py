"""DynamoDB's sizing rules as the benchmark applies them (bench.capacity): pure, no AWS."""

from __future__ import annotations

import pytest

from bench.capacity import IndexSchema, index_writes, item_size, number_size, read_units, write_units
from bench.sweeper_figures import pass_extrapolated

FAILED = IndexSchema("failed", ("failed_shard", "failed_at"), "KEYS_ONLY")
"""The outbox table's one index (tests.support.aws): sparse, written only when a row fails."""
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
    row = {"aggregate_key": {"S": "Order#1"}, "seq": {"N": "1"}, "status": {"S": "PENDING"}}
    failed = {**row, "status": {"S": "FAILED"}, "failed_shard": {"N": "3"}, "failed_at": {"S": "2026-11-29"}}
    entry, moved = (
        FAILED.entry(failed, TABLE_KEYS),
        FAILED.entry({**failed, "failed_at": {"S": "2026-11-30"}}, TABLE_KEYS),
    )

    # Then a PENDING row (no index key) is not in the index, and a FAILED row's entry is its keys alone
    assert FAILED.entry(row, TABLE_KEYS) is None
    assert entry is not None
    assert set(entry) == {"aggregate_key", "seq", "failed_shard", "failed_at"}
    # And entering, leaving, moving and staying put cost 1, 1, 2 and 0 writes
    assert index_writes(FAILED, None, entry) == 1
    assert index_writes(FAILED, entry, None) == 1
    assert index_writes(FAILED, entry, moved) == 2
    assert index_writes(FAILED, entry, entry) == 0


@pytest.mark.parametrize(("row_bytes", "rows_per_page"), [(400.0, 1000), (1500.0, 699)])
def test_a_pass_reads_pages_of_a_thousand_rows_or_a_megabyte_each_rounded_to_4_kb_at_half_a_unit(
    row_bytes: float, rows_per_page: int
) -> None:
    # When a pass over 10,000 rows of that size is worked out by the Scan rules
    figures = pass_extrapolated({"row_bytes_mean": row_bytes}, rows=10_000)

    # Then a page holds 1,000 rows (the sweeper's Limit), fewer when 1,000 would pass 1 MB
    assert figures["rows_per_page"] == rows_per_page
    assert figures["pages"] == -(-10_000 // rows_per_page)
    # And each page costs half a unit per 4 KB it read, the sum of its rows rounded up once per page
    page_bytes = rows_per_page * row_bytes
    assert figures["rru_per_page"] == 0.5 * -(-page_bytes // 4096)
    assert figures["scan_rru"] == figures["pages"] * figures["rru_per_page"]
