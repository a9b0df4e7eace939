"""What AWS bills for each publish call, read from the call's parameters (botocore `before-parameter-build`).

- SNS bills requests, "each 64 KB chunk of published data" one request: a PublishBatch of ten 1 KB messages is
  one billed request, which is why batching cuts SNS's bill.
- EventBridge bills events, each 64 KB chunk of an entry one event, however many entries share a PutEvents
  call: batching does not change EventBridge's bill.

Sizes follow the services' rules: SNS counts the message and each attribute's name, type and value;
EventBridge counts Source, DetailType, Detail (UTF-8), 14 bytes for Time and each Resource.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from typing import Any

CHUNK_BYTES = 64 * 1024


def chunks(size: int) -> int:
    return max(1, math.ceil(size / CHUNK_BYTES))


def sns_message_bytes(entry: Mapping[str, Any]) -> int:
    attributes = entry.get("MessageAttributes") or {}
    return len(str(entry.get("Message", "")).encode()) + sum(
        len(name.encode())
        + len(value.get("DataType", "").encode())
        + len(value.get("StringValue", "").encode())
        for name, value in attributes.items()
    )


def eventbridge_entry_bytes(entry: Mapping[str, Any]) -> int:
    size = sum(len(str(entry.get(name, "")).encode()) for name in ("Source", "DetailType", "Detail"))
    if entry.get("Time") is not None:
        size += 14
    return size + sum(len(str(resource).encode()) for resource in entry.get("Resources", []))


class BilledUnits:
    """Billed SNS requests and EventBridge events of the calls made by the clients it is attached to."""

    def __init__(self) -> None:
        self.units: Counter[str] = Counter()

    def attach(self, client: Any) -> Any:
        client.meta.events.register("before-parameter-build.sns", self._sns)
        client.meta.events.register("before-parameter-build.eventbridge.PutEvents", self._eventbridge)
        return client

    def reset(self) -> None:
        self.units.clear()

    def _sns(self, params: Mapping[str, Any], model: Any, **_: Any) -> None:
        if model.name == "PublishBatch":
            entries = params.get("PublishBatchRequestEntries", [])
            self.units["sns_requests"] += chunks(sum(sns_message_bytes(entry) for entry in entries))
        elif model.name == "Publish":
            self.units["sns_requests"] += chunks(sns_message_bytes(params))

    def _eventbridge(self, params: Mapping[str, Any], **_: Any) -> None:
        self.units["eventbridge_events"] += sum(
            chunks(eventbridge_entry_bytes(entry)) for entry in params.get("Entries", [])
        )
