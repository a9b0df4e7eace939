"""The stream mapping emulator when things fail: function errors, retries, bisection, record age and the
on-failure destination, each case against AWS Lambda's documented behaviour (sources: see
test_local_stream_mapping.py)."""

from __future__ import annotations

from typing import Any

import pytest
from aws_lambda_powertools.utilities.parser.models import (
    DynamoDBStreamLambdaOnFailureDestinationModel,
)

from outbox_local.stream_mapping import (
    MappingSettings,
    ShardProcessor,
    StepKind,
)
from tests.support.clock import FakeClock
from tests.unit.local.shard_harness import (
    DESTINATION_ARN,
    FUNCTION_ARN,
    STREAM_ARN,
    FlakyDestination,
    ScriptedFunction,
    drain,
    fails_on,
    in_turn,
    processor,
    record,
    reports,
)


def test_function_error_retries_the_batch_until_maximum_retry_attempts_then_sends_metadata() -> None:
    # Given MaximumRetryAttempts 2, an on-failure destination and a function that always raises
    destination: list[dict[str, Any]] = []
    function = ScriptedFunction(fails_on("1"))
    shard = processor(function, destination=destination, maximum_retry_attempts=2)
    shard.offer([record(1, created_at=990), record(2, created_at=995)])

    # When the mapping runs
    kinds = drain(shard)

    # Then the batch ran once plus two retries, and then the destination got its metadata
    assert kinds == [StepKind.FAILED] * 3
    assert len(function.batches) == 3
    assert shard.checkpoint == "2"  # discarded: the shard moves on
    (sent,) = destination
    assert sent["requestContext"] == {
        "requestId": "req-1",
        "functionArn": FUNCTION_ARN,
        "condition": "RetryAttemptsExhausted",
        "approximateInvokeCount": 3,
    }
    assert sent["responseContext"] == {
        "statusCode": 200,
        "executedVersion": "$LATEST",
        "functionError": "Unhandled",
    }
    assert sent["version"] == "1.0"
    assert sent["DDBStreamBatchInfo"] == {
        "shardId": "shardId-1",
        "startSequenceNumber": "1",
        "endSequenceNumber": "2",
        "approximateArrivalOfFirstRecord": "1970-01-01T00:16:30Z",
        "approximateArrivalOfLastRecord": "1970-01-01T00:16:35Z",
        "batchSize": 2,
        "streamArn": STREAM_ARN,
    }


def test_maximum_retry_attempts_zero_discards_after_the_first_failure() -> None:
    # Given MaximumRetryAttempts 0
    destination: list[dict[str, Any]] = []
    function = ScriptedFunction(fails_on("1"))
    shard = processor(function, destination=destination, maximum_retry_attempts=0)
    shard.offer([record(1)])

    # When the mapping runs, Then there is no retry
    assert drain(shard) == [StepKind.FAILED]
    assert destination[0]["requestContext"]["approximateInvokeCount"] == 1


def test_default_retry_attempts_are_infinite() -> None:
    # Given the default MaximumRetryAttempts (-1) and a poison record
    function = ScriptedFunction(fails_on("1"))
    shard = processor(function)
    shard.offer([record(1), record(2)])

    # When the mapping runs many times, Then it keeps retrying and never moves past the poison record
    for _ in range(50):
        assert shard.step().kind is StepKind.FAILED
    assert shard.checkpoint is None
    assert shard.backlog == 2


def test_bisect_splits_a_failing_batch_without_consuming_the_retry_quota() -> None:
    # Given BisectBatchOnFunctionError, MaximumRetryAttempts 1 and a poison record at position 3 of 4
    destination: list[dict[str, Any]] = []
    function = ScriptedFunction(fails_on("3"))
    shard = processor(
        function, destination=destination, bisect_batch_on_function_error=True, maximum_retry_attempts=1
    )
    shard.offer([record(n) for n in range(1, 5)])

    # When the mapping drains the shard
    kinds = drain(shard)

    # Then halves were retried until the poison record stood alone; only it used retries and was discarded
    assert function.batches == [["1", "2", "3", "4"], ["1", "2"], ["3", "4"], ["3"], ["3"], ["4"]]
    assert kinds == [
        StepKind.BISECTED,
        StepKind.SUCCEEDED,
        StepKind.BISECTED,
        StepKind.FAILED,
        StepKind.FAILED,
        StepKind.SUCCEEDED,
    ]
    (sent,) = destination
    assert sent["DDBStreamBatchInfo"]["startSequenceNumber"] == "3"
    assert sent["DDBStreamBatchInfo"]["batchSize"] == 1
    assert sent["requestContext"]["approximateInvokeCount"] == 4  # 4-record, 2-record and two 1-record tries
    assert shard.checkpoint == "4"


