"""A stream mapping resumed after a restart reads each shard from where it was
(`StreamMappingRunner.positions`, `resume_at`), on a real moto stream read in process: never from its
starting position again, which would invoke every record a second time (TRIM_HORIZON) or skip those written
while it was down (LATEST)."""

from __future__ import annotations

from typing import Any

import boto3

from outbox_local.endpoint import LOCAL_CREDENTIALS
from outbox_local.invocation import InvocationResult
from outbox_local.moto_streams import InProcessStreams
from outbox_local.stream_mapping import MappingSettings
from outbox_local.stream_poller import ShardPosition, StreamMappingRunner
from tests.support.streams import table_with_stream

REGION = "us-east-1"
FUNCTION_ARN = "arn:aws:lambda:us-east-1:123456789012:function:publisher"


def outbox_with_stream(endpoint: str) -> tuple[Any, str]:
    dynamodb = boto3.client("dynamodb", endpoint_url=endpoint, region_name=REGION, **LOCAL_CREDENTIALS)
    return dynamodb, table_with_stream(dynamodb, "outbox")


def runner(
    stream_arn: str, invoked: list[str], *, starting: str = "TRIM_HORIZON", resume_at: Any = ()
) -> StreamMappingRunner:
    def invoke(event: dict[str, Any]) -> InvocationResult:
        invoked.extend(record["dynamodb"]["Keys"]["pk"]["S"] for record in event["Records"])
        return InvocationResult()

    return StreamMappingRunner(
        "mapping",
        MappingSettings(function_arn=FUNCTION_ARN, stream_arn=stream_arn),
        streams_client=InProcessStreams(REGION),
        invoke=invoke,
        send_to_destination=None,
        clock=lambda: 0.0,
        region=REGION,
        starting_position=starting,
        resume_at=resume_at,
    )


def put(dynamodb: Any, *keys: str) -> None:
    for key in keys:
        dynamodb.put_item(TableName="outbox", Item={"pk": {"S": key}})


def drain(mapping: StreamMappingRunner) -> None:
    for _ in range(10):
        mapping.poll_once()


def test_a_resumed_mapping_invokes_only_what_came_after_its_checkpoint(endpoint: str) -> None:
    # Given a TRIM_HORIZON mapping that processed two records
    dynamodb, stream_arn = outbox_with_stream(endpoint)
    put(dynamodb, "a", "b")
    before: list[str] = []
    first = runner(stream_arn, before)
    drain(first)
    positions = first.positions()
    assert before == ["a", "b"]
    assert [p.checkpoint for p in positions] == [first.shards[positions[0].shard_id].checkpoint]

    # When the runtime restarts with its positions and a record is written meanwhile
    put(dynamodb, "c")
    after: list[str] = []
    resumed = runner(stream_arn, after, resume_at=positions)
    drain(resumed)

    # Then only the new record is invoked, and its position moved on
    assert after == ["c"]
    assert resumed.positions()[0].checkpoint != positions[0].checkpoint


def test_a_latest_mapping_that_committed_nothing_resumes_where_it_first_read(endpoint: str) -> None:
    # Given a LATEST mapping that started reading after one record, then stopped before invoking the next two
    dynamodb, stream_arn = outbox_with_stream(endpoint)
    put(dynamodb, "old")
    first = runner(stream_arn, [], starting="LATEST")
    first.poll_once()
    positions = first.positions()
    assert positions[0].checkpoint is None
    put(dynamodb, "d", "e")

    # When it resumes at its saved position
    after: list[str] = []
    drain(runner(stream_arn, after, starting="LATEST", resume_at=positions))

    # Then the records written since it first read are invoked, the older one is not
    assert after == ["d", "e"]


def test_a_shard_resumed_but_not_read_again_keeps_its_position(endpoint: str) -> None:
    # Given a mapping resumed at a position, before its first poll
    _, stream_arn = outbox_with_stream(endpoint)
    saved = [ShardPosition("shard-x", "1100000000017454423010", "0|" + stream_arn)]

    # When its positions are read (a cut right after the restart)
    # Then they are the saved ones, not lost
    assert runner(stream_arn, [], resume_at=saved).positions() == saved
