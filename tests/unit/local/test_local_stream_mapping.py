"""The stream mapping emulator against AWS Lambda's documented behaviour for DynamoDB streams, case by case.

Sources: "Configuring partial batch response with DynamoDB and Lambda" (services-ddb-batchfailurereporting),
"Retain discarded records for a DynamoDB event source in Lambda" (services-dynamodb-errors) and
"Lambda parameters for Amazon DynamoDB event source mappings" (services-ddb-params).

This file: batching, filtering, success and partial batch responses. Failures, retries, bisection,
record age and the on-failure destination: test_local_stream_mapping_failures.py."""

from __future__ import annotations

from typing import Any

import pytest
from aws_lambda_powertools.utilities.parser.models import (
    DynamoDBStreamModel,
)

from outbox_local.invocation import InvocationResult
from outbox_local.stream_mapping import (
    MAX_INVOCATION_PAYLOAD_BYTES,
    MappingSettings,
    ShardProcessor,
    StepKind,
)
from outbox_local.stream_records import StreamRecord
from tests.support.clock import FakeClock
from tests.unit.local.shard_harness import (
    FUNCTION_ARN,
    INSERT_ONLY,
    STREAM_ARN,
    ScriptedFunction,
    drain,
    in_turn,
    processor,
    record,
    reports,
)


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


def test_a_batch_is_cut_before_its_invocation_payload_passes_6_mb() -> None:
    # Given twenty records of about 400 KB each (the largest DynamoDB item): 8 MB, under BatchSize 100
    function = ScriptedFunction()
    shard = processor(function, batch_size=100)
    records = [large_record(n, 400_000) for n in range(1, 21)]
    shard.offer(records)

    # When the mapping drains the shard
    drain(shard)

    # Then no invocation carried more than Lambda's 6 MB, none was empty, and every record went, in order
    sizes = [sum(r.size for r in records if r.sequence_number in batch) for batch in function.batches]
    assert len(function.batches) == 2
    assert all(size <= MAX_INVOCATION_PAYLOAD_BYTES for size in sizes)
    assert [n for batch in function.batches for n in batch] == [str(n) for n in range(1, 21)]


def test_a_batch_that_reached_6_mb_is_sent_without_waiting_out_the_window() -> None:
    # Given a 300 s batching window and 6 MB of records already gathered
    clock = FakeClock(1_000)
    function = ScriptedFunction()
    shard = processor(function, clock, batch_size=1000, maximum_batching_window_s=300)
    shard.offer([large_record(n, 400_000) for n in range(1, 17)])

    # When the mapping steps, Then it invokes at once with what fits
    assert shard.step().kind is StepKind.SUCCEEDED
    assert len(function.batches[0]) == 15


def large_record(sequence_number: int, payload_bytes: int) -> StreamRecord:
    """A record whose new image holds `payload_bytes` of text."""
    small = record(sequence_number)
    payload = dict(small.payload)
    payload["dynamodb"] = {**payload["dynamodb"], "NewImage": {"payload": {"S": "x" * payload_bytes}}}
    return StreamRecord(payload, small.sequence_number, small.created_at)


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


def test_filtered_records_inside_a_processed_batch_leave_nothing_behind() -> None:
    # Given an INSERT-only filter, and MODIFYs directly after INSERTs that are not the last of their batch
    function = ScriptedFunction()
    shard = processor(function, filters=INSERT_ONLY)
    shard.offer([record(n, event_name="MODIFY" if n % 2 == 0 else "INSERT") for n in range(1, 9)])

    # When the batch succeeds
    assert shard.step().kind is StepKind.SUCCEEDED

    # Then the checkpoint is past the last record, and no filtered record is remembered any longer (the
    # processor kept one entry per such record for the shard's life: a leak on a long run)
    assert function.batches == [["1", "3", "5", "7"]]
    assert shard.checkpoint == "8"
    assert shard._filtered_after == {}


def test_filtered_records_between_a_success_and_a_partial_failure_are_checkpointed_past() -> None:
    # Given ReportBatchItemFailures, records 1 and 3 accepted, 2 filtered out, and 3 reported failed once
    function = ScriptedFunction(in_turn(reports("3"), reports()))
    shard = processor(function, filters=INSERT_ONLY, report_batch_item_failures=True)
    shard.offer([record(1), record(2, event_name="MODIFY"), record(3)])

    # When the batch partially fails
    assert shard.step().kind is StepKind.PARTIAL_FAILURE

    # Then the checkpoint is just before the failed record, past the dropped one
    assert shard.checkpoint == "2"
