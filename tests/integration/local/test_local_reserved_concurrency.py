"""ReservedConcurrentExecutions as AWS applies it: 0 turns a function off, so every invocation is throttled
(the function never runs). A stream mapping treats a throttle as the batch not having reached the function: no
retry attempt is used, nothing is bisected, and the shard waits until the records expire
(`MaximumRecordAgeInSeconds`); the HTTP API answers 500. The runtime moves a virtual clock, nothing sleeps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from outbox_local.queues import receive_all
from outbox_local.runtime import LocalRuntime
from tests.integration.local.test_local_runtime import call
from tests.support.local_templates import options, template, write_template


def throttled_template() -> dict[str, Any]:
    body = template(MaximumRetryAttempts=2, MaximumRecordAgeInSeconds=3600)
    for function in ("StreamFn", "ApiFn"):
        body["Resources"][function]["Properties"]["ReservedConcurrentExecutions"] = 0
    return body


@pytest.mark.parametrize("max_environments", [None, 2], ids=["in-process", "workers"])
def test_a_function_with_reserved_concurrency_zero_is_throttled_and_its_records_wait_until_they_expire(
    tmp_path: Path, max_environments: int | None
) -> None:
    # Given the stream and API functions with ReservedConcurrentExecutions 0 (at most 2 retries, records kept
    # an hour)
    path = write_template(tmp_path, throttled_template())
    with LocalRuntime(options(path, max_environments=max_environments)) as runtime:
        assert runtime.host is not None
        stream_function = runtime.host.find("StreamFn").name
        runtime.client("dynamodb").put_item(TableName=runtime.outputs["TableName"], Item={"pk": {"S": "k-1"}})

        # When the mapping runs until it has nothing left to do
        runtime.drain_streams()

        # Then the function never ran: the record was not handed to it, however many tries (more than the
        # 2 retries a function error gets), until it was an hour old and discarded for its age
        stats = runtime.mappings[0].stats()
        assert (stats.invocations, stats.failed_invocations, stats.discarded_records) == (0, 0, 1)
        assert runtime.host.throttles[stream_function] > 3
        assert runtime.host.errors[stream_function] == 0
        assert queue_bodies(runtime, runtime.outputs["DeliveredUrl"]) == []
        [discard] = [
            json.loads(message["Body"])
            for message in receive_all(runtime.client("sqs"), runtime.outputs["OnFailureUrl"])
        ]
        assert discard["requestContext"]["condition"] == "RecordAgeExceeded"
        assert discard["requestContext"]["approximateInvokeCount"] == 0
        # and the HTTP API's function is throttled too: API Gateway answers 500
        assert call(runtime, "POST", "/items", {"n": 1}) == (500, {"message": "Internal Server Error"})


def queue_bodies(runtime: LocalRuntime, url: str) -> list[str]:
    return [message["Body"] for message in receive_all(runtime.client("sqs"), url)]
