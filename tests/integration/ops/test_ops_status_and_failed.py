"""`outbox status` and `outbox failed` through the real entry point, against the local runtime."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from outbox.clock import utc_now
from outbox.model import OutboxEvent, OutboxStatus
from outbox_cli.main import main
from outbox_ops.clients import OpsClients
from outbox_ops.resources import OutboxResources
from outbox_ops.status import Verdict, status
from tests.integration.ops.conftest import Ops


def new(aggregate_id: str, seq: int, *, age: timedelta = timedelta(0)) -> OutboxEvent:
    """A valid event of the sample's Order aggregate, occurred `age` ago."""
    return OutboxEvent.new(
        aggregate_type="Order",
        aggregate_id=aggregate_id,
        seq=seq,
        event_type="OrderPlaced",
        payload={"total": "9.99"},
        clock=lambda: utc_now() - age,
    )


BAD_PAYLOAD = {"payload": {"S": "{not json"}}
"""What makes a row poison: a payload that is not JSON (another writer's bug)."""


def test_status_of_a_healthy_outbox(ops: Ops) -> None:
    # Given two events published by the stream
    ops.put(new("healthy", 1))
    ops.put(new("healthy", 2))
    ops.publish()

    # When the operator asks for the status
    result = ops.cli("status", "--json")

    # Then all is well, with the figures to prove it, and the exit code says so
    assert result.code == 0, result.err
    report = result.json
    assert report["verdict"] == "healthy"
    assert report["reasons"] == []
    assert (report["pending"], report["failed"], report["held_aggregates"]) == (0, 0, [])
    assert report["poison_queue"] == {"visible": 0, "in_flight": 0}
    assert report["on_failure_queue"] == {"visible": 0, "in_flight": 0}
    assert report["published_last_hour"] == 2
    assert [(m["state"], m["last_processing_result"]) for m in report["stream_mappings"]] == [
        ("Enabled", "OK")
    ]

    # And the human form leads with the verdict
    assert ops.cli("status").out.startswith("HEALTHY: nothing waits")


def test_status_of_a_degraded_outbox_names_the_held_aggregate_and_the_old_event(ops: Ops) -> None:
    # Given A#1 poison (FAILED) with A#2 held behind it, and B#1 pending for 10 minutes (not yet published)
    ops.put(new("A", 1), **BAD_PAYLOAD)
    ops.put(new("A", 2))
    ops.publish()
    ops.put(new("B", 1, age=timedelta(minutes=10)))

    # When the operator asks for the status
    result = ops.cli("status", "--json")

    # Then it is degraded, with exact figures, the held aggregate first and how to fix it
    assert result.code == 3
    report = result.json
    assert report["verdict"] == "degraded"
    assert (report["pending"], report["failed"], report["backing_off"]) == (2, 1, 0)
    assert report["poison_queue"]["visible"] == 1
    assert [(h["aggregate_key"], h["waiting_seq"], h["predecessor"]) for h in report["held_aggregates"]] == [
        ("Order#A", 2, "failed")
    ]
    assert report["reasons"][0].startswith("1 aggregate(s) held behind a FAILED or missing event")
    assert "outbox failed list --aggregate Order#A" in report["reasons"][0]
    assert any("oldest pending event is 10 min old" in reason for reason in report["reasons"])
    assert 590 <= report["oldest_unheld_pending_age_seconds"] < 700
    assert report["published_last_hour"] == 0


def test_status_of_a_stuck_outbox(ops: Ops) -> None:
    # Given an event nothing holds back, pending for 20 minutes
    ops.put(new("C", 1, age=timedelta(minutes=20)))

    # When the operator asks for the status
    result = ops.cli("status", "--json")

    # Then it is stuck, and says why
    assert result.code == 4
    assert result.json["verdict"] == "stuck"
    assert result.json["reasons"][0].startswith("the oldest pending event is 20 min old")
    assert ops.cli("status").out.startswith("STUCK: the oldest pending event is 20 min old")


def test_a_missing_event_holds_its_aggregate_and_status_says_how_to_release_it(ops: Ops) -> None:
    # Given D#1 and D#3 written, D#2 never (a writer's gap)
    ops.put(new("D", 1))
    ops.put(new("D", 3))
    ops.publish()

    # When the operator asks for the status
    held = ops.cli("status", "--json").json["held_aggregates"]

    # Then D is held behind a missing seq 2, and the fix is a skip of the missing event
    assert [(h["aggregate_key"], h["predecessor_seq"], h["predecessor"]) for h in held] == [
        ("Order#D", 2, "missing")
    ]
    assert held[0]["fix"].startswith("outbox skip --missing Order#D 2 --reason")


