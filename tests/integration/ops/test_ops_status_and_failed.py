"""`outbox status` and `outbox failed` through the real entry point, against the local runtime."""

from __future__ import annotations

import json
import math
import re
import time
from datetime import timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from outbox.clock import utc_now
from outbox.model import OutboxEvent, OutboxStatus
from outbox_cli.main import main
from outbox_ops import status as status_module
from outbox_ops.clients import OpsClients
from outbox_ops.resources import OutboxResources
from outbox_ops.status import Verdict, status
from tests.integration.ops.conftest import Ops


def new(
    aggregate_id: str, seq: int, *, age: timedelta = timedelta(0), event_type: str = "OrderPlaced"
) -> OutboxEvent:
    """A valid event of the sample's Order aggregate, occurred `age` ago. (Its payload is not the sample's
    OrderPlaced schema: once published, the order-summary consumer dead-letters it.)"""
    return OutboxEvent.new(
        aggregate_type="Order",
        aggregate_id=aggregate_id,
        seq=seq,
        event_type=event_type,
        payload={"total": "9.99"},
        clock=lambda: utc_now() - age,
    )


BAD_PAYLOAD = {"payload": {"S": "{not json"}}
"""What makes a row poison: a payload that is not JSON (another writer's bug)."""


def test_status_of_an_empty_outbox_is_healthy(ops: Ops) -> None:
    # Given a table that holds nothing (nothing was ever written)
    assert ops.rows() == []

    # When the operator asks for the status
    result = ops.cli("status", "--json")

    # Then all is well: nothing pending, nothing failed, the whole table read
    assert result.code == 0, result.err
    report = result.json
    assert (report["verdict"], report["reasons"]) == ("healthy", [])
    assert (report["pending"], report["pending_complete"], report["oldest_pending_age_seconds"]) == (
        0,
        True,
        None,
    )
    assert (report["failed"], report["failed_released"], report["unindexed_failed"]) == (0, 0, 0)
    assert (report["held_aggregates"], report["held_aggregate_count"], report["backing_off"]) == ([], 0, 0)


def test_status_of_a_healthy_outbox(ops: Ops) -> None:
    # Given two events published by the stream: their rows have left the table (of a type the sample's
    # consumers take and ignore: nothing in their dead-letter queues)
    keys = [ops.put(new("healthy", seq, event_type="OrderNoted")) for seq in (1, 2)]
    ops.publish()
    assert [ops.status_of(key) for key in keys] == ["OUT", "OUT"]

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
    assert [(q["consumer"], q["visible"], q["in_flight"]) for q in report["consumer_dead_letter_queues"]] == [
        ("Cancellations", 0, 0),
        ("OrderSummary", 0, 0),
    ]
    assert report["published_last_hour"] == len(keys)
    assert [(m["state"], m["last_processing_result"]) for m in report["stream_mappings"]] == [
        ("Enabled", "OK")
    ]

    # And the human form leads with the verdict
    assert ops.cli("status").out.startswith("HEALTHY: nothing waits")


def test_status_of_a_degraded_outbox_names_the_held_aggregate_and_the_old_event(ops: Ops) -> None:
    # Given A#1 poison (FAILED) with A#2 held behind it, and B#1 pending for 10 minutes (not yet published)
    failed = ops.put(new("A", 1), **BAD_PAYLOAD)
    waiting = ops.put(new("A", 2))
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
    assert [(h["aggregate_key"], h["waiting_seq"], h["failed_seq"]) for h in report["held_aggregates"]] == [
        ("Order#A", waiting.seq, failed.seq)
    ]
    assert report["held_aggregate_count"] == 1
    assert report["reasons"][0].startswith("1 aggregate(s) held behind a FAILED event")
    assert "outbox failed list --aggregate Order#A, then redrive or skip seq 1" in report["reasons"][0]
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


