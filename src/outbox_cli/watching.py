"""Watching a consumer queue: every message it delivers, in arrival order, with what the checks need."""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from outbox_local.queues import receive_all


@dataclass(frozen=True)
class Delivery:
    event_id: str
    event_type: str
    aggregate_id: str
    seq: int
    occurred_at: str
    sent_ms: int


class QueueWatcher:
    """Drains one consumer queue and remembers every message, in arrival order."""

    def __init__(
        self, sqs: Any, url: str, label: str, unwrap: Callable[[dict[str, Any]], dict[str, Any]]
    ) -> None:
        self._sqs = sqs
        self._url = url
        self.label = label
        self._unwrap = unwrap
        self.deliveries: list[Delivery] = []
        self.raw: list[dict[str, Any]] = []

    def collect(self, wait_s: int = 0) -> None:
        for message in receive_all(
            self._sqs, self._url, wait_s=wait_s, MessageSystemAttributeNames=["SentTimestamp"]
        ):
            body = json.loads(message["Body"])
            self.raw.append(body)
            envelope = self._unwrap(body)
            self.deliveries.append(
                Delivery(
                    event_id=envelope["event_id"],
                    event_type=envelope["event_type"],
                    aggregate_id=envelope["aggregate_id"],
                    seq=int(envelope["seq"]),
                    occurred_at=envelope["occurred_at"],
                    sent_ms=int(message["Attributes"]["SentTimestamp"]),
                )
            )

    def event_ids(self) -> set[str]:
        return {d.event_id for d in self.deliveries}

    def wait_for(self, event_ids: Iterable[str], timeout_s: float) -> bool:
        wanted = set(event_ids)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.collect(wait_s=1)  # long polling: the queue itself waits for the next message
            if wanted <= self.event_ids():
                return True
        return wanted <= self.event_ids()

    def duplicates(self) -> int:
        return sum(count - 1 for count in Counter(d.event_id for d in self.deliveries).values())

    def out_of_order(self) -> list[str]:
        """Aggregates whose first deliveries were not 1, 2, 3... in that order: one arrived before its
        predecessor, or without it (the demo's aggregates start at 1 and skip nothing)."""
        seen: dict[str, list[int]] = defaultdict(list)
        for delivery in self.deliveries:
            if delivery.seq not in seen[delivery.aggregate_id]:
                seen[delivery.aggregate_id].append(delivery.seq)
        return [aggregate for aggregate, seqs in seen.items() if seqs != list(range(1, len(seqs) + 1))]


def from_topic(body: dict[str, Any]) -> dict[str, Any]:
    # Raw message delivery gives the envelope itself; otherwise SNS wraps it in a notification.
    return json.loads(body["Message"]) if body.get("Type") == "Notification" else body


def from_bus(body: dict[str, Any]) -> dict[str, Any]:
    detail: dict[str, Any] = body["detail"]
    return detail
