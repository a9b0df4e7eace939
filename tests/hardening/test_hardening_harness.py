"""The catalogue's own checks can fail: a marker that was logged, printed or stored is found, a changed table
is seen and put back, what the publisher must not do to the table or send is found, and `make fuzz`'s report
fails on a partial write, a leak or too few inputs."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from orders_api import handler as orders_handler
from outbox_publisher import handler as publisher_handler  # noqa: F401 - sets up the library's loggers
from outbox_publisher.routing import Destination, Router
from tests.hardening import tally
from tests.hardening.checks import OUTBOX_KEY, Output, TableState, captured, key_of, leaks_in, marker, restore
from tests.hardening.publishing import Result, row_problems, stream_problems
from tests.support.aws import Tables


def test_a_marker_is_found_wherever_a_function_would_write_it() -> None:
    # Given a function's Powertools logger, a library logger Powertools took over, and stdout
    library = logging.getLogger("outbox_publisher.engine")
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


# --- The publisher's checks (tests/hardening/publishing.py) -----------------------------------------------

ROUTE_BOTH = Router(routes=(), default=(Destination.SNS, Destination.EVENTBRIDGE))
EVENT_ID = "00000000-0000-4000-8000-0000000000aa"


def _row(**changes: Any) -> dict[str, Any]:
    return {
        "aggregate_key": {"S": "Order#harness"},
        "seq": {"N": "1"},
        "event_id": {"S": EVENT_ID},
        "aggregate_type": {"S": "Order"},
        "event_type": {"S": "OrderPlaced"},
        "status": {"S": "PENDING"},
    } | changes


def _result(
    before: list[dict[str, Any]],
    after: list[dict[str, Any]],
    *,
    images: list[dict[str, Any]] | None = None,
    sns: Sequence[str] = (),
    eventbridge: Sequence[str] = (),
    poison: list[dict[str, Any]] | None = None,
) -> Result:
    def state(items: list[dict[str, Any]]) -> TableState:
        return TableState("outbox", OUTBOX_KEY, {key_of(item, OUTBOX_KEY): item for item in items})

    records = [{"eventName": "INSERT", "dynamodb": {"NewImage": image}} for image in (images or before)]
    result = Result(
        {"Records": records},
        ROUTE_BOTH,
        None,
        {"batchItemFailures": []},
        {"sns": list(sns), "eventbridge": list(eventbridge)},
        poison or [],
        Output(),
        state(before),
        state(after),
    )
    result.changed = result.before.changed_keys(result.after)
    return result


def test_a_settle_of_an_event_out_on_every_destination_it_needed_is_no_problem() -> None:
    # Given / When a row whose event went to SNS, EventBridge having taken it already, left the table
    result = _result([_row(delivered_to={"SS": ["eventbridge"]})], [], sns=[EVENT_ID])
    # Then neither check has anything to say
    assert (row_problems(result), stream_problems(result)) == ([], [])


@pytest.mark.parametrize(
    ("result", "problem"),
    [
        (_result([_row()], [], sns=[EVENT_ID]), "deleted, its event not out on ['eventbridge']"),
        (_result([], [_row(status={"S": "FAILED"})], images=[_row()]), "written by the publisher"),
        (_result([_row()], [_row()], sns=[EVENT_ID], eventbridge=[EVENT_ID]), "left PENDING (sent again"),
        (
            _result([_row()], [_row()], poison=[{"aggregate_key": "Order#harness", "seq": 1, "row": _row()}]),
            "poisoned, but its row left PENDING",
        ),
        (
            _result([_row()], [_row(delivered_to={"SS": ["sns"]})], eventbridge=[EVENT_ID]),
            "delivered_to records ['sns'], which did not take it",
        ),
        (_result([_row()], [_row(payload={"S": "{}"})]), "the publisher changed ['payload']"),
    ],
)
def test_the_row_check_finds_what_the_publisher_must_not_do_to_the_table(
    result: Result, problem: str
) -> None:
    # Given / When a run did something to a row it must not / Then the row check names it
    assert any(problem in found for found in row_problems(result)), row_problems(result)


@pytest.mark.parametrize(
    ("result", "problem"),
    [
        (_result([_row()], [], sns=["00000000-0000-4000-8000-0000000000bb"]), "which no record holds"),
        (
            _result([_row(delivered_to={"SS": ["sns"]})], [], sns=[EVENT_ID], eventbridge=[EVENT_ID]),
            "again, its row says it took it",
        ),
        (_result([_row()], [], sns=[EVENT_ID, EVENT_ID], eventbridge=[EVENT_ID]), "2 times"),
    ],
)
def test_the_stream_check_finds_what_was_sent_without_a_record_or_to_a_destination_that_had_it(
    result: Result, problem: str
) -> None:
    # Given / When a run sent something the records do not back / Then the stream check names it
    assert any(problem in found for found in stream_problems(result)), stream_problems(result)
