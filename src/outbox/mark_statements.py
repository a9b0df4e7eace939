"""The PartiQL form of each mark (outbox.row_marks): one UPDATE of the documented grammar per row, each SET
and REMOVE its own clause, the conditions in WHERE, every value a `?` parameter. outbox.marking sends them,
25 to a BatchExecuteStatement; its docstring says why this form, where its grammar comes from, and what
happens when DynamoDB refuses it (outbox.mark_updates is the UpdateItem form).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from outbox.clock import format_timestamp
from outbox.model import (
    FAILED_INDEX_PARTITION_KEY,
    FIRST_RELEASED_AT,
    GENERATION,
    LEASE_OWNER,
    LEASE_UNTIL,
    NEXT_ATTEMPT_AT,
    PARTITION_KEY,
    PENDING_INDEX_PARTITION_KEY,
    RELEASE_REASON,
    RELEASED_AT,
    SORT_KEY,
    TTL_ATTRIBUTE,
    OutboxStatus,
    pending_shard,
    truncate_error,
)
from outbox.row_marks import FailedMark, PublishedMark

_LEFT_PENDING_ATTRIBUTES = (PENDING_INDEX_PARTITION_KEY, LEASE_OWNER, LEASE_UNTIL, NEXT_ATTEMPT_AT)
_LEFT_FOR_AN_OPERATOR_ATTRIBUTES = (*_LEFT_PENDING_ATTRIBUTES, TTL_ATTRIBUTE, "published_at")
# What each kind of mark SETs, in the order of its statement's parameters (`MarkStatements.of`).
_PUBLISHED_SETS = ("status", "published_at", TTL_ATTRIBUTE)
_FAILED_SETS = ("status", "last_error", "failed_at", FAILED_INDEX_PARTITION_KEY)
_FAILED_AND_RELEASED_SETS = (*_FAILED_SETS, RELEASED_AT, RELEASE_REASON)
_FAILED_AND_FIRST_RELEASED_SETS = (*_FAILED_AND_RELEASED_SETS, FIRST_RELEASED_AT)
_PENDING = OutboxStatus.PENDING.value
_PUBLISHED = OutboxStatus.PUBLISHED.value
_FAILED = OutboxStatus.FAILED.value


class MarkStatements:
    """The statements of one table's marks. Their texts depend on a mark's shape only: each is built once."""

    def __init__(self, table_name: str, published_retention: timedelta) -> None:
        self._quoted_table = _quoted(table_name)
        self._retention = published_retention
        self._texts: dict[tuple[Any, ...], str] = {}

    def of(self, mark: PublishedMark | FailedMark) -> dict[str, Any]:
        """The mark as one PartiQL UPDATE of the documented grammar: each SET and REMOVE its own clause, the
        conditions in WHERE, every value a `?` parameter."""
        parameters: list[dict[str, str]]
        names: tuple[str, ...]
        removed: tuple[str, ...]
        if isinstance(mark, PublishedMark):
            names = _PUBLISHED_SETS
            parameters = [
                {"S": _PUBLISHED},
                {"S": format_timestamp(mark.published_at)},
                {"N": str(int((mark.published_at + self._retention).timestamp()))},
            ]
            removed = _LEFT_PENDING_ATTRIBUTES
        else:
            failed_at = format_timestamp(mark.failed_at)
            parameters = [
                {"S": _FAILED},
                {"S": truncate_error(mark.error)},
                {"S": failed_at},
                {"N": str(pending_shard(mark.key.aggregate_key))},
            ]
            if mark.release_reason is None:
                names = _FAILED_SETS
            else:
                parameters += [{"S": failed_at}, {"S": truncate_error(mark.release_reason)}]
                names = _FAILED_AND_RELEASED_SETS
                if not mark.first_released_stored:
                    parameters.append({"S": failed_at})
                    names = _FAILED_AND_FIRST_RELEASED_SETS
            removed = _LEFT_FOR_AN_OPERATOR_ATTRIBUTES
        key = mark.key
        parameters += [
            {"N": str(mark.attempts)},
            {"S": key.aggregate_key},
            {"N": key.seq_text},
            {"S": _PENDING},
        ]
        if mark.lease_owner is not None:
            parameters.append({"S": mark.lease_owner})
        if mark.generation != 0:
            parameters.append({"N": str(mark.generation)})
        if mark.event_id is not None:
            parameters.append({"S": mark.event_id})
        # The text depends on the mark's shape only: built once per shape, not once per row.
        shape = (
            names,
            removed,
            mark.attempts_stored,
            mark.lease_owner is not None,
            mark.generation == 0,
            mark.event_id is not None,
            _first_released_stored(mark),
        )
        statement = self._texts.get(shape)
        if statement is None:
            statement = self._texts[shape] = self._text(shape)
        # The row as stored when a condition fails (ALL_OLD: a statement cannot project). `_still_markable`
        # reads only `status`, `lease_owner`, `generation` and `event_id` of it, but without it every moved-on
        # row (each row of a redelivered batch) would need an UpdateItem to tell it from a row that only
        # gained or lost `attempts` or `first_released_at`: kept, at the price of the response's size (the
        # whole item, payload included, per row that failed its condition).
        return {
            "Statement": statement,
            "Parameters": parameters,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }

    def _text(
        self, shape: tuple[tuple[str, ...], tuple[str, ...], bool, bool, bool, bool, bool | None]
    ) -> str:
        """The UPDATE of one mark's shape; its `?` in the order `of` lists the parameters."""
        sets, removed, attempts_stored, leased, first_generation, with_event_id, first_released_stored = shape
        clauses = [f"SET {_quoted(name)} = ?" for name in sets]
        clauses.append('SET "attempts" = "attempts" + ?' if attempts_stored else 'SET "attempts" = ?')
        clauses.extend(f"REMOVE {_quoted(name)}" for name in removed)
        conditions = [f"{_quoted(PARTITION_KEY)} = ?", f"{_quoted(SORT_KEY)} = ?", '"status" = ?']
        if leased:
            conditions.append(f"{_quoted(LEASE_OWNER)} = ?")
        conditions.append(
            f"{_quoted(GENERATION)} IS MISSING" if first_generation else f"{_quoted(GENERATION)} = ?"
        )
        if with_event_id:
            conditions.append('"event_id" = ?')
        conditions.append('"attempts" IS NOT MISSING' if attempts_stored else '"attempts" IS MISSING')
        if first_released_stored is not None:  # a release: sets `first_released_at` only where it was absent
            missing = "IS NOT MISSING" if first_released_stored else "IS MISSING"
            conditions.append(f"{_quoted(FIRST_RELEASED_AT)} {missing}")
        return f"UPDATE {self._quoted_table} {' '.join(clauses)} WHERE {' AND '.join(conditions)}"


def _first_released_stored(mark: PublishedMark | FailedMark) -> bool | None:
    """For a releasing FAILED mark, whether the row as read held `first_released_at`; None for the others."""
    if isinstance(mark, FailedMark) and mark.release_reason is not None:
        return mark.first_released_stored
    return None


def _quoted(name: str) -> str:
    """A PartiQL identifier, double-quoted: reserved words such as `status` included. DynamoDB's table and
    attribute names here never hold a quote."""
    return f'"{name}"'
