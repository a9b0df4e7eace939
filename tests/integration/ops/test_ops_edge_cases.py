"""What the operations commands do when asked for too much, when AWS answers badly, or when a message or a
range cannot be settled: say so, per row, change nothing for it, and keep what they could not settle."""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from outbox_ops.failed import FailedFilter
from outbox_ops.redrive import Operator, Outcome
from tests.integration.ops.conftest import Ops
from tests.integration.ops.test_ops_redrive_and_skip import discarded, operations, poisoned
from tests.integration.ops.test_ops_status_and_failed import new


def discarded_and_given_up(ops: Ops, aggregate_id: str) -> str:
    """A record the stream mapping discarded (an on-failure message) whose row the sweeper gave up on."""
    key, message = discarded(ops, aggregate_id)
    ops.mark_failed(key)
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


class FailingSecondTransaction:
    """DynamoDB throttling the second row change of a command (each is one transaction: row and audit)."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self._transactions = 0

    def transact_write_items(self, **arguments: Any) -> Any:
        self._transactions += 1
        if self._transactions == 2:
            raise ClientError(
                {"Error": {"Code": "ThrottlingException", "Message": "slow"}}, "TransactWriteItems"
            )
        return self._real.transact_write_items(**arguments)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def test_a_row_aws_fails_midway_is_reported_and_the_rows_before_it_stay_done(ops: Ops) -> None:
    # Given two FAILED events, and DynamoDB throttling the second redrive's write
    first, _, _ = poisoned(ops, "mid-a")
    second, _, _ = poisoned(ops, "mid-b")
    real = ops.runtime.client("dynamodb")

    # When both are redriven
    report = operations(ops, dynamodb=FailingSecondTransaction(real)).redrive_failed(
        FailedFilter(), Operator(actor="alice", reason="r")
    )

    # Then the first is redriven (audited, its poison message removed), the second reported as an error and
    # unchanged: its row FAILED, no audit record
    outcomes = {result.outcome: result.key for result in report.rows}
    assert sorted(outcomes) == [Outcome.ERROR, Outcome.REDRIVEN]
    done, failed = outcomes[Outcome.REDRIVEN], outcomes[Outcome.ERROR]
    assert done is not None
    assert failed is not None
    assert {done, failed} == {first, second}
    assert (ops.status_of(done), ops.status_of(failed)) == ("PENDING", "FAILED")
    assert [e["action"]["S"] for e in ops.audit(done)] == ["redrive"]
    assert ops.audit(failed) == []
    assert report.poison_messages_removed == 1
    assert report.refused[0].detail.startswith("ThrottledError")


def test_usage_errors_exit_2_before_any_aws_call(ops: Ops) -> None:
    for argv, says in (
        (("status", "--scan-for", "0s"), "a duration must be longer than 0"),
        (("redrive", "--on-failure-queue", "--event-type", "T", "--reason", "r"), "filter FAILED rows"),
        (("skip", "--reason", "r"), "the following arguments are required: EVENT_ID"),
        (("redrive", "--reason", "r"), "one of the arguments"),
        (("audit", "--aggregate"), "expected one argument"),
        # What an earlier release had and this one does not: refused as unknown, never half understood
        (("purge-published", "--older-than", "30d"), "invalid choice: 'purge-published'"),
        (("skip", "--missing", "Order#1", "2", "--reason", "r"), "unrecognized arguments"),
        (("failed", "reindex"), "invalid choice: 'reindex'"),
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


def test_a_skip_of_an_event_that_is_not_failed_is_refused_and_changes_nothing(ops: Ops) -> None:
    # Given a PENDING event, and a FAILED one the operator has skipped already
    pending = ops.put(new("not-failed", 1))
    pending_id = ops.row(pending)["event_id"]["S"]
    _, _, skipped_id = poisoned(ops, "skipped-twice")
    assert ops.cli("skip", skipped_id, "--reason", "superseded").code == 0
    rows = ops.rows()

    # When the operator skips either
    for event_id in (pending_id, skipped_id):
        result = ops.cli("skip", event_id, "--reason", "r")

        # Then it is refused in one line that points to the audit, and nothing changed
        assert result.code == 1
        assert result.err.startswith(f"outbox: no FAILED row has event_id {event_id} (")
        assert "outbox audit lists what operators did" in result.err
        assert ops.rows() == rows


def test_a_redrive_when_nothing_is_failed_says_so(ops: Ops) -> None:
    # Given an outbox without FAILED rows
    ops.put(new("nothing-failed", 1))
    rows = ops.rows()

    # When the operator redrives every FAILED event
    result = ops.cli("redrive", "--all", "--reason", "r")

    # Then it fails in one line, and nothing changed
    assert (result.code, result.err) == (1, "outbox: no FAILED row matches: see `outbox failed list`\n")
    assert ops.rows() == rows
