"""Outbox events for tests: valid, distinct, deterministic (sequential UUIDs, a fixed clock)."""

from __future__ import annotations

import itertools
import uuid
from datetime import timedelta
from typing import Any

from outbox.model import OutboxEvent
from tests.support.clock import START

_ids = (uuid.UUID(int=number) for number in itertools.count(1))


def event(
    aggregate_id: str,
    seq: int,
    *,
    aggregate_type: str = "Order",
    event_type: str = "OrderPlaced",
    payload: dict[str, Any] | None = None,
) -> OutboxEvent:
    """A PENDING event that occurred two seconds before the fake clock's start."""
    return OutboxEvent.new(
        aggregate_type=aggregate_type,
        aggregate_id=aggregate_id,
        seq=seq,
        event_type=event_type,
        payload=payload if payload is not None else {"total": "9.99"},
        clock=lambda: START - timedelta(seconds=2),
        new_id=lambda: next(_ids),
    )
