"""The Lambda entry point as deployed: configuration from the environment, Powertools metrics and logs."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import pytest

from outbox.errors import ConfigurationError
from outbox.model import OutboxEvent
from outbox_publisher import handler as entry_point
from outbox_publisher.errors import StreamConfigurationError
from tests.integration.publisher.publisher_world import World, build_world
from tests.support.aws import Tables
from tests.support.clock import START
from tests.support.events import event
from tests.support.lambda_context import FakeLambdaContext
from tests.support.metrics import emitted_metrics


@pytest.fixture
def world(tables: Tables, dynamodb: Any, monkeypatch: pytest.MonkeyPatch) -> World:
    world = build_world(tables, dynamodb)
    monkeypatch.setattr(entry_point, "_publisher", None)
    # Tests that call `handle` directly add metrics that only the decorated handler flushes.
    entry_point.metrics.clear_metrics()
    return world


def test_the_handler_publishes_and_emits_its_metrics(
    world: World,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given the deployed environment, a good event, a poison row, and a MODIFY record
    for name, value in world.env().items():
        monkeypatch.setenv(name, value)
    good = event("A", 1)
    world.write(good)
    bad = event("B", 1)
    world.put_raw(bad.to_item() | {"payload": {"S": "not json"}})
    world.dynamodb.update_item(
        TableName=world.tables.outbox,
        Key={"aggregate_key": {"S": "Order#B"}, "seq": {"N": "1"}},
        UpdateExpression="SET note = :n",
        ExpressionAttributeValues={":n": {"S": "x"}},
    )

    # When Lambda invokes the handler
    response = entry_point.handler(world.stream_event(), FakeLambdaContext())

    # Then the good event is out, the poison row is in the poison queue
    assert response == {"batchItemFailures": []}
    assert [e["event_id"] for e in world.topic_envelopes()] == [good.event_id]
    assert [p["reason"] for p in world.poison()] == ["invalid_row"]
    # and the metrics say so
    output = capsys.readouterr().out
    metrics = emitted_metrics(output)
    assert metrics["EventsPublished"] == [1.0]
    assert metrics["EventsFailed"] == [0.0]
    assert metrics["PoisonEvents"] == [1.0]
    assert metrics["RecordsSkipped"] == [1.0]
    assert metrics["RowUpdateFailures"] == [0.0]
    assert metrics["UndeliveredEvents"] == [0.0]
    assert len(metrics["PublishLatencyMs"]) == 1
    # and the logs name event ids, never payloads
    summary = next(r for r in caplog.records if r.getMessage() == "batch published")
    assert summary.__dict__["event_ids"] == [good.event_id]
    # What a log line says: its message and its extra fields (not LogRecord's own timings, whose digits can
    # happen to spell the payload's total)
    standard = set(vars(logging.makeLogRecord({})))
    logged = " ".join(
        f"{r.getMessage()} { ({k: v for k, v in vars(r).items() if k not in standard}) }"
        for r in caplog.records
    )
    assert bad.event_id in logged
    assert "not json" not in logged
    assert "9.99" not in logged


def test_each_published_event_adds_its_latency_and_a_clock_behind_it_counts_zero(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given events that occurred 2 s before the publisher's clock, and one stamped 5 s after it (skew)
    early = [event("A", 1), event("B", 1)]
    ahead = OutboxEvent.new(
        aggregate_type="Order",
        aggregate_id="C",
        seq=1,
        event_type="OrderPlaced",
        payload={},
        clock=lambda: START + timedelta(seconds=5),
    )
    world.write(*early, ahead)

    # When the publisher handles their records and its metrics are flushed
    world.invoke(world.publisher(), world.stream_event())
    entry_point.metrics.flush_metrics()

    # Then one latency value per event: 2,000 ms each, and 0 for the one from the future
    metrics = emitted_metrics(capsys.readouterr().out)
    assert sorted(metrics["PublishLatencyMs"]) == [0.0, 2000.0, 2000.0]
    assert metrics["EventsPublished"] == [3.0]


@pytest.mark.filterwarnings("ignore:No application metrics to publish")
def test_a_bad_configuration_fails_every_invocation(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given routes naming an unknown destination
    for name, value in world.env(OUTBOX_ROUTES='{"default": ["kinesis"]}').items():
        monkeypatch.setenv(name, value)

    # When Lambda invokes the handler
    # Then it fails loudly instead of publishing anywhere
    with pytest.raises(ConfigurationError, match="kinesis"):
        entry_point.handler({"Records": []}, FakeLambdaContext())


def test_a_record_from_another_tables_stream_fails_the_invocation_with_an_error_metric(
    world: World,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given a publisher configured for a table other than the one whose stream feeds it
    for name, value in world.env(OUTBOX_TABLE_NAME="other-outbox").items():
        monkeypatch.setenv(name, value)
    e = event("A", 1)
    world.write(e)

    # When Lambda invokes the handler
    # Then the invocation fails (the mapping retries; nothing is skipped, acknowledged or poisoned)
    with pytest.raises(StreamConfigurationError, match="not from table other-outbox's stream"):
        entry_point.handler(world.stream_event(), FakeLambdaContext())
    assert world.topic_envelopes() == []
    assert world.poison() == []
    assert world.row(e)["status"] == {"S": "PENDING"}
    # and it says why, in a log line and a metric the alarms see
    assert emitted_metrics(capsys.readouterr().out)["ConfigurationErrors"] == [1.0]
    assert any(
        r.getMessage() == "the publisher is misconfigured; failing the invocation" for r in caplog.records
    )


def test_the_table_named_by_its_arn_publishes_its_stream(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given OUTBOX_TABLE_NAME set to the table's ARN
    arn = f"arn:aws:dynamodb:us-east-1:123456789012:table/{world.tables.outbox}"
    for name, value in world.env(OUTBOX_TABLE_NAME=arn).items():
        monkeypatch.setenv(name, value)
    e = event("A", 1)
    world.write(e)

    # When Lambda invokes the handler
    response = entry_point.handler(world.stream_event(), FakeLambdaContext())

    # Then the event is published and its row marked
    assert response == {"batchItemFailures": []}
    assert [envelope["event_id"] for envelope in world.topic_envelopes()] == [e.event_id]
    assert world.stored(e) is None
