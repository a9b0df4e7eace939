"""Reading a segment for the census (outbox_sweeper.scan.read_segment): where it stops, and what a page
DynamoDB does not answer costs."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import pytest

from outbox.errors import ThrottledError
from outbox_publisher.deadline import NoDeadline
from outbox_sweeper.census import Census
from outbox_sweeper.scan import ScanPage, read_segment
from tests.support.clock import START
from tests.support.events import event


class Pages:
    """A scan of two pages; the pages listed in `failing` are throttled."""

    def __init__(self, failing: set[int]) -> None:
        self._failing = failing
        self.items: list[Mapping[str, Any]] = [event(f"o-{n}", 1).to_item() for n in range(4)]
        self.asked: list[Mapping[str, Any] | None] = []

    def page(self, *, segment: int, segments: int, start: Mapping[str, Any] | None, limit: int) -> ScanPage:
        number = len(self.asked)
        self.asked.append(start)
        if number in self._failing:
            raise ThrottledError("Scan throttled")
        if start is None:
            return ScanPage(self.items[:2], {"position": "after the first page"})
        return ScanPage(self.items[2:], None)


def census() -> Census:
    return Census(now=START, grace=timedelta(seconds=60), due_limit=500, resumed_after=None)


def read(scan: Pages, taken: Census) -> Any:
    return read_segment(
        taken, scan, segment=0, segments=1, start=None, deadline=NoDeadline(), reserve_ms=30_000
    )


def test_a_page_dynamodb_does_not_answer_keeps_what_was_read_and_where_to_read_on() -> None:
    # Given a scan whose second page is throttled
    scan, taken = Pages(failing={1}), census()

    # When the segment is read / Then the first page's rows count, and the next run reads on from there
    progress = read(scan, taken)
    assert (taken.rows, progress.pages) == (2, 1)
    assert progress.position == {"position": "after the first page"}


def test_a_first_page_dynamodb_does_not_answer_fails_the_read() -> None:
    # Given a scan whose first page is throttled / When read / Then the error says so: nothing was read
    with pytest.raises(ThrottledError):
        read(Pages(failing={0}), census())