def test_status_counts_what_the_table_holds_from_one_scan(ops: Ops) -> None:
    # Given, written straight to the table (no publisher has run):
    # - PENDING rows nothing holds back, the oldest 3 minutes old, and one backing off after failed sweeps
    free = [ops.put(new("free", 1, age=timedelta(minutes=3))), ops.put(new("free", 2))]
    backing_off = [ops.put(new("backoff", 1), next_attempt_at={"N": str(int(time.time()) + 3600)})]
    # - an aggregate held behind a FAILED row (its PENDING rows are the oldest of all: 2 hours)
    held_failed = ops.put(new("held", 1, age=timedelta(hours=2)))
    held = [ops.put(new("held", seq, age=timedelta(hours=2))) for seq in (2, 3)]
    ops.mark_failed(held_failed)
    # - a FAILED row whose route let later events go on past it (released), its successor pending
    released = ops.put(new("released", 1))
    after_released = [ops.put(new("released", 2))]
    ops.mark_failed(released, release_reason="route continues past poison")
    # - a FAILED row another writer saved without `failed_shard`, an event held behind it
    unindexed = ops.put(new("unindexed", 1).with_status(OutboxStatus.FAILED, last_error="rejected: old"))
    held_unindexed = [ops.put(new("unindexed", 2))]
    # - a row an earlier release kept PUBLISHED until its TTL, and an operator's audit record: neither counts
    ops.put(new("legacy", 1).with_status(OutboxStatus.PUBLISHED), expires_at={"N": str(int(time.time()))})
    skipped = ops.put(new("skipped", 1))
    ops.mark_failed(skipped)
    assert ops.cli("skip", ops.row(skipped)["event_id"]["S"], "--reason", "not needed").code == 0

    # When the operator asks for the status
    report = ops.cli("status", "--json").json

    # Then every figure is the table's: pending rows (held ones included), FAILED rows holding their aggregate
    # and released ones, the unindexed one, the aggregates held and the rows backing off
    pending = free + backing_off + held + after_released + held_unindexed
    assert report["pending"] == len(pending)
    assert report["pending_complete"] is True
    assert (report["failed"], report["failed_released"]) == (len([held_failed, unindexed]), len([released]))
    assert report["unindexed_failed"] == len([unindexed])
    assert report["backing_off"] == len(backing_off)
    assert report["held_aggregate_count"] == len([held_failed, unindexed])
    assert [(h["aggregate_key"], h["waiting_seq"], h["failed_seq"]) for h in report["held_aggregates"]] == [
        (held[0].aggregate_key, held[0].seq, held_failed.seq),
        (held_unindexed[0].aggregate_key, held_unindexed[0].seq, unindexed.seq),
    ]
    # And the oldest pending event is the held one; the oldest nothing holds back is free's first
    assert 2 * 3600 <= report["oldest_pending_age_seconds"] < 2 * 3600 + 60
    assert 3 * 60 <= report["oldest_unheld_pending_age_seconds"] < 4 * 60
    # And the unindexed row is named as what the sweeper will add
    assert any(
        reason.startswith("1 FAILED row(s) are not in the failed index yet") for reason in report["reasons"]
    )


def test_a_failed_row_another_writer_saved_without_failed_shard_is_counted_then_indexed_by_the_sweeper(
    ops: Ops,
) -> None:
    # Given a row another writer saved FAILED without `failed_shard` (a backfill), an event held behind it
    key = ops.put(new("foreign", 1).with_status(OutboxStatus.FAILED, last_error="rejected: old"))
    ops.put(new("foreign", 2, age=timedelta(days=1)))

    # When the operator looks: `failed list` reads the index, which does not have it
    assert ops.cli("failed", "list", "--json").json["failed"] == []
    report = ops.cli("status", "--json").json

    # Then status, reading the table, counts it as unindexed and the aggregate as held, and says what happens
    assert (report["verdict"], report["failed"], report["unindexed_failed"]) == ("degraded", 1, 1)
    assert [h["aggregate_key"] for h in report["held_aggregates"]] == [key.aggregate_key]
    assert (
        "1 FAILED row(s) are not in the failed index yet (saved FAILED by another writer): the sweeper adds "
        "them on its next pass"
    ) in report["reasons"]

    # When the sweeper runs
    ops.sweep()

    # Then the row is in the index: listed, and no longer counted as unindexed; its successor still waits
    assert [row["seq"] for row in ops.cli("failed", "list", "--json").json["failed"]] == [key.seq]
    after = ops.cli("status", "--json").json
    assert (after["failed"], after["unindexed_failed"], after["held_aggregate_count"]) == (1, 0, 1)