def test_failed_list_and_show_say_what_failed_when_and_why_without_payload(ops: Ops) -> None:
    # Given a poison row (its payload is not JSON)
    key = ops.put(new("E", 1), **BAD_PAYLOAD)
    ops.publish()
    event_id = ops.row(key)["event_id"]["S"]

    # When the operator lists the FAILED events
    listed = ops.cli("failed", "list", "--json")

    # Then the row is there: why (no payload data), when, attempts, and that it holds its aggregate
    assert listed.code == 0, listed.err
    (row,) = listed.json["failed"]
    assert (row["event_id"], row["aggregate_key"], row["seq"]) == (event_id, "Order#E", 1)
    assert "payload" in row["last_error"]
    assert "{not json" not in row["last_error"]
    assert row["holds_aggregate"] is True
    assert row["failed_at"] is not None
    assert "payload" not in row
    assert event_id in ops.cli("failed", "list").out

    # When the operator shows it, without and with its payload
    shown = ops.cli("failed", "show", event_id, "--json").json
    with_payload = ops.cli("failed", "show", event_id, "--json", "--show-payload").json

    # Then the payload appears only when asked for
    assert "payload" not in shown
    assert with_payload["payload"] == "{not json"

    # And an unknown event id fails with a one-line reason
    unknown = ops.cli("failed", "show", "00000000-0000-4000-8000-000000000000")
    assert unknown.code == 1
    assert unknown.err == "outbox: no FAILED row has event_id 00000000-0000-4000-8000-000000000000\n"


def test_a_command_finds_nothing_without_a_stack_and_says_what_to_pass(ops: Ops) -> None:
    # When the operator names a stack that does not exist
    result = ops.cli("status", "--stack", "NoSuchStack")

    # Then it fails with one line saying what to do
    assert result.code == 1
    assert result.err.startswith("outbox: stack NoSuchStack not found")
    assert result.err.count("\n") == 1

    # And naming the table explicitly is enough
    explicit = ops.cli("status", "--stack", "NoSuchStack", "--table", ops.table, "--json")
    assert explicit.code == 0, explicit.err
    assert explicit.json["poison_queue"] is None  # not named: not checked


def test_failed_rows_from_before_the_index_are_listed_after_a_reindex(ops: Ops) -> None:
    # Given a row FAILED before the failed index existed (no failed_shard), an event held behind it
    key = ops.put(new("legacy", 1).with_status(OutboxStatus.FAILED, last_error="rejected: old"))
    ops.put(new("legacy", 2))
    assert ops.cli("failed", "list", "--json").json["failed"] == []

    # When the operator asks for the status, Then it says to reindex
    reasons = ops.cli("status", "--json").json["reasons"]
    assert (
        "1 held aggregate(s) wait behind a FAILED row missing from the failed index: outbox failed reindex"
        in (reasons)
    )

    # When the operator reindexes
    result = ops.cli("failed", "reindex", "--json")

    # Then it is in the index, and listed
    assert result.json == {"indexed": 1}
    assert [row["seq"] for row in ops.cli("failed", "list", "--json").json["failed"]] == [key.seq]
    assert ops.cli("failed", "reindex", "--json").json == {"indexed": 0}


def test_a_skipped_event_no_longer_degrades_the_status(ops: Ops) -> None:
    # Given a poison event the operator skipped (it stays FAILED, released)
    key = ops.put(new("skipped", 1), **BAD_PAYLOAD)
    ops.publish()
    assert ops.cli("skip", ops.row(key)["event_id"]["S"], "--reason", "never needed").code == 0

    # When the operator asks for the status
    report = ops.cli("status", "--json").json

    # Then it is healthy: the FAILED row is settled, counted apart
    assert (report["verdict"], report["failed"], report["failed_released"]) == ("healthy", 0, 1)


class RefusingClient:
    """A client whose every call AWS refuses, as for a role without the permission."""

    def __getattr__(self, operation: str) -> Any:
        def refuse(**_: Any) -> None:
            raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no"}}, operation)

        return refuse


def test_status_without_permission_for_mappings_or_metrics_says_they_are_unknown(ops: Ops) -> None:
    # Given a role that may read the table and queues, but not the mappings or the metrics
    clients = OpsClients.connect(region="us-east-1", endpoint_url=ops.runtime.endpoint_url)
    clients.__dict__.update(lambda_=RefusingClient(), cloudwatch=RefusingClient())
    resources = OutboxResources.find(clients.cloudformation, "OutboxStack", {})

    # When it asks for the status
    report = status(clients, resources)

    # Then the rest is reported, the two figures are unknown, with why, and the verdict cannot be healthy
    assert report.verdict is Verdict.DEGRADED
    assert report.reasons == [
        "could not read stream mappings: AccessDeniedException: the verdict cannot vouch for it",
        "could not read published, last hour: AccessDeniedException: the verdict cannot vouch for it",
    ]
    assert (report.mappings, report.published_last_hour) == (None, None)
    assert report.unknown == [
        "stream mappings: AccessDeniedException",
        "published, last hour: AccessDeniedException",
    ]


def test_the_commands_find_the_local_runtime_through_aws_endpoint_url(
    ops: Ops, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given only the environment the README's export line sets (no --endpoint-url, no --region)
    monkeypatch.setenv("AWS_ENDPOINT_URL", ops.runtime.endpoint_url)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")

    # When the operator asks for the status
    code = main(["status", "--json"])

    # Then it reads the local stack
    assert code == 0
    assert json.loads(capsys.readouterr().out)["table"] == ops.table
