"""The library in a user's own test, on moto as it is (`mock_aws`, nothing patched): the publisher's and
the sweeper's Lambda entry points, an inbox consumer's, and every `outbox` operations command, against
resources the test creates the way a user's would. Written as a user would write it: boto3 and the library's
public entry points only, no helper of this repository's test suite.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from outbox import DynamoDBTransactionExecutor, OutboxEvent, OutboxWriter, TableKeys, Transaction
from outbox.aws import invocation_client
from outbox_cli.main import main as outbox
from outbox_inbox.envelope import Envelope
from outbox_inbox.function import SqsConsumerFunction
from outbox_publisher import handler as publisher
from outbox_sweeper import handler as sweeper

REGION = "us-east-1"
SOURCE = "shop.orders"


class Context:
    """What Lambda hands a function: its name, its request id, its remaining time."""

    function_name = "outbox"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:outbox"
    aws_request_id = "request-1"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


@dataclass
class Outbox:
    table: str
    stream_arn: str
    topic_queue: str
    bus_queue: str
    poison_queue: str
    on_failure_queue: str
    inbox_table: str
    dead_letters: str


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[Outbox]:
    """moto, and what a user's stack would hold: the outbox table (stream, failed index), a topic and a bus
    each feeding a queue, the poison and on-failure queues, a consumer's inbox table and dead letters."""
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        table = dynamodb.create_table(
            TableName="payments-outbox",
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[
                {"AttributeName": "aggregate_key", "AttributeType": "S"},
                {"AttributeName": "seq", "AttributeType": "N"},
                {"AttributeName": "failed_shard", "AttributeType": "N"},
                {"AttributeName": "failed_at", "AttributeType": "S"},
            ],
            KeySchema=[
                {"AttributeName": "aggregate_key", "KeyType": "HASH"},
                {"AttributeName": "seq", "KeyType": "RANGE"},
            ],
            GlobalSecondaryIndexes=[
                {
                    "IndexName": "failed",
                    "KeySchema": [
                        {"AttributeName": "failed_shard", "KeyType": "HASH"},
                        {"AttributeName": "failed_at", "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "KEYS_ONLY"},
                }
            ],
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        )["TableDescription"]
        dynamodb.create_table(
            TableName="payments-inbox",
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        )
        sqs = boto3.client("sqs", region_name=REGION)

        def queue(name: str) -> tuple[str, str]:
            url = sqs.create_queue(QueueName=name)["QueueUrl"]
            arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
                "QueueArn"
            ]
            return url, arn

        topic_queue, topic_queue_arn = queue("payments-topic-consumer")
        bus_queue, bus_queue_arn = queue("payments-bus-consumer")
        sns = boto3.client("sns", region_name=REGION)
        topic = sns.create_topic(Name="payments")["TopicArn"]
        sns.subscribe(
            TopicArn=topic,
            Protocol="sqs",
            Endpoint=topic_queue_arn,
            Attributes={"RawMessageDelivery": "true"},
        )
        events = boto3.client("events", region_name=REGION)
        events.create_event_bus(Name="payments")
        events.put_rule(Name="all", EventBusName="payments", EventPattern=json.dumps({"source": [SOURCE]}))
        events.put_targets(Rule="all", EventBusName="payments", Targets=[{"Id": "q", "Arn": bus_queue_arn}])
        outbox = Outbox(
            table["TableName"],
            table["LatestStreamArn"],
            topic_queue,
            bus_queue,
            queue("payments-poison")[0],
            queue("payments-on-failure")[0],
            "payments-inbox",
            queue("payments-inbox-dead-letters")[0],
        )
        environment = {
            "OUTBOX_TABLE_NAME": outbox.table,
            "TOPIC_ARN": topic,
            "EVENT_BUS_NAME": "payments",
            "EVENT_SOURCE": SOURCE,
            "POISON_QUEUE_URL": outbox.poison_queue,
            "INBOX_TABLE_NAME": outbox.inbox_table,
            "INBOX_CONSUMER": "ledger",
            "INBOX_DEAD_LETTER_QUEUE_URL": outbox.dead_letters,
        }
        for name, value in environment.items():
            monkeypatch.setenv(name, value)
        # The entry points build their wiring once per process (once per Lambda container): a fresh one here.
        monkeypatch.setattr(publisher, "_publisher", None)
        monkeypatch.setattr(sweeper, "_sweeper", None)
        invocation_client.cache_clear()
        yield outbox


def payment(payment_id: str, seq: int, *, occurred: datetime | None = None) -> OutboxEvent:
    return OutboxEvent.new(
        aggregate_type="Payment",
        aggregate_id=payment_id,
        seq=seq,
        event_type="PaymentTaken" if seq == 1 else "PaymentRefunded",
        payload={"payment_id": payment_id, "amount": "12.50"},
        clock=(lambda: occurred) if occurred else (lambda: datetime.now(UTC)),
    )


def save(outbox: Outbox, *events: OutboxEvent) -> None:
    """Each event in the transaction of its business write (the business write left out here)."""
    for e in events:
        transaction = Transaction()
        OutboxWriter(outbox.table).append(transaction, e)
        DynamoDBTransactionExecutor(boto3.client("dynamodb", region_name=REGION)).execute(transaction)


def stream_records(outbox: Outbox) -> list[dict[str, Any]]:
    """The stream's records as moto's GetRecords answers them (the publisher takes them as Lambda's)."""
    streams = boto3.client("dynamodbstreams", region_name=REGION)
    shard = streams.describe_stream(StreamArn=outbox.stream_arn)["StreamDescription"]["Shards"][0]
    iterator = streams.get_shard_iterator(
        StreamArn=outbox.stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    records: list[dict[str, Any]] = streams.get_records(ShardIterator=iterator, Limit=1000)["Records"]
    return records


def received(queue: str, *, keep: bool = False) -> list[dict[str, Any]]:
    sqs = boto3.client("sqs", region_name=REGION)
    messages: list[dict[str, Any]] = []
    while batch := sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10).get("Messages", []):
        messages += batch
        if not keep:
            for message in batch:
                sqs.delete_message(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"])
    return messages


def envelopes(queue: str) -> list[dict[str, Any]]:
    bodies = [json.loads(message["Body"]) for message in received(queue)]
    return [body.get("detail", body) for body in bodies]


def rows(outbox: Outbox) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = boto3.client("dynamodb", region_name=REGION).scan(TableName=outbox.table)[
        "Items"
    ]
    return [item for item in items if not item["aggregate_key"]["S"].startswith("#")]


def operator(aws: Outbox, capsys: pytest.CaptureFixture[str]) -> Any:
    """An operator's shell: an `outbox` command naming this outbox's table and queues, with --json; its exit
    code and its answer."""

    def run(*arguments: str) -> tuple[int, Any]:
        where = ["--table", aws.table, "--poison-queue-url", aws.poison_queue]
        where += ["--on-failure-queue-url", aws.on_failure_queue, "--region", REGION, "--json"]
        capsys.readouterr()  # what the functions logged before: not the command's answer
        code = outbox([*arguments, *where])
        return code, json.loads(capsys.readouterr().out or "null")

    return run


def test_the_library_publishes_sweeps_consumes_and_is_operated_on_plain_moto(
    aws: Outbox, capsys: pytest.CaptureFixture[str]
) -> None:
    run = operator(aws, capsys)

    # Given two payments' events saved, and another writer's row whose payload is not JSON
    taken, refunded, other = payment("p-1", 1), payment("p-1", 2), payment("p-2", 1)
    save(aws, taken, refunded, other)
    earlier = datetime.now(UTC) - timedelta(minutes=5)
    poison = payment("p-3", 1, occurred=earlier).to_item() | {"payload": {"S": "{oops"}}
    boto3.client("dynamodb", region_name=REGION).put_item(TableName=aws.table, Item=poison)

    # When the publisher's Lambda entry point gets the stream's records
    response = publisher.handler({"Records": stream_records(aws)}, Context())

    # Then every good event is on the topic's and the bus's queues, in order per payment; their rows left
    # the table; the poison row is FAILED and whole on the poison queue
    assert response == {"batchItemFailures": []}
    good = [taken.event_id, other.event_id, refunded.event_id]
    assert sorted(e["event_id"] for e in envelopes(aws.bus_queue)) == sorted(good)
    on_topic = received(aws.topic_queue, keep=True)
    assert sorted(json.loads(m["Body"])["event_id"] for m in on_topic) == sorted(good)
    assert [row["status"]["S"] for row in rows(aws)] == ["FAILED"]
    [poisoned] = [json.loads(m["Body"]) for m in received(aws.poison_queue)]
    assert poisoned["row"] == poison

    # When an inbox consumer's entry point gets the topic's messages
    def record_in_ledger(envelope: Envelope, transaction: Transaction) -> None:
        transaction.update(
            TableKeys(aws.inbox_table, "pk"),
            {"pk": {"S": f"effect#{envelope.event_id}"}},
            "ADD applied :one",
            label="ledger",
            values={":one": {"N": "1"}},
        )

    consumer = SqsConsumerFunction("ledger", lambda _config: record_in_ledger)
    sqs_event = {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": {"ApproximateReceiveCount": "1"},
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:payments-topic-consumer",
            }
            for m in sorted(
                on_topic, key=lambda m: (json.loads(m["Body"])["aggregate_id"], json.loads(m["Body"])["seq"])
            )
        ]
    }
    answer = consumer.handler(sqs_event, Context())

    # Then it applied each event's effect once, and a redelivery applies nothing again
    assert answer == {"batchItemFailures": []}
    assert consumer.handler(sqs_event, Context()) == {"batchItemFailures": []}
    inbox = boto3.client("dynamodb", region_name=REGION).scan(TableName=aws.inbox_table)["Items"]
    applied = {
        item["pk"]["S"]: item["applied"]["N"] for item in inbox if item["pk"]["S"].startswith("effect#")
    }
    assert applied == {f"effect#{event_id}": "1" for event_id in good}

    # When another writer saves a row with only the contract's attributes, whose stream record is lost, and
    # the sweeper's entry point runs a few minutes later
    stranded = payment("p-4", 1, occurred=earlier)
    contract = {"aggregate_key", "seq", "event_id", "event_type", "schema_version", "aggregate_type"}
    contract |= {"aggregate_id", "payload", "occurred_at", "status"}
    boto3.client("dynamodb", region_name=REGION).put_item(
        TableName=aws.table, Item={k: v for k, v in stranded.to_item().items() if k in contract}
    )
    summary = sweeper.handler({}, Context())

    # Then the sweeper found it in the table and published it
    assert summary["swept"] == 1
    assert [e["event_id"] for e in envelopes(aws.bus_queue)] == [stranded.event_id]

    # When an operator asks the outbox how it is, and about the FAILED row
    code, status = run("status")
    assert code == 3  # degraded: a FAILED event
    assert (status["pending"], status["failed"]) == (0, 1)
    _, listed = run("failed", "list")
    [failed] = listed["failed"]
    _, shown = run("failed", "show", failed["event_id"])
    assert shown["last_error"].startswith("invalid_row: InvalidPayload")

    # and fixes the payload, then redrives it (and the sweeper publishes it), and skips nothing
    boto3.client("dynamodb", region_name=REGION).update_item(
        TableName=aws.table,
        Key={"aggregate_key": poison["aggregate_key"], "seq": poison["seq"]},
        UpdateExpression="SET payload = :fixed",
        ExpressionAttributeValues={":fixed": {"S": json.dumps({"payment_id": "p-3", "amount": "1.00"})}},
    )
    code, redriven = run("redrive", "--event-id", failed["event_id"], "--reason", "payload fixed")
    assert (code, [row["outcome"] for row in redriven["rows"]]) == (0, ["redriven"])
    assert sweeper.handler({}, Context())["swept"] == 1
    assert [e["event_id"] for e in envelopes(aws.topic_queue)][-1:] == [failed["event_id"]]

    # and a FAILED row it decides to skip: it leaves the table, and the audit shows both actions
    skipped = payment("p-5", 1).to_item() | {"status": {"S": "FAILED"}, "last_error": {"S": "rejected"}}
    boto3.client("dynamodb", region_name=REGION).put_item(TableName=aws.table, Item=skipped)
    sweeper.handler({}, Context())  # the sweeper adds it to the failed index (another writer saved it FAILED)
    code, skip = run("skip", skipped["event_id"]["S"], "--reason", "duplicate payment")
    assert (code, [row["outcome"] for row in skip["rows"]]) == (0, ["skipped"])
    _, audit = run("audit")
    assert [(record["event_id"], [e["action"] for e in record["entries"]]) for record in audit["audit"]] == [
        (failed["event_id"], ["redrive"]),
        (skipped["event_id"]["S"], ["skip"]),
    ]

    # and redrives what the on-failure queue names (a batch Lambda discarded: its rows are out by now)
    record = stream_records(aws)[0]
    boto3.client("sqs", region_name=REGION).send_message(
        QueueUrl=aws.on_failure_queue,
        MessageBody=json.dumps(
            {
                "DDBStreamBatchInfo": {
                    "shardId": boto3.client("dynamodbstreams", region_name=REGION).describe_stream(
                        StreamArn=aws.stream_arn
                    )["StreamDescription"]["Shards"][0]["ShardId"],
                    "startSequenceNumber": record["dynamodb"]["SequenceNumber"],
                    "endSequenceNumber": record["dynamodb"]["SequenceNumber"],
                    "streamArn": aws.stream_arn,
                    "batchSize": 1,
                }
            }
        ),
    )
    code, settled = run("redrive", "--on-failure-queue", "--reason", "mapping gave up")
    assert (code, [row["outcome"] for row in settled["rows"]]) == (0, ["out"])
    assert settled["on_failure_messages_removed"] == 1

    # Then nothing is left pending, and the outbox is healthy again
    code, status = run("status")
    assert (code, status["verdict"], status["pending"], status["failed"]) == (0, "healthy", 0, 0)
    assert rows(aws) == []
    assert uuid.UUID(failed["event_id"])
