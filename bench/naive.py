"""The naive publisher: what users copy from samples. A baseline for the benchmark, not product code.

Powertools' `BatchProcessor` for DynamoDB streams hands the records to a record handler one at a time; the
handler publishes the new row's envelope with one SNS `Publish` and one EventBridge `PutEvents` (one entry),
then marks the row PUBLISHED with one `UpdateItem`. It sends the same envelope and SNS attributes as ours, so
the two carry the same bytes; it does none of the rest (no order per aggregate across failures: the processor
carries on past a failed record; no poison queue; no check of PutEvents' per-entry answers; no condition on
the mark, so a redelivered row is simply marked again).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import (
    DynamoDBRecord,
    DynamoDBRecordEventName,
)

from outbox.payload_refs import ENVELOPE_HEAD_FIELDS


class NaivePublisher:
    def __init__(
        self,
        *,
        sns: Any,
        events: Any,
        dynamodb: Any,
        table_name: str,
        topic_arn: str,
        event_bus_name: str,
        event_source: str,
    ) -> None:
        self._sns = sns
        self._events = events
        self._dynamodb = dynamodb
        self._table_name = table_name
        self._topic_arn = topic_arn
        self._event_bus_name = event_bus_name
        self._event_source = event_source

    def handle(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        processor = BatchProcessor(event_type=EventType.DynamoDBStreams)
        return dict(
            process_partial_response(
                event=event, record_handler=self.publish, processor=processor, context=context
            )
        )

    def publish(self, record: DynamoDBRecord) -> None:
        if record.event_name is not DynamoDBRecordEventName.INSERT:
            return
        row = record.dynamodb.new_image if record.dynamodb else {}
        envelope = {name: row.get(name) for name in ENVELOPE_HEAD_FIELDS}
        envelope["payload"] = json.loads(row["payload"])
        body = json.dumps(envelope, default=_number)
        self._sns.publish(
            TopicArn=self._topic_arn,
            Message=body,
            MessageAttributes={
                name: {"DataType": "String", "StringValue": str(row[name])}
                for name in ("event_type", "aggregate_type", "event_id")
            },
        )
        self._events.put_events(
            Entries=[
                {
                    "Source": self._event_source,
                    "DetailType": str(row["event_type"]),
                    "Detail": body,
                    "EventBusName": self._event_bus_name,
                }
            ]
        )
        self._dynamodb.update_item(
            TableName=self._table_name,
            Key=record.raw_event["dynamodb"]["Keys"],
            UpdateExpression="SET #status = :published, published_at = :now",
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues={
                ":published": {"S": "PUBLISHED"},
                ":now": {"S": datetime.now(UTC).isoformat()},
            },
        )


def _number(value: object) -> object:
    """Stream images hold numbers as Decimal, which json cannot write."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    raise TypeError(f"{type(value).__name__} is not JSON")
