"""The catalogue's own checks can fail: a marker that was logged, printed or stored is found, a changed table
is seen and put back, and `make fuzz`'s report fails on a partial write, a leak or too few inputs."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from orders_api import handler as orders_handler
from outbox_publisher import handler as publisher_handler  # noqa: F401 - sets up the library's loggers
from tests.hardening import tally
from tests.hardening.checks import TableState, captured, leaks_in, marker, restore
from tests.support.aws import Tables


def test_a_marker_is_found_wherever_a_function_would_write_it() -> None:
    # Given a function's Powertools logger, a library logger Powertools took over, and stdout
    library = logging.getLogger("outbox.marking")
    # When each of them writes a marker
    with captured() as output:
        orders_handler.logger.info("rejected", extra={"field": marker(1)})
        library.warning("left pending", extra={"reason": marker(2)})
        print(marker(3))
    # Then the search finds all three
    found = " ".join(leaks_in(output.places))
    assert all(marker(number) in found for number in (1, 2, 3)), found


def test_nothing_is_found_where_no_marker_was_written() -> None:
    # Given / When a function logs ids only / Then no leak
    with captured() as output:
        orders_handler.logger.info("rejected", extra={"event_id": "00000000-0000-4000-8000-000000000001"})
    assert leaks_in(output.places) == []


def test_a_changed_table_is_seen_and_put_back(dynamodb: Any, tables: Tables) -> None:
    # Given the orders table as an input found it
    before = TableState.read(dynamodb, tables.orders, ("pk",))
    # When an item is added and another one changed
    dynamodb.put_item(TableName=tables.orders, Item={"pk": {"S": "harness-1"}, "v": {"N": "1"}})
    after = TableState.read(dynamodb, tables.orders, ("pk",))
    # Then the change is seen, and restoring leaves the table as it was
    assert before.changed_keys(after) == {'{"pk": {"S": "harness-1"}}'}
    restore(dynamodb, before)
    assert TableState.read(dynamodb, tables.orders, ("pk",)).items == before.items


def _counts(**counts: int) -> dict[str, int]:
    base = dict.fromkeys(("tried", "rejected", "poisoned", "accepted", "partial_writes", "leaks"), 0)
    return base | counts


@pytest.mark.parametrize(
    ("counts", "failure"),
    [
        (_counts(tried=3, accepted=3, generated=3), None),
        (_counts(tried=3, accepted=3, generated=3, partial_writes=1), "2 partial write(s)"),
        (_counts(tried=3, accepted=3, generated=3, leaks=2), "4 leak(s)"),
        (_counts(tried=3, accepted=3, generated=1, listed=2), "only 2 generated inputs"),
    ],
)
def test_the_fuzz_report_adds_up_every_process_and_fails_on_what_must_not_happen(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], counts: dict[str, int], failure: str | None
) -> None:
    # Given the counts two test processes wrote
    for worker in ("gw0", "gw1"):
        (tmp_path / f"tally-{worker}.json").write_text(json.dumps({"http-body": counts}))
    report = tmp_path / "report.json"
    # When the report is made, asking for at least 4 generated inputs
    status = tally.main([str(tmp_path), "--json", str(report), "--min-generated", "4"])
    # Then it adds both processes up, prints and writes the same figures, and fails when it must
    figures = json.loads(report.read_text())
    assert figures["categories"]["http-body"]["tried"] == 6
    assert figures["total"]["generated"] == 2 * counts["generated"]
    printed = capsys.readouterr()
    assert "http-body" in printed.out
    assert status == (0 if failure is None else 1)
    if failure is not None:
        assert failure in printed.err
