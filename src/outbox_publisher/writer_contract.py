"""Another writer's breaks of the row contract (docs/contracts.md, "Outbox row"), found where they show,
never published or dropped without a word; every report names the kind, logs carry ids and field names only.

- **A slot rewritten**: a stream MODIFY from PENDING (or PUBLISHED, which earlier releases kept) to a PENDING
  row holding another event. The new row is poison at once, without waiting for its predecessor (the sweeper,
  which sees only the row as it is now, could not tell), and never released: an operator decides. The
  publishing paths' own updates (a lease, a backoff, a park) change no event field and pass. Needs old images
  in the stream (NEW_AND_OLD_IMAGES, as `OutboxTable` has).
- **An event_id reused** by two rows of one run: the second is poison. Across runs only the inbox can tell.

Not seen here: a PENDING row another writer deletes (a REMOVE reads as a settle, and the mapping's filter
passes none), and a slot written again after its row was settled (an INSERT like any other).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any, Final

from outbox.model import OutboxStatus, RowKey, string_attribute
from outbox_publisher.candidates import Candidate
from outbox_publisher.poison import PoisonReason, Rejection

EVENT_FIELDS: Final = (
    "event_id",
    "event_type",
    "schema_version",
    "aggregate_type",
    "aggregate_id",
    "payload",
    "payload_ref",  # a stored envelope's: a slot rewritten between two stored rows shows here
    "payload_bytes",
    "occurred_at",
    "correlation_id",
)
"""What a row's event is: the publishing paths and operators never change these on a PENDING row."""
_REWRITABLE_FROM: Final = frozenset({OutboxStatus.PENDING.value, OutboxStatus.PUBLISHED.value})
_CONTRACT: Final = "the row contract's attribute_not_exists condition"

_log = logging.getLogger(__name__)


class Violation(StrEnum):
    SLOT_REWRITTEN = "slot_rewritten"
    EVENT_ID_REUSED = "event_id_reused"


def rewritten_fields(old_image: Mapping[str, Any] | None, new_image: Mapping[str, Any]) -> list[str]:
    """The event fields a MODIFY changed on a slot it may not rewrite; empty when it is no such break."""
    if old_image is None:
        return []  # a NEW_IMAGE stream: nothing to compare
    if string_attribute(old_image, "status") not in _REWRITABLE_FROM:
        return []  # a FAILED row: an operator may fix its payload before a redrive
    if string_attribute(new_image, "status") != OutboxStatus.PENDING.value:
        return []
    return changed_fields(old_image, new_image)


def changed_fields(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """The event fields that differ between two images of one slot."""
    return [name for name in EVENT_FIELDS if before.get(name) != after.get(name)]


def slot_rewritten(changed: Sequence[str]) -> Rejection:
    return Rejection(
        PoisonReason.WRITER_CONTRACT,
        "SlotRewritten",
        f"another writer replaced the row's event (changed: {', '.join(changed)}) without {_CONTRACT}",
    )


def report_rewritten(keys: Mapping[str, Any], old_image: Mapping[str, Any], changed: Sequence[str]) -> None:
    _log.error(
        "writer contract broken: a slot's event was replaced",
        extra={
            "violation": Violation.SLOT_REWRITTEN.value,
            **_ids(keys, old_image),
            "changed": list(changed),
        },
    )


def reject_reused_event_ids(candidates: Sequence[Candidate]) -> list[Candidate]:
    """`candidates`, each one whose `event_id` an earlier one of another key holds made poison."""
    holders: dict[str, RowKey | None] = {}
    checked: list[Candidate] = []
    for candidate in candidates:
        event = candidate.event
        if event is None:
            checked.append(candidate)
            continue
        holder = holders.setdefault(event.event_id, candidate.key)
        if holder == candidate.key:
            checked.append(candidate)
            continue
        _log.error(
            "writer contract broken: one event_id on two rows",
            extra={
                "violation": Violation.EVENT_ID_REUSED.value,
                "event_id": event.event_id,
                "aggregate_key": event.aggregate_key,
                "seq": event.seq,
                "also_on": f"{holder.aggregate_key}/{holder.seq_text}" if holder else None,
            },
        )
        rejection = Rejection(
            PoisonReason.WRITER_CONTRACT,
            "EventIdReused",
            f"another row of this run has the same event_id; each event needs its own ({_CONTRACT} keeps a "
            "slot unique, not an event_id: the writer must draw a new one)",
        )
        checked.append(candidate.but(event=None, rejection=rejection))
    return checked


def _ids(keys: Mapping[str, Any], image: Mapping[str, Any]) -> dict[str, Any]:
    key = RowKey.stored(keys)
    return {
        "aggregate_key": key.aggregate_key if key else None,
        "seq": key.seq_text if key else None,
        "event_id": string_attribute(image, "event_id"),
    }
