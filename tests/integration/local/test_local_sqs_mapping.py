"""SQS event source mappings on the local runtime (`outbox_local.queue_mapping`): what Lambda does with a
queue, against moto's SQS, with a real boto3 client. Mappings are driven step by step (`drain_streams`),
never by sleeping. moto keeps visibility timeouts in real time (60 s on these queues), so a message that a
failure left in flight stays invisible for the whole test.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from aws_lambda_powertools.utilities.parser.models import SqsModel

from outbox_local.errors import UnsupportedResourceError
from outbox_local.queue_mapping import QueueMappingRunner
from outbox_local.queues import receive_all
from outbox_local.runtime import LocalRuntime
from outbox_local.stream_mapping import StepKind, StepReport
from outbox_ops.queues import QueueDepth, depth
from tests.support.local_templates import options, queue_template, write_template

EMPTY = QueueDepth(visible=0, in_flight=0)


def runtime_on(tmp_path: Path, body: dict[str, Any], **overrides: Any) -> LocalRuntime:
    """A runtime on `body`, not started yet (it starts as a context manager)."""
    return LocalRuntime(options(write_template(tmp_path, body), **overrides))


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[LocalRuntime]:
    with LocalRuntime(options(write_template(tmp_path, queue_template()))) as started:
        yield started


def send(runtime: LocalRuntime, *bodies: str, queue: str = "WorkUrl") -> list[str]:
    """Send each body; the message ids, in order."""
    sqs = runtime.client("sqs")
    return [sqs.send_message(QueueUrl=runtime.outputs[queue], MessageBody=b)["MessageId"] for b in bodies]


def seen_events(runtime: LocalRuntime) -> list[dict[str, Any]]:
    """The events the function received, one per invocation."""
    sqs = runtime.client("sqs")
    return [json.loads(message["Body"]) for message in receive_all(sqs, runtime.outputs["SeenUrl"])]


def queue_depth(runtime: LocalRuntime, queue: str = "WorkUrl") -> QueueDepth:
    return depth(runtime.client("sqs"), runtime.outputs[queue])


def queue_arn(runtime: LocalRuntime, queue: str = "WorkUrl") -> str:
    answer = runtime.client("sqs").get_queue_attributes(
        QueueUrl=runtime.outputs[queue], AttributeNames=["QueueArn"]
    )
    return str(answer["Attributes"]["QueueArn"])


def mapping_named(runtime: LocalRuntime, name: str) -> QueueMappingRunner:
    return next(mapping for mapping in runtime.queue_mappings if mapping.name == name)


def observed(runtime: LocalRuntime, name: str = "WorkMapping") -> list[StepReport]:
    reports: list[StepReport] = []
    mapping_named(runtime, name).listeners.append(reports.append)
    return reports


def test_a_message_reaches_the_function_as_lambda_sends_it_and_success_deletes_it(
    runtime: LocalRuntime,
) -> None:
    # Given a message with a string, a number and a binary attribute on the standard queue
    sent = runtime.client("sqs").send_message(
        QueueUrl=runtime.outputs["WorkUrl"],
        MessageBody="hello",
        MessageAttributes={
            "trace": {"DataType": "String", "StringValue": "t-1"},
            "count": {"DataType": "Number", "StringValue": "3"},
            "blob": {"DataType": "Binary", "BinaryValue": b"\x00\xff"},
        },
    )

    # When the mappings run
    runtime.drain_streams()

    # Then the function got one event with the record exactly as Lambda shapes it
    (event,) = seen_events(runtime)
    SqsModel.model_validate(event)
    assert list(event) == ["Records"]
    (record,) = event["Records"]
    attributes, receipt_handle = record.pop("attributes"), record.pop("receiptHandle")
    assert isinstance(receipt_handle, str)
    assert receipt_handle
    lists: dict[str, Any] = {"stringListValues": [], "binaryListValues": []}
    assert record == {
        "messageId": sent["MessageId"],
        "body": "hello",
        "messageAttributes": {
            "trace": {**lists, "stringValue": "t-1", "dataType": "String"},
            "count": {**lists, "stringValue": "3", "dataType": "Number"},
            "blob": {**lists, "binaryValue": "AP8=", "dataType": "Binary"},  # base64 text, as Lambda sends it
        },
        "md5OfMessageAttributes": sent["MD5OfMessageAttributes"],
        "md5OfBody": sent["MD5OfMessageBody"],
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn(runtime),
        "awsRegion": "us-east-1",
    }
    assert sorted(attributes) == [
        "ApproximateFirstReceiveTimestamp",
        "ApproximateReceiveCount",
        "SenderId",
        "SentTimestamp",
    ]
    assert attributes["ApproximateReceiveCount"] == "1"
    assert int(attributes["SentTimestamp"]) <= int(attributes["ApproximateFirstReceiveTimestamp"])
    # And the function succeeded, so Lambda deleted the message
    assert queue_depth(runtime) == EMPTY


def test_a_fifo_record_carries_the_group_deduplication_and_sequence_attributes_in_order(
    runtime: LocalRuntime,
) -> None:
    # Given two messages of one group on the FIFO queue
    sqs = runtime.client("sqs")
    sent = [
        sqs.send_message(
            QueueUrl=runtime.outputs["OrderedUrl"],
            MessageBody=body,
            MessageGroupId="order-1",
            MessageDeduplicationId=f"dedup-{body}",
        )
        for body in ("first", "second")
    ]

    # When the mappings run
    runtime.drain_streams()

    # Then one batch held both, in order, each with its FIFO attributes, and both were deleted
    (event,) = seen_events(runtime)
    SqsModel.model_validate(event)
    assert [record["body"] for record in event["Records"]] == ["first", "second"]
    for record, message in zip(event["Records"], sent, strict=True):
        attributes = record["attributes"]
        assert sorted(attributes) == [
            "ApproximateFirstReceiveTimestamp",
            "ApproximateReceiveCount",
            "MessageDeduplicationId",
            "MessageGroupId",
            "SenderId",
            "SentTimestamp",
            "SequenceNumber",
        ]
        assert attributes["MessageGroupId"] == "order-1"
        assert attributes["MessageDeduplicationId"] == f"dedup-{record['body']}"
        assert attributes["SequenceNumber"] == message["SequenceNumber"]
        assert (record["messageAttributes"], record["md5OfMessageAttributes"]) == ({}, None)
        assert record["eventSourceARN"] == queue_arn(runtime, "OrderedUrl")
    assert queue_depth(runtime, "OrderedUrl") == EMPTY


def test_a_function_error_deletes_nothing_and_leaves_the_batch_in_flight(runtime: LocalRuntime) -> None:
    # Given a batch whose second message makes the function raise
    send(runtime, "ok-1", "raise", "ok-2")
    reports = observed(runtime)

    # When the mappings run
    runtime.drain_streams()

    # Then the function ran once and nothing was deleted: the three messages wait out their visibility
    # timeout, and the drain did not count them as work
    assert [len(event["Records"]) for event in seen_events(runtime)] == [3]
    assert queue_depth(runtime) == QueueDepth(visible=0, in_flight=3)
    assert [(r.kind, r.committed) for r in reports if r.invoked] == [(StepKind.FAILED, ())]
    assert mapping_named(runtime, "WorkMapping").stats().failed_invocations == 1


def test_a_partial_batch_response_deletes_exactly_the_unlisted_messages(runtime: LocalRuntime) -> None:
    # Given a batch whose middle message the function reports as failed
    first, failed, last = send(runtime, "ok-1", "fail", "ok-2")
    reports = observed(runtime)

    # When the mappings run
    runtime.drain_streams()

    # Then the other two were deleted; the reported one stays in flight until its visibility timeout
    (partial,) = [r for r in reports if r.invoked]
    assert partial.kind is StepKind.PARTIAL_FAILURE
    assert partial.invoked == (first, failed, last)
    assert sorted(partial.committed) == sorted([first, last])
    assert queue_depth(runtime) == QueueDepth(visible=0, in_flight=1)


@pytest.mark.parametrize("report", ["report-unknown", "report-empty", "report-null"])
def test_a_partial_batch_response_lambda_cannot_use_deletes_nothing(
    runtime: LocalRuntime, report: str
) -> None:
    # Given a batch where the function reports an itemIdentifier that is no message id, empty, or null
    send(runtime, "ok-1", report)
    reports = observed(runtime)

    # When the mappings run
    runtime.drain_streams()

    # Then Lambda treats the whole batch as failed: both messages stay in flight
    assert [(r.kind, r.committed) for r in reports if r.invoked] == [(StepKind.FAILED, ())]
    assert queue_depth(runtime) == QueueDepth(visible=0, in_flight=2)


def test_batch_item_failures_are_ignored_unless_the_mapping_reports_them(tmp_path: Path) -> None:
    # Given a mapping without ReportBatchItemFailures and a function that reports a failure anyway
    with runtime_on(tmp_path, queue_template(work={"FunctionResponseTypes": None})) as runtime:
        send(runtime, "ok-1", "fail")

        # When the mappings run
        runtime.drain_streams()

        # Then the invocation succeeded: Lambda deleted the whole batch
        assert queue_depth(runtime) == EMPTY


def test_a_disabled_mapping_does_not_run_and_is_listed_disabled(tmp_path: Path) -> None:
    # Given the standard queue's mapping disabled in the template
    with runtime_on(tmp_path, queue_template(work={"Enabled": False})) as runtime:
        send(runtime, "ok-1")

        # When the mappings run
        runtime.drain_streams()

        # Then the message was never received, and Lambda's API lists the mapping as Disabled
        assert seen_events(runtime) == []
        assert queue_depth(runtime) == QueueDepth(visible=1, in_flight=0)
        assert [mapping.name for mapping in runtime.queue_mappings] == ["OrderedMapping"]
        listed = runtime.client("lambda").list_event_source_mappings(EventSourceArn=queue_arn(runtime))
        assert [mapping["State"] for mapping in listed["EventSourceMappings"]] == ["Disabled"]


@pytest.mark.parametrize(
    ("pattern", "bodies", "passed"),
    [
        ({"body": {"kind": ["keep"]}}, ['{"kind":"keep"}', '{"kind":"drop"}', "keep"], ['{"kind":"keep"}']),
        ({"body": [{"prefix": "order-"}]}, ["order-1", "invoice-1", '{"id": "order-2"}'], ["order-1"]),
    ],
    ids=["json-pattern", "plain-string-pattern"],
)
def test_filter_criteria_send_only_matching_messages_and_delete_the_others(
    tmp_path: Path, pattern: dict[str, Any], bodies: list[str], passed: list[str]
) -> None:
    # Given a body filter, and messages that match it, do not, or have a body of the other format
    criteria = {"Filters": [{"Pattern": json.dumps(pattern)}]}
    with runtime_on(tmp_path, queue_template(work={"FilterCriteria": criteria})) as runtime:
        send(runtime, *bodies)

        # When the mappings run
        runtime.drain_streams()

        # Then only the matching message reached the function, and Lambda deleted every message
        assert [record["body"] for event in seen_events(runtime) for record in event["Records"]] == passed
        assert queue_depth(runtime) == EMPTY
        assert mapping_named(runtime, "WorkMapping").stats().filtered_out == len(bodies) - len(passed)


def test_a_batching_window_gathers_messages_until_it_has_passed(tmp_path: Path) -> None:
    # Given a 2 s batching window, and a first message the mapping received and holds
    body = queue_template(work={"BatchSize": 100, "MaximumBatchingWindowInSeconds": 2})
    with runtime_on(tmp_path, body) as runtime:
        send(runtime, "ok-1")
        mapping = mapping_named(runtime, "WorkMapping")
        assert [report.kind for report in mapping.poll_once()] == [StepKind.WAITING]
        before = runtime.clock()

        # When two more messages arrive within the window and the mappings run
        send(runtime, "ok-2", "ok-3")
        runtime.drain_streams()

        # Then one invocation took all three, once the (virtual) window had passed
        assert [[r["body"] for r in event["Records"]] for event in seen_events(runtime)] == [
            ["ok-1", "ok-2", "ok-3"]
        ]
        assert runtime.clock() - before >= 2
        assert queue_depth(runtime) == EMPTY


def test_list_event_source_mappings_answers_a_queue_mapping_in_lambdas_shape(tmp_path: Path) -> None:
    # Given a mapping with a batching window, a filter and a maximum concurrency
    criteria = {"Filters": [{"Pattern": json.dumps({"body": {"kind": ["keep"]}})}]}
    work = {
        "BatchSize": 100,
        "MaximumBatchingWindowInSeconds": 5,
        "FilterCriteria": criteria,
        "ScalingConfig": {"MaximumConcurrency": 2},
    }
    with runtime_on(tmp_path, queue_template(work=work)) as runtime:
        assert runtime.host is not None
        function_arn = runtime.host.find("QueueFn").arn
        uuid = next(ref for logical_id, _, ref in runtime.resource_names() if logical_id == "WorkMapping")

        # When a tool lists the queue's mappings and gets the mapping by its UUID
        lambda_client = runtime.client("lambda")
        (listed,) = lambda_client.list_event_source_mappings(EventSourceArn=queue_arn(runtime))[
            "EventSourceMappings"
        ]
        got = lambda_client.get_event_source_mapping(UUID=uuid)

        # Then both answer it as Lambda does for a queue (no stream settings, no LastProcessingResult)
        assert isinstance(listed.pop("LastModified"), datetime)
        assert listed == {
            "UUID": uuid,
            "BatchSize": 100,
            "MaximumBatchingWindowInSeconds": 5,
            "EventSourceArn": queue_arn(runtime),
            "FilterCriteria": criteria,
            "FunctionArn": function_arn,
            "State": "Enabled",
            "StateTransitionReason": "USER_INITIATED",
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
            "ScalingConfig": {"MaximumConcurrency": 2},
            "EventSourceMappingArn": f"arn:aws:lambda:us-east-1:123456789012:event-source-mapping:{uuid}",
        }
        got.pop("ResponseMetadata")
        got.pop("LastModified")
        assert got == listed


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"work": {"BatchSize": 0}}, r"BatchSize must be 1\.\.10000, got 0"),
        ({"work": {"BatchSize": 11}}, "needs MaximumBatchingWindowInSeconds of at least 1"),
        ({"work": {"MaximumBatchingWindowInSeconds": 301}}, r"InSeconds must be 0\.\.300, got 301"),
        ({"ordered": {"BatchSize": 11}}, "at most 10 for a FIFO queue"),
        ({"ordered": {"MaximumBatchingWindowInSeconds": 1}}, "not supported for FIFO queues"),
        ({"work": {"StartingPosition": "LATEST"}}, "StartingPosition apply only to stream sources"),
        ({"work": {"FunctionResponseTypes": ["Everything"]}}, "must list only ReportBatchItemFailures"),
        ({"work": {"ScalingConfig": {"MaximumConcurrency": 1}}}, r"MaximumConcurrency must be 2\.\.1000"),
        (
            {"work": {"FilterCriteria": {"Filters": [{"Pattern": '{"attributes": {"SenderId": ["x"]}}'}]}}},
            "on the body key only",
        ),
        (
            {"work_queue": {"VisibilityTimeout": 10}},
            "Queue visibility timeout: 10 seconds is less than Function timeout: 30 seconds",
        ),
        ({"work": {"ProvisionedPollerConfig": {"MinimumPollers": 2}}}, "ProvisionedPollerConfig"),
    ],
    ids=[
        "batch-size-zero",
        "large-batch-without-window",
        "window-too-long",
        "fifo-batch-size",
        "fifo-window",
        "stream-only-property",
        "unknown-response-type",
        "concurrency-too-low",
        "filter-not-on-body",
        "visibility-below-function-timeout",
        "unknown-property",
    ],
)
def test_what_lambda_refuses_in_a_queue_mapping_stops_start_up(
    tmp_path: Path, change: dict[str, dict[str, Any]], message: str
) -> None:
    # Given a queue mapping Lambda would refuse, When the runtime starts, Then it refuses, naming the mapping
    with (
        pytest.raises(UnsupportedResourceError, match=message) as raised,
        runtime_on(tmp_path, queue_template(**change)),
    ):
        pass
    mapping = "OrderedMapping" if "ordered" in change else "WorkMapping"
    assert f"{mapping} (AWS::Lambda::EventSourceMapping)" in str(raised.value)


def test_the_background_poller_runs_queue_mappings_and_wait_until_idle_covers_them(tmp_path: Path) -> None:
    # Given a runtime with its background poller
    with runtime_on(tmp_path, queue_template(), background=True) as runtime:
        # When messages arrive on both queues and the caller waits for the mappings
        send(runtime, "ok-1")
        runtime.client("sqs").send_message(
            QueueUrl=runtime.outputs["OrderedUrl"],
            MessageBody="ok-2",
            MessageGroupId="g",
            MessageDeduplicationId="d-2",
        )

        # Then by the time the poller is idle both were processed and deleted
        assert runtime.wait_until_idle(timeout_s=30)
        assert queue_depth(runtime) == EMPTY
        assert queue_depth(runtime, "OrderedUrl") == EMPTY
        bodies = sorted(record["body"] for event in seen_events(runtime) for record in event["Records"])
        assert bodies == ["ok-1", "ok-2"]
