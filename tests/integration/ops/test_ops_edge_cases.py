"""What the operations commands do when asked for too much, when AWS answers badly, or when a message or a
range cannot be settled: say so, per row, change nothing for it, and keep what they could not settle."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from botocore.exceptions import ClientError

from outbox.clock import utc_now
from outbox.marking import DynamoDBRowMarker
from outbox.row_marks import FailedMark
from outbox_ops.clients import OpsClients
from outbox_ops.failed import FailedFilter
from outbox_ops.redrive import Operations, Operator, Outcome
from outbox_ops.resources import OutboxResources
from tests.integration.ops.conftest import Ops
from tests.integration.ops.test_ops_redrive_and_skip import poisoned
from tests.integration.ops.test_ops_status_and_failed import new


def operations(ops: Ops, **replaced: Any) -> Operations:
    """The library behind the commands, on the runtime, with some clients replaced."""
    clients = OpsClients.connect(region="us-east-1", endpoint_url=ops.runtime.endpoint_url)
    clients.__dict__.update(replaced)
    return Operations(clients, OutboxResources.find(clients.cloudformation, "OutboxStack", {}))


def discarded_and_given_up(ops: Ops, aggregate_id: str) -> str:
    """A record the stream mapping discarded (an on-failure message) whose row the sweeper gave up on."""
    rule = ops.runtime.faults.arm("sns", "PublishBatch", error_code="AuthorizationError", http_status=403)
    key = ops.put(new(aggregate_id, 1, age=timedelta(days=1)))
    ops.publish()
    ops.runtime.faults.disarm(rule)
    DynamoDBRowMarker(ops.dynamodb, ops.table).mark([FailedMark(key, "gave_up: x", 5, utc_now())])
    (message,) = ops.messages(ops.on_failure_queue)
    return message


def test_an_event_id_that_matches_no_failed_row_is_reported_and_fails_the_command(ops: Ops) -> None:
    # Given one FAILED event
    _, _, event_id = poisoned(ops, "typo")

    # When the operator redrives it and, by a typo, another id
    result = ops.cli("redrive", "--event-id", event_id, "--event-id", "0000-typo", "--reason", "r", "--json")

    # Then the real one is redriven, the typo reported as not found, and the command fails
    assert result.code == 1
    assert [(r["event_id"], r["outcome"]) for r in result.json["rows"]] == [
        (event_id, "redriven"),
        ("0000-typo", "not_found"),
    ]
    assert "not done" in result.err


class EmptyStreams:
    """A stream that answers every read with nothing (an open shard before its records, or trimmed)."""

    def get_shard_iterator(self, **_: Any) -> dict[str, str]:
        return {"ShardIterator": "iterator"}

    def get_records(self, **_: Any) -> dict[str, Any]:
        return {"Records": [], "NextShardIterator": "iterator"}


class TrimmedStreams:
    def get_shard_iterator(self, **_: Any) -> None:
        raise ClientError({"Error": {"Code": "TrimmedDataAccessException"}}, "GetShardIterator")


def test_an_on_failure_message_whose_range_cannot_be_read_to_its_end_is_kept(ops: Ops) -> None:
    # Given an on-failure message, its row FAILED
    message = discarded_and_given_up(ops, "unread")
    rows = ops.rows()
    operator = Operator(actor="alice", reason="r")

    # When its range reads as nothing, or as trimmed
    for streams in (EmptyStreams(), TrimmedStreams()):
        report = operations(ops, streams=streams).redrive_on_failure_queue(operator)

        # Then the message is kept (unmapped, with why), and no row changed
        assert report.rows == []
        assert report.on_failure_messages_removed == 0
        (unmapped,) = report.unmapped_batches
        assert "is no longer in the stream; kept" in unmapped
        assert ops.messages(ops.on_failure_queue) == [message]
        assert ops.rows() == rows


def test_an_on_failure_message_of_another_stream_is_kept(ops: Ops) -> None:
    # Given a message in the on-failure queue naming another table's stream
    body = json.loads(discarded_and_given_up(ops, "other"))
    ops.sqs.purge_queue(QueueUrl=ops.on_failure_queue)
    body["DDBStreamBatchInfo"]["streamArn"] = "arn:aws:dynamodb:us-east-1:123456789012:table/other/stream/x"
    ops.sqs.send_message(QueueUrl=ops.on_failure_queue, MessageBody=json.dumps(body))

    # When the operator redrives the on-failure queue
    result = ops.cli("redrive", "--on-failure-queue", "--reason", "r", "--json")

    # Then nothing is redriven, and the message is kept, with why (the command fails: it is not settled)
    assert result.code == 1
    assert result.json["rows"] == []
    assert result.json["unmapped_batches"][0].endswith(
        "not an on-failure record of this outbox's stream; kept"
    )
    assert len(ops.messages(ops.on_failure_queue)) == 1


class FailingSecondUpdate:
    """DynamoDB throttling the second row update of a command."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self._updates = 0

    def update_item(self, **arguments: Any) -> Any:
        self._updates += 1
        if self._updates == 2:
            raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow"}}, "UpdateItem")
        return self._real.update_item(**arguments)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def test_a_row_aws_fails_midway_is_reported_and_the_rows_before_it_stay_done(ops: Ops) -> None:
    # Given two FAILED events, and DynamoDB throttling the second redrive's write
    first, _, _ = poisoned(ops, "mid-a")
    second, _, _ = poisoned(ops, "mid-b")
    real = ops.runtime.client("dynamodb")

    # When both are redriven
    report = operations(ops, dynamodb=FailingSecondUpdate(real)).redrive_failed(
        FailedFilter(), Operator(actor="alice", reason="r")
    )

    # Then the first is redriven (and its poison message removed), the second reported as an error, unchanged
    outcomes = {result.key: result.outcome for result in report.rows}
    assert sorted(outcomes.values()) == [Outcome.ERROR, Outcome.REDRIVEN]
    assert {ops.status_of(first), ops.status_of(second)} == {"PENDING", "FAILED"}
    assert report.poison_messages_removed == 1
    assert report.refused[0].detail.startswith("ThrottledError")


