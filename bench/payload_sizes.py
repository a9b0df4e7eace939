"""What one event of 1 KB, 100 KB or 1 MB costs through each path (issue 33): priced, not measured, from
the list prices in `bench.prices` and the row, call and object counts each path makes by design
(docs/contracts.md, "Claim checks"). `python -m bench.payload_sizes` prints the table in docs/BENCHMARKS.md.

Priced per event: the row's transactional write (2 WRU per KB) and its settle (a delete, 1 WRU per KB of the
row); SNS publish requests (one per 64 KB chunk; ten small messages share one PublishBatch) and EventBridge
events (one per 64 KB chunk of each entry); the stored envelope's PUT, the publisher's GET (or HEAD when every
destination gets a claim check), one consumer's GET per claim check (one consumer per destination), and its
storage for the bucket's 45 days. Not priced: Lambda time (it grows with the bytes read and written on every
path alike), SQS at the consumers, data transfer within the region (free).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import NamedTuple

from bench import prices
from outbox.payload_refs import DEFAULT_OFFLOAD_THRESHOLD_BYTES

KIB = 1024
CHUNK = 64 * KIB
SIZES: Mapping[str, int] = {"1 KB": KIB, "100 KB": 100 * KIB, "1 MB": 1024 * KIB}
ROW_ATTRIBUTES_BYTES = 300
"""What a row holds beside its payload (keys, ids, timestamps, status; or `payload_ref`), about."""
ITEM_LIMIT = 400 * KIB
DEFAULT_LIMIT = 256 * KIB
LARGEST_TOPIC = 1024 * KIB
BATCH = 10
PAYLOAD_RETENTION_DAYS = 45
"""The constructs' bucket's (outbox_cdk.constants, which imports the CDK: a test keeps the two equal)."""


class Path(NamedTuple):
    name: str
    store: bool
    """A payload store (default threshold): bodies above it go to S3."""
    topic_bytes: int


PATHS = (
    Path("row only (no payload store)", store=False, topic_bytes=DEFAULT_LIMIT),
    Path("payload store, 256 KiB topic", store=True, topic_bytes=DEFAULT_LIMIT),
    Path("payload store, 1 MiB topic", store=True, topic_bytes=LARGEST_TOPIC),
)


def _wru(row_bytes: int, per_kb: int) -> float:
    return per_kb * math.ceil(row_bytes / KIB) * prices.DYNAMODB_WRITE_REQUEST_UNIT.per_unit


def _sns(message_bytes: int, limit: int) -> float:
    # Small messages share a PublishBatch (ten to a call, within the limit): the batch's payload is chunked.
    together = BATCH if BATCH * message_bytes <= limit else 1
    return math.ceil(together * message_bytes / CHUNK) / together * prices.SNS_REQUEST.per_unit


def _eventbridge(entry_bytes: int) -> float:
    return math.ceil(entry_bytes / CHUNK) * prices.EVENTBRIDGE_EVENT.per_unit


def cost(size: int, path: Path) -> dict[str, float] | None:
    """Each line's dollars for one event whose envelope is `size` bytes; None where the path cannot carry
    it."""
    stored = path.store and size > DEFAULT_OFFLOAD_THRESHOLD_BYTES
    row = ROW_ATTRIBUTES_BYTES + (0 if stored else size)
    if row > ITEM_LIMIT:
        return None
    pointer = 200
    sns_whole = size <= path.topic_bytes
    bus_whole = size <= DEFAULT_LIMIT
    if not stored and not (sns_whole and bus_whole):
        return None  # poison: too large for a destination, and no claim check without a store
    lines = {
        "row write (2 WRU/KB)": _wru(row, 2),
        "row settle (1 WRU/KB)": _wru(row, 1),
        "SNS publish": _sns(size if sns_whole else pointer, path.topic_bytes),
        "EventBridge event": _eventbridge(size if bus_whole else pointer),
    }
    if stored:
        claims = (not sns_whole) + (not bus_whole)
        months = PAYLOAD_RETENTION_DAYS / 30
        lines |= {
            "S3 PUT": prices.S3_PUT_REQUEST.per_unit,
            "S3 GET/HEAD (publisher)": prices.S3_GET_REQUEST.per_unit,
            "S3 GET (consumers' claim checks)": claims * prices.S3_GET_REQUEST.per_unit,
            "S3 storage": size / KIB**3 * months * prices.S3_STANDARD_GB_MONTH.usd,
        }
    return lines


def table() -> str:
    """Dollars per million events, by size and path (markdown)."""
    header = "| envelope | " + " | ".join(path.name for path in PATHS) + " |"
    rows = [header, "|---|" + "---|" * len(PATHS)]
    for label, size in SIZES.items():
        cells = []
        for path in PATHS:
            lines = cost(size, path)
            cells.append("not possible" if lines is None else f"${sum(lines.values()) * 1_000_000:,.2f}")
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(table())
