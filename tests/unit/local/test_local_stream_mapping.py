"""The stream mapping emulator against AWS Lambda's documented behaviour for DynamoDB streams, case by case.

Sources: "Configuring partial batch response with DynamoDB and Lambda" (services-ddb-batchfailurereporting),
"Retain discarded records for a DynamoDB event source in Lambda" (services-dynamodb-errors) and
"Lambda parameters for Amazon DynamoDB event source mappings" (services-ddb-params).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from aws_lambda_powertools.utilities.parser.models import (
    DynamoDBStreamLambdaOnFailureDestinationModel,
    DynamoDBStreamModel,
)

from outbox_local.filtering import FilterCriteria
from outbox_local.invocation import InvocationResult
from outbox_local.stream_mapping import (
    MappingSettings,
    ShardProcessor,
    StepKind,
    StreamRecord,
    lambda_record,
)
from tests.support.clock import FakeClock

STREAM_ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/Outbox/stream/2026-01-01T00:00:00.000"
FUNCTION_ARN = "arn:aws:lambda:us-east-1:123456789012:function:publisher"
DESTINATION_ARN = "arn:aws:sqs:us-east-1:123456789012:on-failure"
INSERT_ONLY = FilterCriteria.from_template({"Filters": [{"Pattern": json.dumps({"eventName": ["INSERT"]})}]})


class ScriptedFunction:
    """A function whose answer to each invocation is decided by `respond(sequence_numbers)`."""

    def __init__(self, respond: Callable[[list[str]], InvocationResult] | None = None) -> None:
        self.batches: list[list[str]] = []
        self._respond = respond or (lambda _: InvocationResult(payload=None))

    def __call__(self, event: dict[str, Any]) -> InvocationResult:
        sequence_numbers = [r["dynamodb"]["SequenceNumber"] for r in event["Records"]]
        self.batches.append(sequence_numbers)
        return self._respond(sequence_numbers)


def fails_on(poison: str) -> Callable[[list[str]], InvocationResult]:
    def respond(batch: list[str]) -> InvocationResult:
        if poison in batch:
            return InvocationResult(error_type="ValueError", error_message="poison")
        return InvocationResult(payload=None)

    return respond


def reports(*failed: str) -> Callable[[list[str]], InvocationResult]:
    def respond(batch: list[str]) -> InvocationResult:
        items = [{"itemIdentifier": s} for s in failed if s in batch]
        return InvocationResult(payload={"batchItemFailures": items})

    return respond


def in_turn(*responders: Callable[[list[str]], InvocationResult]) -> Callable[[list[str]], InvocationResult]:
    """Answer the n-th invocation with the n-th responder."""
    remaining = iter(responders)

    def respond(batch: list[str]) -> InvocationResult:
        return next(remaining)(batch)

    return respond


def record(sequence_number: int, created_at: float = 1_000.0, event_name: str = "INSERT") -> StreamRecord:
    raw = {
        "eventID": f"id-{sequence_number}",
        "eventName": event_name,
        "dynamodb": {
            "ApproximateCreationDateTime": datetime.fromtimestamp(created_at, UTC),
            "Keys": {"pk": {"S": f"k{sequence_number}"}},
            "NewImage": {"pk": {"S": f"k{sequence_number}"}},
            "SequenceNumber": str(sequence_number),
            "SizeBytes": 10,
            "StreamViewType": "NEW_IMAGE",
        },
    }
    return lambda_record(raw, STREAM_ARN, "us-east-1")


def processor(
    function: ScriptedFunction,
    clock: FakeClock | None = None,
    destination: list[dict[str, Any]] | None = None,
    **settings: Any,
) -> ShardProcessor:
    config = MappingSettings(
        function_arn=FUNCTION_ARN,
        stream_arn=STREAM_ARN,
        on_failure_destination_arn=DESTINATION_ARN if destination is not None else None,
        **settings,
    )
    sink = destination.append if destination is not None else None
    return ShardProcessor(
        config,
        shard_id="shardId-1",
        invoke=function,
        send_to_destination=sink,
        clock=(clock or FakeClock(1_000)).seconds,
        new_request_id=lambda: "req-1",
    )


def drain(shard: ShardProcessor, limit: int = 100) -> list[StepKind]:
    kinds: list[StepKind] = []
    for _ in range(limit):
        report = shard.step()
        if report.kind in {StepKind.IDLE, StepKind.WAITING}:
            return kinds
        kinds.append(report.kind)
    raise AssertionError("processor did not settle")


def test_success_checkpoints_after_the_last_record_of_the_batch() -> None:
    # Given three records and a function that succeeds
    function = ScriptedFunction()
    shard = processor(function)
    shard.offer([record(1), record(2), record(3)])

    # When the mapping runs
    report = shard.step()

    # Then one invocation carried all three and the checkpoint is after the last one
    assert report.kind is StepKind.SUCCEEDED
    assert function.batches == [["1", "2", "3"]]
    assert shard.checkpoint == "3"
    assert shard.step().kind is StepKind.IDLE


def test_batch_size_bounds_the_records_of_each_invocation() -> None:
    # Given five records and BatchSize 2
    function = ScriptedFunction()
    shard = processor(function, batch_size=2)
    shard.offer([record(n) for n in range(1, 6)])

    # When the mapping drains the shard
    drain(shard)

    # Then batches are cut at two records, in shard order
    assert function.batches == [["1", "2"], ["3", "4"], ["5"]]


def test_batching_window_waits_for_a_full_batch_or_the_end_of_the_window() -> None:
    # Given MaximumBatchingWindowInSeconds 5 and BatchSize 3, with one record received at t=1000
    clock = FakeClock(1_000)
    function = ScriptedFunction()
    shard = processor(function, clock, batch_size=3, maximum_batching_window_s=5)
    shard.offer([record(1)])

    # When the window has not passed (t=1004.9), Then Lambda keeps gathering
    clock.advance(4.9)
    assert shard.step().kind is StepKind.WAITING
    # When the window has passed (t=1005), Then the partial batch is sent
    clock.advance(0.1)
    assert shard.step().kind is StepKind.SUCCEEDED
    # When a full batch is available, Then it is sent without waiting for the window
    shard.offer([record(2), record(3), record(4)])
    assert shard.step().kind is StepKind.SUCCEEDED
    assert function.batches == [["1"], ["2", "3", "4"]]


def test_filter_criteria_drop_records_that_match_no_pattern_before_batching() -> None:
    # Given an INSERT-only filter and a MODIFY between two INSERTs
    function = ScriptedFunction()
    shard = processor(function, filters=INSERT_ONLY)
    shard.offer([record(1), record(2, event_name="MODIFY"), record(3)])

    # When the mapping runs
    drain(shard)

    # Then the function never sees the MODIFY
    assert function.batches == [["1", "3"]]
    assert shard.filtered_out == 1


def test_partial_failure_checkpoints_at_the_lowest_reported_sequence_number_and_resends_from_there() -> None:
    # Given ReportBatchItemFailures and a function reporting records 4 and 2 as failed, once
    function = ScriptedFunction(in_turn(reports("4", "2"), reports()))
    shard = processor(function, report_batch_item_failures=True)
    shard.offer([record(n) for n in range(1, 6)])

    # When the mapping runs
    first = shard.step()
    second = shard.step()

    # Then Lambda checkpointed after 1 (before the lowest failure, 2) and re-sent 2..5, including 3 and 5
    assert first.kind is StepKind.PARTIAL_FAILURE
    assert first.committed == ("1",)
    assert function.batches == [["1", "2", "3", "4", "5"], ["2", "3", "4", "5"]]
    assert second.kind is StepKind.SUCCEEDED
    assert shard.checkpoint == "5"


@pytest.mark.parametrize(
    "response",
    [None, {}, {"batchItemFailures": []}, {"batchItemFailures": None}, "ok"],
    ids=["null-response", "empty-response", "empty-list", "null-list", "non-object"],
)
def test_empty_or_null_batch_item_failures_are_a_complete_success(response: object) -> None:
    # Given ReportBatchItemFailures and a function returning an empty or null response
    function = ScriptedFunction(lambda _: InvocationResult(payload=response))
    shard = processor(function, report_batch_item_failures=True)
    shard.offer([record(1), record(2)])

    # When the mapping runs, Then the batch counts as a complete success
    assert shard.step().kind is StepKind.SUCCEEDED
    assert shard.checkpoint == "2"


@pytest.mark.parametrize(
    "failures",
    [
        [{"itemIdentifier": ""}],
        [{"itemIdentifier": None}],
        [{"itemIdentifierr": "2"}],
        [{"itemIdentifier": "99"}],
        "2",
    ],
    ids=["empty-string", "null", "wrong-key-name", "not-in-batch", "not-a-list"],
)
def test_an_invalid_item_identifier_fails_the_whole_batch(failures: object) -> None:
    # Given ReportBatchItemFailures and a function answering with an unusable identifier once
    answers = iter([InvocationResult(payload={"batchItemFailures": failures}), InvocationResult()])
    function = ScriptedFunction(lambda _: next(answers))
    shard = processor(function, report_batch_item_failures=True)
    shard.offer([record(1), record(2), record(3)])

    # When the mapping runs
    report = shard.step()

    # Then nothing was committed and the whole batch is retried
    assert report.kind is StepKind.FAILED
    assert shard.checkpoint is None
    assert shard.step().kind is StepKind.SUCCEEDED
    assert function.batches == [["1", "2", "3"], ["1", "2", "3"]]


def test_batch_item_failures_are_ignored_unless_the_mapping_enables_them() -> None:
    # Given a mapping without ReportBatchItemFailures and a function reporting a failure
    function = ScriptedFunction(reports("2"))
    shard = processor(function)
    shard.offer([record(1), record(2)])

    # When the mapping runs, Then Lambda does not process the response: the batch succeeded
    assert shard.step().kind is StepKind.SUCCEEDED
    assert shard.checkpoint == "2"


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


def test_records_are_shaped_as_lambda_delivers_them() -> None:
    # Given a GetRecords record as moto returns it (no eventSourceARN, a datetime creation time)
    function = ScriptedFunction()
    captured: list[dict[str, Any]] = []

    def capture(event: dict[str, Any]) -> InvocationResult:
        captured.append(event)
        return function(event)

    settings = MappingSettings(function_arn=FUNCTION_ARN, stream_arn=STREAM_ARN)
    shard = ShardProcessor(
        settings, shard_id="s", invoke=capture, send_to_destination=None, clock=FakeClock(1_000).seconds
    )
    shard.offer([record(5, created_at=1_700_000_000.75)])

    # When it is delivered
    shard.step()

    # Then it has the Lambda shape, and Powertools' DynamoDB stream model accepts the event
    (shaped,) = captured[0]["Records"]
    assert shaped["eventSourceARN"] == STREAM_ARN
    assert shaped["eventVersion"] == "1.1"
    assert shaped["eventSource"] == "aws:dynamodb"
    assert shaped["dynamodb"]["ApproximateCreationDateTime"] == 1_700_000_000
    assert set(shaped["dynamodb"]) == {
        "ApproximateCreationDateTime",
        "Keys",
        "NewImage",
        "SequenceNumber",
        "SizeBytes",
        "StreamViewType",
    }
    DynamoDBStreamModel.model_validate(captured[0])


def test_filtered_records_behind_an_outstanding_record_are_checkpointed_past_once_it_is_processed() -> None:
    # Given an INSERT-only filter and a MODIFY that arrives while the INSERT before it is still outstanding
    function = ScriptedFunction()
    shard = processor(function, filters=INSERT_ONLY)
    shard.offer([record(1), record(2, event_name="MODIFY"), record(3, event_name="REMOVE")])

    # When the INSERT's batch succeeds
    assert shard.step().kind is StepKind.SUCCEEDED

    # Then the dropped records count as processed: the checkpoint is past them, not at the INSERT
    assert function.batches == [["1"]]
    assert shard.checkpoint == "3"


def test_filtered_records_between_a_success_and_a_partial_failure_are_checkpointed_past() -> None:
    # Given ReportBatchItemFailures, records 1 and 3 accepted, 2 filtered out, and 3 reported failed once
    function = ScriptedFunction(in_turn(reports("3"), reports()))
    shard = processor(function, filters=INSERT_ONLY, report_batch_item_failures=True)
    shard.offer([record(1), record(2, event_name="MODIFY"), record(3)])

    # When the batch partially fails
    assert shard.step().kind is StepKind.PARTIAL_FAILURE

    # Then the checkpoint is just before the failed record, past the dropped one
    assert shard.checkpoint == "2"


class FlakyDestination:
    """An on-failure destination that is unreachable for its first `failures` sends."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.sent: list[dict[str, Any]] = []

    def __call__(self, document: dict[str, Any]) -> None:
        if self.failures:
            self.failures -= 1
            raise ConnectionError("destination unreachable")
        self.sent.append(document)


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
