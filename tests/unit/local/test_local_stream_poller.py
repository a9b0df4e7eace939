"""The background poller's "idle" signal: only a poll that started after a write can vouch for it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from outbox_local.invocation import InvocationResult
from outbox_local.stream_mapping import MappingSettings
from outbox_local.stream_poller import StreamMappingRunner

FUNCTION_ARN = "arn:aws:lambda:us-east-1:123456789012:function:f"
STREAM_ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/outbox/stream/2026-11-29T00:00:00.000"


class QuietStream:
    """An in-memory stand-in for dynamodbstreams with one shard and no records (a fake, not moto).

    `during_read` runs inside GetRecords, i.e. while a poll is under way.
    """

    def __init__(self) -> None:
        self.during_read: Callable[[], None] = lambda: None

    def describe_stream(self, **_: Any) -> dict[str, Any]:
        return {"StreamDescription": {"Shards": [{"ShardId": "shard-1"}]}}

    def get_shard_iterator(self, **_: Any) -> dict[str, Any]:
        return {"ShardIterator": "it-0"}

    def get_records(self, **_: Any) -> dict[str, Any]:
        self.during_read()
        return {"Records": [], "NextShardIterator": "it-1"}


def poller(stream: QuietStream) -> StreamMappingRunner:
    return StreamMappingRunner(
        "mapping",
        MappingSettings(
            function_arn="arn:aws:lambda:us-east-1:123456789012:function:f", stream_arn=STREAM_ARN
        ),
        streams_client=stream,
        invoke=lambda _event: InvocationResult(),
        send_to_destination=None,
        clock=lambda: 0.0,
        region="us-east-1",
    )


def test_an_idle_poll_that_started_before_the_wait_does_not_count() -> None:
    # Given a poll under way when a caller writes a record and starts waiting (its mark is taken mid-poll)
    stream = QuietStream()
    subject = poller(stream)
    marks: list[int] = []
    stream.during_read = lambda: marks.append(subject.activity_mark())

    # When that poll ends idle (it read the stream before the write)
    subject.poll_once()

    # Then it does not vouch for the write; the next poll, started after the mark, does
    assert not subject.wait_until_idle(0, after=marks[0])
    stream.during_read = lambda: None
    subject.poll_once()
    assert subject.wait_until_idle(0, after=marks[0])


def test_without_a_mark_only_polls_after_the_call_count() -> None:
    # Given a poller that has already found its stream idle
    subject = poller(QuietStream())
    subject.poll_once()

    # When a caller asks without waiting for another poll
    # Then the earlier idle poll does not answer for it
    assert not subject.wait_until_idle(0)
