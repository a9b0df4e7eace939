"""The census of an outbox across regions (outbox_sweeper.census, `owns`): a row another region owns is not
due here and holds the rows after it back; only owned FAILED rows are listed for the failed index. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from outbox.model import RowKey
from outbox_sweeper.census import Census
from tests.support.clock import START
from tests.unit.sweeper.test_census import GRACE, due, key, row

A, B = "us-east-1", "eu-west-1"


def owned_by_a(item: Mapping[str, Any]) -> bool:
    origin: str = item.get("origin", {}).get("S", A)
    return origin == A


def census(*items: dict[str, Any]) -> Census:
    taken = Census(now=START, grace=GRACE, due_limit=500, owns=owned_by_a)
    for item in items:
        taken.add(item)
    return taken


def test_a_row_another_region_owns_is_not_due_and_holds_the_rows_after_it() -> None:
    # Given A's order 1-2, B's order 1, and an aggregate moved from B to A: B's seq 1, then A's seq 2
    taken = census(
        row("A", 1, origin={"S": A}),
        row("A", 2, origin={"S": A}),
        row("B", 1, origin={"S": B}),
        row("M", 1, origin={"S": B}),
        row("M", 2, origin={"S": A}),
        row("N", 1),  # no origin: the home region's (A here)
    )

    # Then only A's rows are due, and M#2 waits for M#1, which B publishes
    assert [d.key for d in taken.due] == [key("A", 1), key("A", 2), key("N", 1)]
    assert taken.due[0] == due("A", 1, True)._replace(origin=A)
    # and every row still counts in the table's figures (one table, whoever publishes it)
    assert taken.figures().pending == 6


def test_only_owned_failed_rows_are_listed_for_the_index() -> None:
    failed = {"status": {"S": "FAILED"}}
    taken = census(row("A", 1, origin={"S": A}, **failed), row("B", 1, origin={"S": B}, **failed))
    assert taken.unindexed == [RowKey("Order#A", 1)]
    assert taken.figures().unindexed_failed == 2
