"""The one moto difference an outbox test can trip on, and the pytest plugin a user enables in one line to
correct it (outbox_local.pytest_plugin): a cancelled TransactWriteItems must leave nothing on the stream, and
a reader following the stream must go on seeing what is written after it.

Run as a user's project would run it: a fresh pytest, in a folder of its own whose conftest.py is the one
line. The first test there is a canary: while moto itself still leaves the phantom record, the plugin is
needed; the day moto stops, the canary fails and says the plugin can go.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

USERS_TESTS = '''
import boto3
import pytest
from moto import mock_aws

from outbox import DynamoDBTransactionExecutor, OutboxEvent, OutboxWriter, TableKeys, Transaction
from outbox.errors import ConditionFailedError


def place_and_follow_the_stream() -> list[str]:
    """Three orders, the second under the first one's id (its transaction is cancelled by its condition), with
    a stream reader following the outbox table from before the first: what it reads."""
    dynamodb = boto3.client("dynamodb", region_name="us-east-1")
    dynamodb.create_table(
        TableName="orders", BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
    )
    stream = dynamodb.create_table(
        TableName="outbox", BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[
            {"AttributeName": "aggregate_key", "AttributeType": "S"},
            {"AttributeName": "seq", "AttributeType": "N"},
        ],
        KeySchema=[
            {"AttributeName": "aggregate_key", "KeyType": "HASH"},
            {"AttributeName": "seq", "KeyType": "RANGE"},
        ],
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )["TableDescription"]["LatestStreamArn"]
    streams = boto3.client("dynamodbstreams", region_name="us-east-1")
    shard = streams.describe_stream(StreamArn=stream)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(
        StreamArn=stream, ShardId=shard, ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    seen = []
    for order, attempt in (("o-1", "first"), ("o-1", "second"), ("o-2", "third")):
        transaction = Transaction()  # the event, then the order whose condition cancels the second
        OutboxWriter("outbox").append(transaction, OutboxEvent.new(
            aggregate_type="Order", aggregate_id=attempt, seq=1, event_type="OrderPlaced", payload={}))
        transaction.put(TableKeys("orders", "pk"), {"pk": {"S": order}}, label="order",
                        condition="attribute_not_exists(pk)")
        try:
            DynamoDBTransactionExecutor(dynamodb).execute(transaction)
        except ConditionFailedError:
            pass
        page = streams.get_records(ShardIterator=iterator)
        seen += [r["dynamodb"]["Keys"]["aggregate_key"]["S"] for r in page["Records"]]
        iterator = page["NextShardIterator"]
    return seen


def test_moto_as_it_is_streams_a_cancelled_transaction_and_then_loses_the_stream() -> None:
    with mock_aws():
        assert place_and_follow_the_stream() == ["Order#first", "Order#second"]


def test_with_the_plugin_a_cancelled_transaction_streams_nothing(outbox_moto: None) -> None:
    assert place_and_follow_the_stream() == ["Order#first", "Order#third"]
'''


def test_a_user_enables_the_plugin_in_one_line_and_a_cancelled_transaction_streams_nothing(
    tmp_path: Path,
) -> None:
    # Given a user's project: a conftest of one line, and a test that cancels a transaction
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["outbox_local.pytest_plugin"]\n')
    (tmp_path / "test_orders.py").write_text(textwrap.dedent(USERS_TESTS))
    environment = {
        "PATH": os.environ.get("PATH", ""),
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
    }

    # When pytest runs it there
    finished = subprocess.run(  # noqa: S603 - this interpreter, on a folder of this test's own
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    # Then moto alone streams the cancelled transaction's event (the canary), and with the plugin it does not
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert "2 passed" in finished.stdout