class SmallPages:
    """The table as DynamoDB pages a large one: few rows per Scan call (its 1 MB limit), each call taking
    `page_seconds` on the clock the status command counts its `--scan-for` with."""

    def __init__(self, real: Any, clock: FakeClock, rows_per_page: int, page_seconds: float) -> None:
        self._real = real
        self._clock = clock
        self._rows_per_page = rows_per_page
        self._page_seconds = page_seconds
        self.pages = 0

    def scan(self, **arguments: Any) -> Any:
        self.pages += 1
        self._clock.now += self._page_seconds
        return self._real.scan(**{**arguments, "Limit": min(arguments["Limit"], self._rows_per_page)})

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class FakeClock:
    """The monotonic clock of outbox_ops.status, moved only by the table's pages."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


def test_a_scan_cut_short_by_scan_for_reports_lower_bounds_and_says_so(
    ops: Ops, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given more pending rows than the table hands back in the time `--scan-for` gives: pages of 2 rows, each
    # taking 0.6 s, and 10 rows (5 pages, 3 s) for a 1 s scan
    keys = [ops.put(new("backlog", seq)) for seq in range(1, 11)]
    clock = FakeClock()
    tables: list[SmallPages] = []
    connect = OpsClients.client

    def slow_dynamodb(self: OpsClients, service: str) -> Any:
        client = connect(self, service)
        if service == "dynamodb":
            tables.append(SmallPages(client, clock, rows_per_page=2, page_seconds=0.6))
            return tables[-1]
        return client

    monkeypatch.setattr(OpsClients, "client", slow_dynamodb)
    monkeypatch.setattr(status_module, "time", clock)

    # When the operator asks for the status, reading for at most 1 s
    result = ops.cli("status", "--scan-for", "1s", "--json")

    # Then the scan stopped once its time was spent: the figures are what it read (lower bounds), said so
    report = result.json
    (table,) = tables
    assert table.pages < math.ceil(len(keys) / 2)
    assert report["pending_complete"] is False
    assert 0 < report["pending"] < len(keys)
    assert report["pending"] == 2 * table.pages
    assert (result.code, report["verdict"]) == (3, "degraded")
    assert (
        "the table holds more than a 1 s scan reads (the figures are lower bounds): a backlog the sweeper is "
        "working through"
    ) in report["reasons"]
    # And the human form marks the count as a lower bound
    clock.now = 0.0
    counted = re.search(r"^pending +([0-9]+)\+ \(oldest", ops.cli("status", "--scan-for", "1s").out, re.M)
    assert counted is not None
    assert int(counted.group(1)) == report["pending"]


def test_a_seq_never_written_holds_nothing(ops: Ops) -> None:
    # Given D#1 and D#3 written, D#2 never (a writer's gap): the table cannot tell a gap from an event out
    keys = [ops.put(new("D", 1, event_type="OrderNoted")), ops.put(new("D", 3, event_type="OrderNoted"))]

    # When the stream publishes them
    ops.publish()

    # Then both are out, and the status holds nothing behind the gap
    assert [ops.status_of(key) for key in keys] == ["OUT", "OUT"]
    report = ops.cli("status", "--json").json
    assert (report["verdict"], report["held_aggregates"]) == ("healthy", [])


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
    assert (row["audit"], row["delivered_to"]) == ([], [])
    assert "payload" not in row
    assert event_id in ops.cli("failed", "list").out

    # When the operator shows it, without and with its payload
    shown = ops.cli("failed", "show", event_id, "--json").json
    with_payload = ops.cli("failed", "show", event_id, "--json", "--show-payload").json

    # Then the payload appears only when asked for
    assert "payload" not in shown
    assert with_payload["payload"] == "{not json"

    # And an unknown event id fails with a one-line reason, pointing at the audit for events gone
    unknown = ops.cli("failed", "show", "00000000-0000-4000-8000-000000000000")
    assert unknown.code == 1
    assert unknown.err == (
        "outbox: no FAILED row has event_id 00000000-0000-4000-8000-000000000000 (an event published or "
        "skipped has left the table: outbox audit lists what operators did)\n"
    )


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


def test_a_skipped_event_no_longer_degrades_the_status(ops: Ops) -> None:
    # Given a poison event the operator skipped
    key = ops.put(new("skipped", 1), **BAD_PAYLOAD)
    ops.publish()
    assert ops.cli("skip", ops.row(key)["event_id"]["S"], "--reason", "never needed").code == 0

    # When the operator asks for the status
    report = ops.cli("status", "--json").json

    # Then it is healthy: the row has left the table, counted nowhere; only its audit record stays
    assert ops.status_of(key) == "OUT"
    assert (report["verdict"], report["failed"], report["failed_released"]) == ("healthy", 0, 0)
    assert [entry["action"]["S"] for entry in ops.audit(key)] == ["skip"]


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
    # Given only the environment `outbox local env`'s exports set (docs/local.md) (no --endpoint-url, no
    # --region)
    monkeypatch.setenv("AWS_ENDPOINT_URL", ops.runtime.endpoint_url)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")

    # When the operator asks for the status
    code = main(["status", "--json"])

    # Then it reads the local stack
    assert code == 0
    assert json.loads(capsys.readouterr().out)["table"] == ops.table
