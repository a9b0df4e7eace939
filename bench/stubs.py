"""Stub clients: hand-written stand-ins for boto3's SNS, EventBridge, DynamoDB and SQS clients that answer
every call with success, in the shape the real client returns.

With them a CPU figure measures the publisher's own Python only: none of botocore's validation,
serialization, signing or parsing runs. They are not moto and not botocore's Stubber; bench.canned_http is
the other half (real request building, canned HTTP).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


class StubSns:
    def publish_batch(
        self,
        *,
        TopicArn: str,  # noqa: N803 - boto3's names
        PublishBatchRequestEntries: Sequence[Mapping[str, Any]],  # noqa: N803
    ) -> dict[str, Any]:
        return {
            "Successful": [{"Id": entry["Id"], "MessageId": "stub"} for entry in PublishBatchRequestEntries]
        }

    def publish(self, **_: Any) -> dict[str, Any]:
        return {"MessageId": "stub"}


class StubEvents:
    def put_events(self, *, Entries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:  # noqa: N803
        return {"FailedEntryCount": 0, "Entries": [{"EventId": "stub"} for _ in Entries]}


class StubDynamoDB:
    def __init__(self) -> None:
        self.deleted = 0
        """Rows settled: the CPU probe checks that a run settled every record it was handed."""

    def transact_write_items(self, **_: Any) -> dict[str, Any]:
        return {}

    def update_item(self, **_: Any) -> dict[str, Any]:
        return {}

    def delete_item(self, **_: Any) -> dict[str, Any]:
        """A settle: the row was there, as the condition expected, and is gone."""
        self.deleted += 1
        return {}

    def batch_get_item(self, *, RequestItems: Mapping[str, Any], **_: Any) -> dict[str, Any]:  # noqa: N803
        """Every predecessor asked for is absent: out (settled) already."""
        return {"Responses": {table: [] for table in RequestItems}, "UnprocessedKeys": {}}


class StubSqs:
    def send_message(self, **_: Any) -> dict[str, Any]:
        return {"MessageId": "stub"}


def stub_clients() -> dict[str, Any]:
    return {"sns": StubSns(), "events": StubEvents(), "dynamodb": StubDynamoDB(), "sqs": StubSqs()}
