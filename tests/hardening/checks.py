"""What every bad input is checked for: nothing partial written, nothing leaked, and its outcome counted.

Partial writes: a table's items, keyed by their primary key, before and after an input (`TableState`); each
test says which changes its entry point may make for the outcome it saw, and any other change is a partial
write. Tables are put back after each input (`restore`), so a test's world stays as small as it started.

Leaks: inputs carry marker strings (`LEAK-MARKER-<n>`) in payload values, key names, header values and fake
secrets; everything the entry point logged (every record, as Powertools formats it, with its extra fields and
stack), printed, or stored as a reason (`last_error`, a poison message's `detail`, a dead letter's reason) is
searched for them.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import traceback
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools.logging.formatter import BasePowertoolsFormatter

from outbox.model import PARTITION_KEY, SORT_KEY
from tests.hardening import tally
from tests.hardening.tally import Outcome, Source
from tests.support.aws import scan_all

MARKER_PREFIX = "LEAK-MARKER-"
OUTBOX_KEY = (PARTITION_KEY, SORT_KEY)
"""The outbox table's primary key (outbox.model), as `TableState` takes it."""
_STANDARD_RECORD_FIELDS = frozenset(vars(logging.makeLogRecord({})))


def marker(number: int) -> str:
    return f"{MARKER_PREFIX}{number}"


def leaks_in(places: Mapping[str, str]) -> list[str]:
    """Every marker that shows in a place (name -> text), with the text around it."""
    found = []
    for place, text in places.items():
        start = text.find(MARKER_PREFIX)
        while start >= 0:
            found.append(f"{place}: ...{text[max(0, start - 80) : start + 40]!r}...")
            start = text.find(MARKER_PREFIX, start + 1)
    return found


def judge(
    category: str,
    outcome: Outcome,
    *,
    source: Source,
    partial_writes: Sequence[str] = (),
    leaks: Sequence[str] = (),
) -> None:
    """Counts the input, then fails the test on any partial write or leak it showed."""
    tally.record(category, outcome, source=source, partial_write=bool(partial_writes), leak=bool(leaks))
    assert not partial_writes, f"partial write ({category}, {outcome}): {list(partial_writes)}"
    assert not leaks, f"leak ({category}, {outcome}): {list(leaks)}"


# --- What an entry point logged and printed ------------------------------------------------------------


@dataclass
class Output:
    records: list[str] = field(default_factory=list)
    """Each log record as written (for the leak search)."""
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    """Each log record's message and extra fields (for tests that read what was logged)."""
    stdout: io.StringIO = field(default_factory=io.StringIO)
    stderr: io.StringIO = field(default_factory=io.StringIO)

    @property
    def places(self) -> dict[str, str]:
        return {
            "logs": "\n".join(self.records),
            "stdout": self.stdout.getvalue(),
            "stderr": self.stderr.getvalue(),
        }


class _Collector(logging.Handler):
    """Keeps every record as written: Powertools' JSON line (persistent keys, extra fields, stack) where a
    Powertools formatter serves the logger, and always the message, the extra fields and the exception."""

    def __init__(self, output: Output) -> None:
        super().__init__()
        self._output = output

    def emit(self, record: logging.LogRecord) -> None:
        extras = {name: value for name, value in vars(record).items() if name not in _STANDARD_RECORD_FIELDS}
        self._output.events.append((record.getMessage(), extras))
        parts = [record.getMessage(), repr(extras)]
        if record.exc_info:
            parts.append("".join(traceback.format_exception(*record.exc_info)))
        formatter = _powertools_formatter(record.name)
        if formatter is not None:
            parts.append(formatter.format(record))
        self._output.records.append(" ".join(parts))


def _powertools_formatter(name: str) -> logging.Formatter | None:
    logger: logging.Logger | None = logging.getLogger(name)
    while logger is not None:
        for handler in logger.handlers:
            if isinstance(handler.formatter, BasePowertoolsFormatter):
                return handler.formatter
        logger = logger.parent
    return None


@contextlib.contextmanager
def captured() -> Iterator[Output]:
    """Every log record (the root's, and those of loggers that do not propagate, as Powertools sets up the
    library's), and stdout and stderr, while the block runs."""
    output = Output()
    collector = _Collector(output)
    loggers = [logging.getLogger()] + [
        logger
        for logger in logging.root.manager.loggerDict.values()
        if isinstance(logger, logging.Logger) and not logger.propagate
    ]
    for logger in loggers:
        logger.addHandler(collector)
    try:
        with contextlib.redirect_stdout(output.stdout), contextlib.redirect_stderr(output.stderr):
            yield output
    finally:
        for logger in loggers:
            logger.removeHandler(collector)


# --- Tables before and after ----------------------------------------------------------------------------

Key = str


@dataclass(frozen=True)
class TableState:
    """A table's items by primary key (the key as canonical JSON)."""

    table: str
    key_names: tuple[str, ...]
    items: dict[Key, dict[str, Any]]

    @classmethod
    def read(cls, dynamodb: Any, table: str, key_names: Sequence[str]) -> TableState:
        items = {key_of(item, key_names): item for item in scan_all(dynamodb, table)}
        return cls(table, tuple(key_names), items)

    def changed_keys(self, after: TableState) -> set[Key]:
        keys = set(self.items) | set(after.items)
        return {key for key in keys if self.items.get(key) != after.items.get(key)}


def key_of(item: Mapping[str, Any], key_names: Sequence[str]) -> Key:
    return json.dumps({name: item.get(name) for name in key_names}, sort_keys=True)


def restore(dynamodb: Any, before: TableState, after: TableState | None = None) -> None:
    """Puts the table back as `before` saw it (`after`: as it is now, if already read): what was added is
    deleted, what changed or went is put back."""
    now = after or TableState.read(dynamodb, before.table, before.key_names)
    for key in before.changed_keys(now):
        if key in before.items:
            dynamodb.put_item(TableName=before.table, Item=before.items[key])
        else:
            item = now.items[key]
            dynamodb.delete_item(TableName=before.table, Key={name: item[name] for name in before.key_names})


def unexpected_changes(before: TableState, after: TableState, allowed: set[Key]) -> list[str]:
    """The keys that changed although the outcome allows no change to them."""
    return [f"{before.table}: {key} changed" for key in sorted(before.changed_keys(after) - allowed)]
