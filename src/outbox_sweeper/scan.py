"""Reading the outbox table for a census (outbox_sweeper.census): a paginated Scan, one segment of it, from a
saved position, bounded by the time it may take and by the due rows a run takes.

The table holds only what is not out yet, so a scan of it is short when all is well: an idle run reads one
page (0.5 RRU, eventually consistent). After a long outage it may hold millions of rows: each run reads on
from where the last one stopped (the sweeper saves the position, outbox_sweeper.cursor), and the table can be
split into segments swept in parallel (DynamoDB's parallel scan: each segment holds whole aggregates). What a
pass costs: half a read unit per 4 KB of rows read, eventually consistent, so about 125,000 RRU for a million
rows of 1 KB (docs/BENCHMARKS.md has the measured figures).

Eventual consistency costs nothing here: a row seen that is gone by now fails its claim, and a row written too
recently to be seen is younger than the grace anyway.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol

from outbox.dynamodb import call
from outbox.errors import OutboxError
from outbox.model import PARTITION_KEY, SORT_KEY, RowKey
from outbox_publisher.deadline import Deadline
from outbox_sweeper.census import SCANNED_ATTRIBUTES, Census

_log = logging.getLogger(__name__)

PAGE_ITEMS = 1_000
"""Items per Scan call (each call also stops at 1 MB): a run that stops inside a page reads the rest again."""


class ScanPage(NamedTuple):
    items: list[Mapping[str, Any]]
    last_key: Mapping[str, Any] | None
    """Where the next page starts (DynamoDB's LastEvaluatedKey); None at the end of the segment."""


class TableScan(Protocol):
    """Port: one page of a (segment of a) scan. Raises an OutboxError if DynamoDB did not answer."""

    def page(
        self, *, segment: int, segments: int, start: Mapping[str, Any] | None, limit: int
    ) -> ScanPage: ...


class DynamoDBTableScan:
    def __init__(self, client: Any, table_name: str) -> None:
        self._client = client
        self._table = table_name
        self.calls = 0

    def page(self, *, segment: int, segments: int, start: Mapping[str, Any] | None, limit: int) -> ScanPage:
        names = {"#pk": PARTITION_KEY, "#sk": SORT_KEY} | {
            f"#a{index}": name for index, name in enumerate(SCANNED_ATTRIBUTES)
        }
        arguments: dict[str, Any] = {
            "TableName": self._table,
            "ProjectionExpression": ", ".join(names),
            "ExpressionAttributeNames": names,
            "Limit": limit,
        }
        if segments > 1:
            arguments |= {"Segment": segment, "TotalSegments": segments}
        if start is not None:
            arguments["ExclusiveStartKey"] = dict(start)
        self.calls += 1
        response = call("Scan", self._client.scan, **arguments)
        return ScanPage(list(response.get("Items", [])), response.get("LastEvaluatedKey"))


class ScanProgress(NamedTuple):
    position: Mapping[str, Any] | None
    """Where the pass goes on from in the next run; None when this run reached the segment's end."""
    pages: int


def read_segment(
    census: Census,
    scan: TableScan,
    *,
    segment: int,
    segments: int,
    start: Mapping[str, Any] | None,
    deadline: Deadline,
    reserve_ms: int,
    page_items: int = PAGE_ITEMS,
) -> ScanProgress:
    """Feeds `census` the segment's rows from `start` on, until the segment's end, the census is full (the run
    has its due rows), or less than `reserve_ms` is left."""
    position = start
    pages = 0
    while True:
        if deadline.remaining_ms() < reserve_ms:
            return ScanProgress(position, pages)
        try:
            page = scan.page(segment=segment, segments=segments, start=position, limit=page_items)
        except OutboxError as error:
            if not pages:
                raise  # nothing read: the run fails, and says why
            # What was read still counts; the next run reads on from the last page read whole.
            _log.warning("could not read the rest of the segment", extra={"error": type(error).__name__})
            return ScanProgress(position, pages)
        pages += 1
        for item in page.items:
            census.add(item)
            if census.full:
                key = RowKey.stored(item)
                # Stop right after the row that filled it: the next run reads on from there.
                return ScanProgress(key.item() if key is not None else page.last_key, pages)
        if page.last_key is None:
            return ScanProgress(None, pages)
        position = page.last_key
