"""`outbox status` with regions, on moto in process: each region's heartbeat read from hand-written heartbeat
items (the sweeper writes them: issue 34's core), the origins taken over, and the verdict they give."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest

from outbox_cli import rendering
from outbox_ops.clients import OpsClients
from outbox_ops.resources import OutboxResources
from outbox_ops.status import StatusReport, Verdict, status
from tests.support.aws import REGION, Tables

NOW = datetime(2026, 12, 5, 1, 0, tzinfo=UTC)
HOME, PEER = "us-east-1", "us-west-2"


def _ms(moment: datetime) -> str:
    return str(int(moment.timestamp() * 1000))


def _beat(
    dynamodb: Any,
    table: str,
    region: str,
    *,
    ago: timedelta,
    state: str = "own",
    seen: dict[str, datetime] | None = None,
    taking: dict[str, datetime] | None = None,
    released: dict[str, datetime] | None = None,
) -> None:
    def stamps(found: dict[str, datetime] | None) -> dict[str, Any]:
        return {"M": {peer: {"N": _ms(at)} for peer, at in (found or {}).items()}}

    dynamodb.put_item(
        TableName=table,
        Item={
            "aggregate_key": {"S": f"#region#{region}"},
            "seq": {"N": "0"},
            "region": {"S": region},
            "beat_at": {"N": _ms(NOW - ago)},
            "state": {"S": state},
            "since": {"N": _ms(NOW - timedelta(hours=1))},
            "seen": stamps(seen),
            "taking": stamps(taking),
            "released": stamps(released),
        },
    )


def _status(tables: Tables, *, regions: str | None = f"{HOME},{PEER}") -> StatusReport:
    clients = OpsClients(boto3.session.Session(region_name=REGION))
    resources = OutboxResources(table=tables.outbox, regions=regions, takeover_after_seconds="600")
    return status(clients, resources, now=NOW)


def test_two_live_regions_are_healthy_and_each_shows_how_far_behind_it_saw_the_other(
    dynamodb: Any, tables: Tables
) -> None:
    # Given both regions beating within the takeover time, each having seen the other's beat a few s old
    _beat(dynamodb, tables.outbox, HOME, ago=timedelta(seconds=20), seen={PEER: NOW - timedelta(seconds=50)})
    _beat(dynamodb, tables.outbox, PEER, ago=timedelta(seconds=40), seen={HOME: NOW - timedelta(seconds=45)})

    # When the status is read
    report = _status(tables)

    # Then the verdict is healthy; each region's age, state and lag as seen are reported; nothing taken over
    assert report.verdict is Verdict.HEALTHY, report.reasons
    assert report.regions is not None
    ages = {h.region: h.age_s(NOW) for h in report.regions.heartbeats}
    assert ages == {HOME: 20.0, PEER: 40.0}
    assert [h.behind_s() for h in report.regions.heartbeats] == [{PEER: 30.0}, {HOME: 5.0}]
    assert report.regions.taken_over == []
    printed = report.to_json()["regions"]
    assert printed["home"] == HOME
    assert [h["state"] for h in printed["heartbeats"]] == ["own", "own"]
    assert [h["since"] for h in printed["heartbeats"]] == ["2026-12-05T00:00:00.000Z"] * 2
    assert [h["lost"] for h in printed["heartbeats"]] == [False, False]


def test_a_lost_region_taken_over_degrades_the_status_and_names_who_publishes_its_rows(
    dynamodb: Any, tables: Tables
) -> None:
    # Given the home region silent for 15 min, and its peer taking its rows over for 4 min
    since = NOW - timedelta(minutes=4)
    _beat(dynamodb, tables.outbox, HOME, ago=timedelta(minutes=15))
    _beat(dynamodb, tables.outbox, PEER, ago=timedelta(seconds=30), taking={HOME: since})

    # When the status is read and printed
    report = _status(tables)
    text = rendering.status(report)

    # Then it is degraded, first saying the home region is presumed lost and who publishes its rows; the
    # printed table marks it LOST and lists the takeover
    assert report.verdict is Verdict.DEGRADED
    assert report.reasons[0].startswith(f"region {HOME} last beat 900 s ago, past the 600 s takeover time")
    assert f"{PEER} publishes its rows since 2026-12-05T00:56:00.000Z" in report.reasons[0]
    assert "900 s ago LOST" in text
    assert "taken over:" in text
    assert report.to_json()["regions"]["taken_over"] == [
        {"origin": HOME, "by": PEER, "since": "2026-12-05T00:56:00.000Z"}
    ]


def test_a_region_with_no_heartbeat_is_shown_as_never_and_a_rejoining_one_is_said(
    dynamodb: Any, tables: Tables
) -> None:
    # Given the home region rejoining (it beats again, publishes nothing of its own yet), and no heartbeat
    # of its peer at all
    _beat(dynamodb, tables.outbox, HOME, ago=timedelta(seconds=10), state="rejoining")

    # When the status is read and printed
    report = _status(tables)
    text = rendering.status(report)

    # Then the peer is lost with no heartbeat here, the home region's rejoining is a reason too
    assert report.verdict is Verdict.DEGRADED
    assert any(reason.startswith(f"region {PEER} has no heartbeat here") for reason in report.reasons)
    assert any(f"region {HOME} is rejoining" in reason for reason in report.reasons)
    assert "never" in text


def test_a_taker_still_holding_a_returned_regions_rows_is_said(dynamodb: Any, tables: Tables) -> None:
    # Given the home region beating again, its peer still holding its rows (not handed back yet), and a
    # release recorded earlier
    _beat(dynamodb, tables.outbox, HOME, ago=timedelta(seconds=5))
    _beat(
        dynamodb,
        tables.outbox,
        PEER,
        ago=timedelta(seconds=5),
        taking={HOME: NOW - timedelta(minutes=20)},
        released={HOME: NOW - timedelta(hours=2)},
    )

    # When the status is read
    report = _status(tables)

    # Then the hand-back in waiting is the reason; the release shows in the printed table
    assert report.verdict is Verdict.DEGRADED
    assert report.reasons[0].startswith(f"{PEER} still holds {HOME}'s rows")
    assert report.to_json()["regions"]["heartbeats"][1]["released"] == {HOME: "2026-12-04T23:00:00.000Z"}


def test_a_single_region_outbox_reads_no_heartbeat_and_prints_no_region(tables: Tables) -> None:
    # Given a single-region outbox (its stack names no regions)
    # When the status is read
    report = _status(tables, regions=None)

    # Then no region is reported, in JSON or in print
    assert report.regions is None
    assert "regions" not in report.to_json()
    assert "regions (takeover" not in rendering.status(report)


def test_the_command_reads_the_regions_from_the_stacks_outputs_and_prints_them(
    dynamodb: Any, tables: Tables, capsys: pytest.CaptureFixture[str]
) -> None:
    from outbox_cli.main import main

    # Given a stack whose outputs name the outbox table, its regions and takeover time (as OutboxStack's do
    # with -c regions=...), and both regions beating
    template = {
        "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {
            "OutboxTableName": {"Value": tables.outbox},
            "OutboxRegions": {"Value": f"{HOME},{PEER}"},
            "OutboxTakeoverAfterSeconds": {"Value": "900"},
        },
    }
    boto3.client("cloudformation", region_name=REGION).create_stack(
        StackName="Regional", TemplateBody=json.dumps(template)
    )
    now = datetime.now(UTC)
    for region in (HOME, PEER):
        dynamodb.put_item(
            TableName=tables.outbox,
            Item={
                "aggregate_key": {"S": f"#region#{region}"},
                "seq": {"N": "0"},
                "region": {"S": region},
                "beat_at": {"N": _ms(now - timedelta(seconds=30))},
                "state": {"S": "own"},
                "since": {"N": _ms(now - timedelta(hours=1))},
            },
        )

    # When `outbox status` runs on that stack, in JSON and as a table
    json_code = main(["status", "--stack", "Regional", "--region", REGION, "--json"])
    printed = json.loads(capsys.readouterr().out)
    table_code = main(["status", "--stack", "Regional", "--region", REGION])
    text = capsys.readouterr().out

    # Then both show the two regions, home first, with the stack's takeover time, and the outbox is healthy
    assert (json_code, table_code) == (0, 0)
    assert printed["regions"]["regions"] == [HOME, PEER]
    assert printed["regions"]["takeover_after_seconds"] == 900
    assert [h["lost"] for h in printed["regions"]["heartbeats"]] == [False, False]
    assert "regions (takeover after 900 s):" in text
    assert "us-east-1 (home)" in text


def test_the_regions_can_be_named_on_the_command_line_for_a_table_without_a_stack(
    dynamodb: Any, tables: Tables, capsys: pytest.CaptureFixture[str]
) -> None:
    from outbox_cli.main import main

    # Given only a table (no stack names the regions), the home region silent for 15 minutes
    # (the command reads the clock: the beat is placed 15 minutes before now)
    _beat(dynamodb, tables.outbox, HOME, ago=NOW - datetime.now(UTC) + timedelta(minutes=15))

    # When the status is asked for with the regions and a 20-minute takeover time given as flags
    argv = ["status", "--table", tables.outbox, "--region", REGION, "--json"]
    code = main([*argv, "--regions", f"{HOME},{PEER}", "--takeover-after", "20m"])
    printed = json.loads(capsys.readouterr().out)["regions"]

    # Then the regions are read with that takeover time: home is not lost yet, the peer (no heartbeat) is
    assert printed["takeover_after_seconds"] == 1200
    assert [h["lost"] for h in printed["heartbeats"]] == [False, True]
    assert code == 3
