"""What `outbox demo` reads of the stack it runs on: tables, queues, alarms, with bounded waits."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from outbox import outputs as stack_outputs
from outbox.model import RowKey, is_reserved
from outbox_local.queues import receive_all
from outbox_local.runtime import LocalRuntime

DELIVERY_TIMEOUT_S = 60.0


class StackReader:
    def __init__(self, runtime: LocalRuntime) -> None:
        self.runtime = runtime

    def outbox_rows(self) -> list[dict[str, Any]]:
        """The events' rows in the outbox table now (not the outbox's own items: audit records, cursor)."""
        return [
            item
            for item in self.scan(self.runtime.outputs[stack_outputs.OUTBOX_TABLE_NAME])
            if not is_reserved(item["aggregate_key"]["S"])
        ]

    def committed_rows(self) -> list[dict[str, Any]]:
        """Every event row ever committed to the outbox table, as its stream's INSERT records show it: the
        table keeps a row only until its event is out."""
        table = self.runtime.outputs[stack_outputs.OUTBOX_TABLE_NAME]
        dynamodb, streams = self.runtime.client("dynamodb"), self.runtime.client("dynamodbstreams")
        stream_arn = dynamodb.describe_table(TableName=table)["Table"]["LatestStreamArn"]
        rows: list[dict[str, Any]] = []
        for shard in streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]:
            iterator = streams.get_shard_iterator(
                StreamArn=stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
            )["ShardIterator"]
            while iterator:
                page = streams.get_records(ShardIterator=iterator, Limit=1000)
                rows += [
                    record["dynamodb"]["NewImage"]
                    for record in page["Records"]
                    if record["eventName"] == "INSERT"
                    and not is_reserved(record["dynamodb"]["Keys"]["aggregate_key"]["S"])
                ]
                iterator = page.get("NextShardIterator") if page["Records"] else None
        return rows

    def scan(self, table: str) -> list[dict[str, Any]]:
        paginator = self.runtime.client("dynamodb").get_paginator("scan")
        return [
            item
            for page in paginator.paginate(TableName=table, ConsistentRead=True)
            for item in page["Items"]
        ]

    def row_status(self, aggregate_key: str, seq: int) -> str:
        deadline = time.monotonic() + DELIVERY_TIMEOUT_S
        status = "?"
        while time.monotonic() < deadline:
            item = (
                self.runtime.client("dynamodb")
                .get_item(
                    TableName=self.runtime.outputs[stack_outputs.OUTBOX_TABLE_NAME],
                    Key=RowKey(aggregate_key, seq).item(),
                )
                .get("Item", {})
            )
            status = str(item.get("status", {}).get("S", "?"))
            if status != "PENDING":
                return status
            self.runtime.wait_until_idle(1.0)
        return status

    def drain_bodies(self, url: str) -> list[str]:
        return [message["Body"] for message in receive_all(self.runtime.client("sqs"), url)]

    def alarm_named(self, short_name: str) -> str:
        """The stack's alarm whose name ends with `short_name` (alarm names carry the outbox's service name,
        which the stack derives: the demo does not guess it); `<stack>-<short_name>` when none does."""
        paginator = self.runtime.client("cloudwatch").get_paginator("describe_alarms")
        names = [
            alarm["AlarmName"]
            for page in paginator.paginate(AlarmTypes=["MetricAlarm"])
            for alarm in page["MetricAlarms"]
            if alarm["AlarmName"].endswith(short_name)
        ]
        return names[0] if len(names) == 1 else f"{self.runtime.options.stack_name}-{short_name}"

    def alarm_state(self, name: str) -> str:
        alarms = self.runtime.client("cloudwatch").describe_alarms(AlarmNames=[name])["MetricAlarms"]
        return str(alarms[0]["StateValue"]) if alarms else "?"

    def queue_depth(self, url: str) -> int:
        attributes = self.runtime.client("sqs").get_queue_attributes(
            QueueUrl=url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"]) + int(
            attributes["ApproximateNumberOfMessagesNotVisible"]
        )

    def wait(self, condition: Callable[[], bool], timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while not condition() and time.monotonic() < deadline:
            self.runtime.wait_until_idle(0.5)
        return condition()
