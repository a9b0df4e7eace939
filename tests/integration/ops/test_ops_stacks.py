"""The `outbox` commands on any stack whose outputs are the Outbox construct's (outbox.outputs, each key
prefixed by its `outputs_prefix`), found with `--stack`, or without it as the one stack of the region that
names an outbox; several outboxes in a stack told apart with `--outbox`. On moto's CloudFormation, in process:
each stack holds no resource, only the outputs, as a deployed one answers DescribeStacks."""

from __future__ import annotations

import contextlib
import io
import json
import socket
from datetime import timedelta
from typing import Any

import boto3
import pytest

from outbox.clock import utc_now
from outbox.generation import stored_generation
from outbox.model import OutboxEvent, RowKey, string_attribute
from outbox_cli.main import main
from outbox_publisher.dynamodb_rows import DynamoDBRowUpdater
from outbox_publisher.row_updates import MarkFailed
from tests.integration.ops.conftest import Result
from tests.support.aws import REGION, create_tables

FOUND = (
    "outbox: stack PaymentsStack (the only one in us-east-1 whose outputs name an outbox; --stack to "
    "choose)\n"
)


class Account:
    """moto's account in one region: stacks made of outputs, outbox tables and queues they name."""

    def __init__(self) -> None:
        self.dynamodb = boto3.client("dynamodb", region_name=REGION)
        self.sqs = boto3.client("sqs", region_name=REGION)
        self.cloudformation = boto3.client("cloudformation", region_name=REGION)

    def outbox(self, table: str, prefix: str = "", *, failed_index: bool = True) -> dict[str, str]:
        """An outbox's table and queues, and the outputs the Outbox construct writes for them."""
        if failed_index:
            create_tables(self.dynamodb, orders=f"{table}-orders", outbox=table)
        else:
            self.dynamodb.create_table(
                TableName=table,
                BillingMode="PAY_PER_REQUEST",
                AttributeDefinitions=[
                    {"AttributeName": "aggregate_key", "AttributeType": "S"},
                    {"AttributeName": "seq", "AttributeType": "N"},
                ],
                KeySchema=[
                    {"AttributeName": "aggregate_key", "KeyType": "HASH"},
                    {"AttributeName": "seq", "KeyType": "RANGE"},
                ],
                StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
            )
        return {
            f"{prefix}OutboxTableName": table,
            f"{prefix}PoisonQueueUrl": self.sqs.create_queue(QueueName=f"{table}-poison")["QueueUrl"],
            f"{prefix}OnFailureQueueUrl": self.sqs.create_queue(QueueName=f"{table}-on-failure")["QueueUrl"],
        }

    def stack(self, name: str, stack_outputs: dict[str, str]) -> None:
        body = {
            "AWSTemplateFormatVersion": "2010-09-09",
            "Resources": {},
            "Outputs": {key: {"Value": value} for key, value in stack_outputs.items()},
        }
        self.cloudformation.create_stack(StackName=name, TemplateBody=json.dumps(body))

    def failed(self, table: str, aggregate_id: str) -> tuple[RowKey, str]:
        """A FAILED row holding its aggregate, marked as the publishing paths mark it; its event id."""
        event = OutboxEvent.new(
            aggregate_type="Payment",
            aggregate_id=aggregate_id,
            seq=1,
            event_type="PaymentTaken",
            payload={"amount": "1.00"},
            clock=lambda: utc_now() - timedelta(hours=1),
        )
        self.dynamodb.put_item(TableName=table, Item=event.to_item())
        key = RowKey(event.aggregate_key, event.seq)
        row = self.dynamodb.get_item(TableName=table, Key=key.item(), ConsistentRead=True)["Item"]
        mark = MarkFailed(
            key,
            "gave_up: AuthorizationError",
            attempts=5,
            failed_at=utc_now(),
            release_reason=None,
            generation=stored_generation(row),
            event_id=string_attribute(row, "event_id"),
            delivered_to=frozenset(),
        )
        assert DynamoDBRowUpdater(self.dynamodb, table).apply([mark]).done == [key]
        return key, event.event_id

    def rows(self, table: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.dynamodb.scan(TableName=table, ConsistentRead=True)["Items"]
        return sorted(items, key=lambda item: (item["aggregate_key"]["S"], item["seq"]["N"]))


@pytest.fixture
def account(aws: None) -> Account:
    return Account()


def outbox(*argv: str) -> Result:
    """`outbox *argv` as an operator runs it: the default credential chain and region (moto's here)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exit_:  # argparse refusing the arguments
            code = int(exit_.code or 0)
    return Result(code, out.getvalue(), err.getvalue())


def test_every_command_works_on_the_one_stack_that_names_an_outbox_without_naming_it(
    account: Account,
) -> None:
    # Given the user's own stack with the Outbox construct's outputs (two FAILED events in its table), beside
    # a stack of theirs that names no outbox
    names = account.outbox("PaymentsOutbox")
    account.stack("PaymentsStack", names)
    account.stack("NetworkStack", {"VpcId": "vpc-1"})
    redriven, redriven_id = account.failed("PaymentsOutbox", "p1")
    skipped, skipped_id = account.failed("PaymentsOutbox", "p2")

    # When the operator runs every command without --stack
    results = {
        "status": outbox("status", "--json"),
        "failed list": outbox("failed", "list", "--json"),
        "failed show": outbox("failed", "show", redriven_id, "--json"),
        "redrive dry run": outbox("redrive", "--event-id", redriven_id, "--reason", "fixed", "--dry-run"),
        "redrive": outbox("redrive", "--event-id", redriven_id, "--reason", "fixed", "--json"),
        "skip": outbox("skip", skipped_id, "--reason", "never needed", "--json"),
        "audit": outbox("audit", "--json"),
    }

    # Then each found the stack, said which on stderr, and did its work on its outbox
    assert {name: (result.code, result.err) for name, result in results.items()} == {
        name: (3 if name == "status" else 0, FOUND) for name in results
    }
    assert results["status"].json["table"] == "PaymentsOutbox"
    assert results["status"].json["failed"] == 2
    assert {row["event_id"] for row in results["failed list"].json["failed"]} == {redriven_id, skipped_id}
    assert results["failed show"].json["event_id"] == redriven_id
    assert "would_redrive" in results["redrive dry run"].out
    assert [row["outcome"] for row in results["redrive"].json["rows"]] == ["redriven"]
    assert [row["outcome"] for row in results["skip"].json["rows"]] == ["skipped"]
    assert sorted(record["event_id"] for record in results["audit"].json["audit"]) == sorted(
        [redriven_id, skipped_id]
    )
    statuses = {  # the events' rows (the audit records are the outbox's own items, without a status)
        row["aggregate_key"]["S"]: row["status"]["S"]
        for row in account.rows("PaymentsOutbox")
        if "status" in row
    }
    assert statuses.get(redriven.aggregate_key) == "PENDING"
    assert skipped.aggregate_key not in statuses


def test_without_a_stack_naming_an_outbox_a_command_says_what_it_looked_for_and_changes_nothing(
    account: Account,
) -> None:
    # Given an outbox table with a FAILED event, but no stack whose outputs name an outbox
    account.outbox("PaymentsOutbox")
    account.stack("NetworkStack", {"VpcId": "vpc-1"})
    account.failed("PaymentsOutbox", "p1")
    rows = account.rows("PaymentsOutbox")

    # When the operator redrives without --stack
    result = outbox("redrive", "--all", "--reason", "fixed")

    # Then it fails with one line naming what it looked for and the flag, and nothing changed
    assert (result.code, result.out) == (1, "")
    assert result.err == (
        "outbox: no stack in us-east-1 has outputs naming an outbox (an output ending in OutboxTableName): "
        "pass --stack NAME (or --region), or name the table with --table\n"
    )
    assert account.rows("PaymentsOutbox") == rows

    # And a stack named explicitly that names no outbox says so
    named = outbox("status", "--stack", "NetworkStack")
    assert named.code == 1
    assert named.err == (
        "outbox: stack NetworkStack names no outbox (no output ending in OutboxTableName; outbox_cdk.Outbox "
        "writes them): pass --stack with the stack that has one, or name the table with --table\n"
    )


def test_with_several_stacks_naming_an_outbox_a_command_names_them_and_changes_nothing(
    account: Account,
) -> None:
    # Given two stacks, each with its outbox, one holding a FAILED event
    account.stack("PaymentsStack", account.outbox("PaymentsOutbox"))
    account.stack("OrdersStack", account.outbox("OrdersOutbox"))
    _, event_id = account.failed("PaymentsOutbox", "p1")
    rows = account.rows("PaymentsOutbox")

    # When the operator skips without --stack
    result = outbox("skip", event_id, "--reason", "never needed")

    # Then it fails naming both stacks and --stack, and nothing changed
    assert (result.code, result.out) == (1, "")
    assert result.err == (
        "outbox: 2 stacks in us-east-1 name an outbox: OrdersStack, PaymentsStack: pass --stack NAME\n"
    )
    assert account.rows("PaymentsOutbox") == rows

    # And naming the stack is enough (nothing said on stderr: the operator chose it)
    chosen = outbox("failed", "list", "--stack", "PaymentsStack", "--json")
    assert (chosen.code, chosen.err) == (0, "")
    assert [row["event_id"] for row in chosen.json["failed"]] == [event_id]


def test_two_outboxes_in_one_stack_are_told_apart_by_their_outputs_prefix(account: Account) -> None:
    # Given one stack with two outboxes: the default one (prefix "") and another with prefix "Refunds"
    account.stack(
        "PaymentsStack", {**account.outbox("PaymentsOutbox"), **account.outbox("RefundsOutbox", "Refunds")}
    )
    _, refund_id = account.failed("RefundsOutbox", "r1")
    rows = account.rows("RefundsOutbox")

    # When the operator names no outbox
    unnamed = outbox("redrive", "--all", "--reason", "fixed", "--stack", "PaymentsStack")

    # Then it fails listing the prefixes it found and the flag, and nothing changed
    assert unnamed.code == 1
    assert unnamed.err == (
        'outbox: stack PaymentsStack names 2 outboxes, by output prefix "", "Refunds": pass --outbox PREFIX\n'
    )
    assert account.rows("RefundsOutbox") == rows

    # When they name each (the stack found without --stack, as the only one with that outbox)
    refunds = outbox("failed", "list", "--outbox", "Refunds", "--json")
    default = outbox("status", "--stack", "PaymentsStack", "--outbox", "", "--json")

    # Then each command reads its own outbox's table
    assert (refunds.code, refunds.err) == (0, FOUND)
    assert [row["event_id"] for row in refunds.json["failed"]] == [refund_id]
    assert (default.code, default.json["table"], default.json["failed"]) == (0, "PaymentsOutbox", 0)

    # And a prefix the stack does not name is an error listing those it does
    unknown = outbox("status", "--stack", "PaymentsStack", "--outbox", "Invoices")
    assert unknown.code == 1
    assert unknown.err == (
        'outbox: stack PaymentsStack has no outbox with output prefix "Invoices" (no InvoicesOutboxTableName '
        'output; it names "", "Refunds"): pass --outbox with one it names\n'
    )


def test_a_table_without_the_failed_index_is_named_with_how_to_add_it_and_nothing_changes(
    account: Account,
) -> None:
    # Given a stack whose outbox table has no `failed` index (a table of the user's own, without
    # add_failed_index), holding a FAILED row
    account.stack("PaymentsStack", account.outbox("PaymentsOutbox", failed_index=False))
    account.dynamodb.put_item(
        TableName="PaymentsOutbox",
        Item={"aggregate_key": {"S": "Payment#1"}, "seq": {"N": "1"}, "status": {"S": "FAILED"}},
    )
    rows = account.rows("PaymentsOutbox")

    # When the operator lists the FAILED events, and redrives them
    listed = outbox("failed", "list", "--stack", "PaymentsStack")
    redriven = outbox("redrive", "--all", "--reason", "fixed", "--stack", "PaymentsStack")

    # Then both fail naming the index and how to add it, and nothing changed
    says = (
        "outbox: table PaymentsOutbox has no `failed` index (the sparse index on `failed_shard` through "
        "which FAILED rows are found): outbox_cdk.Outbox builds it; for a table of your own, add it with "
        "outbox_cdk.add_failed_index(table), deploy\n"
    )
    assert (listed.code, listed.err) == (1, says)
    assert (redriven.code, redriven.err) == (1, says)
    assert account.rows("PaymentsOutbox") == rows


def test_a_loopback_endpoint_where_nothing_answers_is_named_with_the_local_runtime() -> None:
    # Given a loopback port nothing listens on (bound, then closed), and no moto in between
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    endpoint = f"http://127.0.0.1:{port}"

    # When the operator points commands at it: one that looks for the stack, one that reads the table it names
    found = outbox("status", "--endpoint-url", endpoint, "--region", "us-east-1")
    named = outbox("failed", "list", "--table", "outbox", "--endpoint-url", endpoint, "--region", "us-east-1")

    # Then each fails with one line saying nothing answers there and that the local runtime may not be running
    for result in (found, named):
        assert (result.code, result.out) == (1, "")
        assert result.err == (
            f"outbox: no local runtime answers at {endpoint} ([Errno 111] Connection refused): start it with "
            "`outbox local up`, or pass the --endpoint-url it printed\n"
        )
