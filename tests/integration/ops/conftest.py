"""The operations commands against the local runtime running the synthesized app: the real `outbox` entry
point, boto3 on the runtime's endpoint, the real publisher and sweeper functions."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from aws_lambda_powertools import Metrics

from outbox import outputs
from outbox.model import OutboxEvent, RowKey
from outbox_cli.main import main
from outbox_local.endpoint import LOCAL_CREDENTIALS
from outbox_local.runtime import LocalRuntime, RuntimeOptions
from outbox_local.stream_records import lambda_record
from tests.support.synth import Synthesized


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str

    @property
    def json(self) -> Any:
        return json.loads(self.out)


class Ops:
    """One local runtime, driven step by step, and the `outbox` command pointed at it."""

    def __init__(self, runtime: LocalRuntime) -> None:
        self.runtime = runtime
        self.dynamodb = runtime.client("dynamodb")
        self.sqs = runtime.client("sqs")
        self.table = runtime.outputs[outputs.OUTBOX_TABLE_NAME]
        self.poison_queue = runtime.outputs[outputs.POISON_QUEUE_URL]
        self.on_failure_queue = runtime.outputs[outputs.ON_FAILURE_QUEUE_URL]

    def cli(self, *argv: str) -> Result:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main([*argv, "--endpoint-url", self.runtime.endpoint_url, "--region", "us-east-1"])
            except SystemExit as exit_:  # argparse refusing the arguments
                code = int(exit_.code or 0)
        return Result(code, out.getvalue(), err.getvalue())

    def put(self, event: OutboxEvent, **attributes: Any) -> RowKey:
        """Write a row the way another writer would (attributes override the row's)."""
        self.dynamodb.put_item(TableName=self.table, Item={**event.to_item(), **attributes})
        return RowKey(event.aggregate_key, event.seq)

    def row(self, key: RowKey) -> dict[str, Any]:
        item: dict[str, Any] = self.dynamodb.get_item(
            TableName=self.table, Key=key.item(), ConsistentRead=True
        )["Item"]
        return item

    def status_of(self, key: RowKey) -> str:
        return str(self.row(key)["status"]["S"])

    def publish(self) -> None:
        """The stream mapping runs the publisher on everything written so far."""
        self.runtime.drain_streams()

    def sweep(self) -> Any:
        result = self.runtime.invoke(self.runtime.outputs[outputs.SWEEPER_FUNCTION_NAME], {})
        assert not result.failed, result
        return result.payload

    def redeliver_insert(self, key: RowKey) -> None:
        """Hand the publisher the row's ORIGINAL stream INSERT again, as a retried batch would."""
        streams = self.runtime.client("dynamodbstreams")
        stream_arn = self.runtime.outputs[outputs.OUTBOX_TABLE_STREAM_ARN]
        (shard,) = streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]
        iterator = streams.get_shard_iterator(
            StreamArn=stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        records = streams.get_records(ShardIterator=iterator)["Records"]
        (insert,) = [
            r for r in records if r["eventName"] == "INSERT" and RowKey.of(r["dynamodb"]["Keys"]) == key
        ]
        record = lambda_record(insert, stream_arn, "us-east-1")
        result = self.runtime.invoke(
            self.runtime.outputs[outputs.PUBLISHER_FUNCTION_NAME], {"Records": [record.payload]}
        )
        assert not result.failed, result

    def messages(self, queue_url: str) -> list[str]:
        """Every message body in the queue, left as it was (visible again)."""
        bodies: list[str] = []
        handles: list[str] = []
        while True:
            received = self.sqs.receive_message(
                QueueUrl=queue_url, MaxNumberOfMessages=10, VisibilityTimeout=30
            ).get("Messages", [])
            if not received:
                break
            bodies += [message["Body"] for message in received]
            handles += [message["ReceiptHandle"] for message in received]
        for handle in handles:
            self.sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=handle, VisibilityTimeout=0)
        return sorted(bodies)

    def rows(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.dynamodb.scan(TableName=self.table, ConsistentRead=True)["Items"]
        return sorted(items, key=lambda item: (item["aggregate_key"]["S"], int(item["seq"]["N"])))


@pytest.fixture
def ops(synthesized: Synthesized, monkeypatch: pytest.MonkeyPatch) -> Iterator[Ops]:
    # The CLI finds credentials as it would anywhere: here, the local runtime's fake ones.
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", LOCAL_CREDENTIALS["aws_access_key_id"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", LOCAL_CREDENTIALS["aws_secret_access_key"])
    monkeypatch.setenv("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    Metrics().clear_metrics()  # what an earlier test's functions left in Powertools' process-wide set
    options = RuntimeOptions(template_path=synthesized.template_path, background=False)
    with LocalRuntime(options) as runtime:
        yield Ops(runtime)
