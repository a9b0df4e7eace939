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
from outbox.clock import utc_now
from outbox.generation import stored_generation
from outbox.model import OutboxEvent, RowKey, string_attribute
from outbox_cli.main import main
from outbox_cli.watching import from_bus, from_topic
from outbox_local.endpoint import LOCAL_CREDENTIALS
from outbox_local.runtime import LocalRuntime, RuntimeOptions
from outbox_local.stream_records import lambda_record
from outbox_ops.release import audit_key
from outbox_publisher.dynamodb_rows import DynamoDBRowUpdater
from outbox_publisher.routing import Destination
from outbox_publisher.row_updates import MarkFailed, Settle
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

    def cli(self, *argv: str, discover: bool = False) -> Result:
        """`outbox *argv` on the runtime's stack, named with --stack unless `argv` names a stack or a table
        itself, or the test has the command `discover` it (it then says which stack on stderr)."""
        where = ["--endpoint-url", self.runtime.endpoint_url, "--region", "us-east-1"]
        if not discover and not {"--stack", "--table"} & set(argv):
            where += ["--stack", self.runtime.options.stack_name]
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main([*argv, *where])
            except SystemExit as exit_:  # argparse refusing the arguments
                code = int(exit_.code or 0)
        return Result(code, out.getvalue(), err.getvalue())

    def put(self, event: OutboxEvent, **attributes: Any) -> RowKey:
        """Write a row the way another writer would (attributes override the row's)."""
        self.dynamodb.put_item(TableName=self.table, Item={**event.to_item(), **attributes})
        return RowKey(event.aggregate_key, event.seq)

    def stored(self, key: RowKey) -> dict[str, Any] | None:
        """The item at `key` as stored now, or None when it is not in the table."""
        item: dict[str, Any] | None = self.dynamodb.get_item(
            TableName=self.table, Key=key.item(), ConsistentRead=True
        ).get("Item")
        return item

    def row(self, key: RowKey) -> dict[str, Any]:
        item = self.stored(key)
        assert item is not None, f"no row at {key}"
        return item

    def status_of(self, key: RowKey) -> str:
        """The row's status, or OUT once it has left the table (published, or skipped)."""
        item = self.stored(key)
        return "OUT" if item is None else str(item["status"]["S"])

    def audit(self, key: RowKey) -> list[dict[str, Any]]:
        """The entries of the audit record of the event at `key` (its `#audit#...` item), oldest first."""
        record = self.stored(audit_key(key))
        return [entry["M"] for entry in record["entries"]["L"]] if record else []

    def mark_failed(
        self,
        key: RowKey,
        error: str = "gave_up: AuthorizationError",
        *,
        release_reason: str | None = None,
        delivered_to: frozenset[str] = frozenset(),
    ) -> None:
        """Mark the PENDING row FAILED as the publishing paths do (the sweeper past its cutoffs, or a poison
        event on a route that lets later events go on past it: `release_reason`)."""
        row = self.row(key)
        mark = MarkFailed(
            key,
            error,
            attempts=5,
            failed_at=utc_now(),
            release_reason=release_reason,
            generation=stored_generation(row),
            event_id=string_attribute(row, "event_id"),
            delivered_to=delivered_to,
        )
        assert DynamoDBRowUpdater(self.dynamodb, self.table).apply([mark]).done == [key]

    def settle(self, key: RowKey) -> None:
        """Settle the PENDING row as a publishing path does once its event is out: it leaves the table."""
        row = self.row(key)
        settle = Settle(key, string_attribute(row, "event_id"), stored_generation(row))
        assert DynamoDBRowUpdater(self.dynamodb, self.table).apply([settle]).done == [key]

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

    def deliveries(self, event_id: str) -> dict[str, int]:
        """How many copies of the event each destination's sample consumer queue holds (left in place)."""
        watched = {
            Destination.SNS.value: (outputs.SAMPLE_TOPIC_CONSUMER_QUEUE_URL, from_topic),
            Destination.EVENTBRIDGE.value: (outputs.SAMPLE_BUS_CONSUMER_QUEUE_URL, from_bus),
        }
        return {
            destination: sum(
                unwrap(json.loads(body)).get("event_id") == event_id
                for body in self.messages(self.runtime.outputs[output])
            )
            for destination, (output, unwrap) in watched.items()
        }

    def rows(self) -> list[dict[str, Any]]:
        """Every item of the table (the outbox's own `#...` items too), by key."""
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