def test_usage_errors_exit_2_before_any_aws_call(ops: Ops) -> None:
    for argv, says in (
        (("skip", "--missing", "Order#1", "x", "--reason", "r"), "SEQ must be a whole number >= 1"),
        (("purge-published", "--older-than", "0d"), "a duration must be longer than 0"),
        (("redrive", "--on-failure-queue", "--event-type", "T", "--reason", "r"), "filter FAILED rows"),
        (("skip", "--reason", "r"), "one of the arguments"),
    ):
        result = ops.cli(*argv)
        assert result.code == 2, argv
        assert says in result.err, (argv, result.err)


class ThrottledStreams(EmptyStreams):
    def get_records(self, **_: Any) -> dict[str, Any]:
        raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow"}}, "GetRecords")


def test_an_on_failure_message_aws_fails_to_map_is_kept_and_the_report_survives(ops: Ops) -> None:
    # Given an on-failure message, and the stream throttling its reads
    message = discarded_and_given_up(ops, "throttled")

    # When the on-failure queue is redriven
    report = operations(ops, streams=ThrottledStreams()).redrive_on_failure_queue(
        Operator(actor="alice", reason="r")
    )

    # Then the message is kept, with why, and the command reports instead of failing as a whole
    (unmapped,) = report.unmapped_batches
    assert "ClientError" in unmapped
    assert unmapped.endswith("; kept")
    assert not report.complete
    assert ops.messages(ops.on_failure_queue) == [message]


def test_a_dry_run_release_of_a_gap_says_what_the_release_would_refuse(ops: Ops) -> None:
    # Given G#1 FAILED (unreleased), G#2 never written, G#3 PENDING behind the gap
    poisoned(ops, "gap-below")
    ops.dynamodb.delete_item(
        TableName=ops.table, Key={"aggregate_key": {"S": "Order#gap-below"}, "seq": {"N": "2"}}
    )
    ops.put(new("gap-below", 3))
    rows = ops.rows()

    # When the operator releases the gap as a dry run
    result = ops.cli("skip", "--missing", "Order#gap-below", "2", "--reason", "r", "--dry-run", "--json")

    # Then it says the release would be refused, as the real one is, and nothing changed
    assert result.code == 1
    (row,) = result.json["rows"]
    assert row["outcome"] == "refused"
    assert "seq 1, below the gap, is not out" in row["detail"]
    assert ops.rows() == rows
    real = ops.cli("skip", "--missing", "Order#gap-below", "2", "--reason", "r", "--json")
    assert "seq 1, below the gap, is not out" in real.json["rows"][0]["detail"]