def test_partial_failure_with_bisect_retries_only_the_remaining_records() -> None:
    # Given both BisectBatchOnFunctionError and ReportBatchItemFailures, and record 3 failing once
    function = ScriptedFunction(in_turn(reports("3"), reports()))
    shard = processor(function, report_batch_item_failures=True, bisect_batch_on_function_error=True)
    shard.offer([record(n) for n in range(1, 5)])

    # When the mapping drains the shard
    drain(shard)

    # Then the batch was split at the returned sequence number and only 3..4 retried
    assert function.batches == [["1", "2", "3", "4"], ["3", "4"]]


def test_partial_failures_use_retry_attempts_and_exhaustion_discards_only_the_failed_suffix() -> None:
    # Given MaximumRetryAttempts 2 and a function that always reports record 2 as failed
    destination: list[dict[str, Any]] = []
    function = ScriptedFunction(reports("2"))
    shard = processor(
        function, destination=destination, report_batch_item_failures=True, maximum_retry_attempts=2
    )
    shard.offer([record(1), record(2), record(3)])

    # When the mapping drains the shard
    drain(shard)

    # Then record 1 was committed, 2..3 were retried twice and then discarded as one range
    assert function.batches == [["1", "2", "3"], ["2", "3"], ["2", "3"]]
    (sent,) = destination
    assert sent["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert sent["requestContext"]["approximateInvokeCount"] == 3
    assert "functionError" not in sent["responseContext"]  # the function returned normally
    info = sent["DDBStreamBatchInfo"]
    assert (info["startSequenceNumber"], info["endSequenceNumber"], info["batchSize"]) == ("2", "3", 2)


def test_records_older_than_maximum_record_age_are_discarded_with_record_age_exceeded() -> None:
    # Given MaximumRecordAgeInSeconds 60, a record written 61 s ago and one written 10 s ago
    clock = FakeClock(2_000)
    destination: list[dict[str, Any]] = []
    function = ScriptedFunction()
    shard = processor(function, clock, destination=destination, maximum_record_age_s=60)
    shard.offer([record(1, created_at=1_939), record(2, created_at=1_990)])

    # When the mapping runs
    first = shard.step()
    second = shard.step()

    # Then the old record is discarded without an invocation and the young one is delivered
    assert first.kind is StepKind.DISCARDED
    assert first.condition == "RecordAgeExceeded"
    assert second.kind is StepKind.SUCCEEDED
    assert function.batches == [["2"]]
    assert destination[0]["requestContext"]["condition"] == "RecordAgeExceeded"
    assert destination[0]["requestContext"]["approximateInvokeCount"] == 0


def test_record_age_is_checked_again_before_each_retry() -> None:
    # Given MaximumRecordAgeInSeconds 60 and a function that fails while time passes
    clock = FakeClock(1_000)
    destination: list[dict[str, Any]] = []
    function = ScriptedFunction(fails_on("1"))
    shard = processor(function, clock, destination=destination, maximum_record_age_s=60)
    shard.offer([record(1, created_at=1_000)])
    assert shard.step().kind is StepKind.FAILED

    # When the record has grown older than the limit before the retry (t=1061)
    clock.advance(61)
    report = shard.step()

    # Then it is discarded instead of retried, and the metadata says it had been invoked once
    assert report.kind is StepKind.DISCARDED
    assert destination[0]["requestContext"]["approximateInvokeCount"] == 1
    assert destination[0]["responseContext"]["functionError"] == "Unhandled"


def test_without_a_destination_discarded_records_are_bypassed() -> None:
    # Given no on-failure destination and MaximumRetryAttempts 0
    function = ScriptedFunction(fails_on("1"))
    shard = processor(function, maximum_retry_attempts=0)
    shard.offer([record(1), record(2)])

    # When the batch fails and a new record arrives afterwards
    assert shard.step().kind is StepKind.FAILED
    shard.offer([record(3)])
    drain(shard)

    # Then the shard moves on past the failed batch
    assert shard.discarded_records == 2
    assert function.batches[-1] == ["3"]
    assert shard.checkpoint == "3"


def test_retry_delay_paces_retries_on_the_injected_clock() -> None:
    # Given a retry delay of 2 s
    clock = FakeClock(1_000)
    function = ScriptedFunction(fails_on("1"))
    shard = processor(function, clock, retry_delay_s=2)
    shard.offer([record(1)])
    assert shard.step().kind is StepKind.FAILED

    # When less than the delay has passed (t=1001.9), Then it waits; afterwards (t=1002) it retries
    clock.advance(1.9)
    assert shard.step().kind is StepKind.WAITING
    clock.advance(0.1)
    assert shard.step().kind is StepKind.FAILED


def test_the_on_failure_record_parses_as_powertools_models_it() -> None:
    # Given an exhausted batch
    destination: list[dict[str, Any]] = []
    shard = processor(ScriptedFunction(fails_on("7")), destination=destination, maximum_retry_attempts=0)
    shard.offer([record(7)])
    drain(shard)

    # When the record is parsed with Powertools' model of the documented format, Then it validates
    parsed = DynamoDBStreamLambdaOnFailureDestinationModel.model_validate(destination[0])
    assert parsed.ddb_stream_batch_info.start_sequence_number == "7"
    assert parsed.request_context.condition == "RetryAttemptsExhausted"


def test_an_unreachable_destination_loses_neither_the_metadata_nor_the_records_place() -> None:
    # Given MaximumRetryAttempts 0 and an on-failure destination that fails its first send
    destination = FlakyDestination(failures=1)
    function = ScriptedFunction(fails_on("1"))
    settings = MappingSettings(
        function_arn=FUNCTION_ARN,
        stream_arn=STREAM_ARN,
        maximum_retry_attempts=0,
        on_failure_destination_arn=DESTINATION_ARN,
    )
    shard = ShardProcessor(
        settings,
        shard_id="shardId-1",
        invoke=function,
        send_to_destination=destination,
        clock=FakeClock(1_000).seconds,
    )
    shard.offer([record(1), record(2)])

    # When the batch is exhausted and the metadata cannot be sent
    with pytest.raises(ConnectionError):
        shard.step()

    # Then nothing was discarded yet: the shard has not moved past the batch
    assert shard.checkpoint is None
    assert shard.discarded_records == 0
    assert shard.backlog == 2

    # When the mapping steps again with the destination back
    report = shard.step()

    # Then the metadata is sent once, without invoking the function again, and the shard moves on
    assert report.kind is StepKind.DISCARDED
    assert report.condition == "RetryAttemptsExhausted"
    assert len(function.batches) == 1
    (sent,) = destination.sent
    assert sent["requestContext"]["approximateInvokeCount"] == 1
    assert sent["DDBStreamBatchInfo"]["batchSize"] == 2
    assert shard.checkpoint == "2"
    assert shard.discarded_records == 2


def test_an_unreachable_destination_for_expired_records_is_retried_without_double_counting() -> None:
    # Given MaximumRecordAgeInSeconds 60, an expired record and a destination that fails its first send
    destination = FlakyDestination(failures=1)
    settings = MappingSettings(
        function_arn=FUNCTION_ARN,
        stream_arn=STREAM_ARN,
        maximum_record_age_s=60,
        on_failure_destination_arn=DESTINATION_ARN,
    )
    function = ScriptedFunction()
    shard = ShardProcessor(
        settings,
        shard_id="shardId-1",
        invoke=function,
        send_to_destination=destination,
        clock=FakeClock(2_000).seconds,
    )
    shard.offer([record(1, created_at=1_000)])

    # When the first discard fails and the next one succeeds
    with pytest.raises(ConnectionError):
        shard.step()
    assert shard.step().kind is StepKind.DISCARDED

    # Then one record was discarded, once, and the function never saw it
    assert shard.discarded_records == 1
    assert len(destination.sent) == 1
    assert function.batches == []
    assert shard.checkpoint == "1"
