"""Stream records as Lambda delivers them to a function: shaped from what `GetRecords` returns (moto's lack
`eventSourceARN`, carry a datetime and hand Binary values over as bytes), with what the mapping emulator needs
to schedule them."""

from __future__ import annotations

import base64
import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class StreamRecord:
    """One record as Lambda sends it (`payload`), plus what the emulator needs to schedule it."""

    payload: Mapping[str, Any]
    sequence_number: str
    created_at: float
    """Epoch seconds the record was written (ApproximateCreationDateTime, full precision)."""

    @functools.cached_property
    def size(self) -> int:
        """Its bytes in the invocation payload (plus the comma that separates it from the next)."""
        return len(json.dumps(self.payload, separators=(",", ":")).encode()) + 1


def lambda_record(raw: Mapping[str, Any], stream_arn: str, region: str) -> StreamRecord:
    """Shape a `GetRecords` record as Lambda delivers it (moto's lack eventSourceARN and carry a datetime)."""
    stream = raw["dynamodb"]
    created = stream.get("ApproximateCreationDateTime")
    created_at = created.timestamp() if isinstance(created, datetime) else float(created or 0)
    shaped_stream: dict[str, Any] = {"ApproximateCreationDateTime": int(created_at)}
    for key in ("SequenceNumber", "SizeBytes", "StreamViewType"):
        if key in stream:
            shaped_stream[key] = stream[key]
    for key in ("Keys", "NewImage", "OldImage"):
        if key in stream:
            shaped_stream[key] = _as_sent(stream[key])
    payload: dict[str, Any] = {
        "eventID": raw["eventID"],
        "eventName": raw["eventName"],
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": region,
        "dynamodb": shaped_stream,
        "eventSourceARN": stream_arn,
    }
    if "userIdentity" in raw:
        payload["userIdentity"] = raw["userIdentity"]
    return StreamRecord(payload=payload, sequence_number=str(stream["SequenceNumber"]), created_at=created_at)


def _as_sent(item: Mapping[str, Any]) -> dict[str, Any]:
    """An item as Lambda's event carries it: boto3 hands Binary values over as bytes, Lambda sends them as
    base64 text (JSON has no bytes), in B and BS and inside M and L."""
    return {name: _value_as_sent(value) for name, value in item.items()}


def _value_as_sent(value: Mapping[str, Any]) -> dict[str, Any]:
    if "B" in value:
        return {"B": base64_text(value["B"])}
    if "BS" in value:
        return {"BS": [base64_text(element) for element in value["BS"]]}
    if "M" in value:
        return {"M": _as_sent(value["M"])}
    if "L" in value:
        return {"L": [_value_as_sent(element) for element in value["L"]]}
    return dict(value)


def base64_text(data: bytes | str) -> str:
    """Binary as Lambda events carry it (JSON has no bytes): base64 text."""
    return data if isinstance(data, str) else base64.b64encode(data).decode("ascii")
