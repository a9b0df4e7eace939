"""The README's library example and the runbook's release calls run as written, the way a user runs them:
their own script, in the project's environment, from a directory of their own, with no path set up for it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from outbox.model import OutboxStatus
from tests.support.aws import create_tables, endpoint_client, endpoint_environment, moto_server, scan_all
from tests.support.events import event
from tests.support.readme import python_example, run_library_example


def test_readme_library_example_commits_the_business_item_and_its_event(tmp_path: Path) -> None:
    with moto_server() as endpoint:
        # Given the tables the example names, on an AWS endpoint of its own
        dynamodb = endpoint_client(endpoint, "dynamodb")
        create_tables(dynamodb, orders="shipments", outbox="outbox")

        # When the README's example runs unchanged, as a script of the user's in the project's venv
        result = run_library_example(sys.executable, tmp_path, endpoint)

        # Then it succeeded, and the business item and its PENDING outbox row are both stored
        assert result.returncode == 0, result.stderr
        assert [item["pk"]["S"] for item in scan_all(dynamodb, "shipments")] == ["SHIPMENT#s-1"]
        (row,) = scan_all(dynamodb, "outbox")
        assert row["aggregate_key"]["S"] == "Shipment#s-1"
        assert row["event_type"]["S"] == "ShipmentCreated"
        assert row["status"]["S"] == "PENDING"


def test_readme_runbook_release_calls_run_against_a_held_aggregate(tmp_path: Path) -> None:
    with moto_server() as endpoint:
        # Given the rows each release call of the runbook needs: a FAILED Order#5d0c… seq 3 (twice: one
        # to redrive, one to skip) and a PENDING Order#9e1f… seq 7 behind a gap
        dynamodb = endpoint_client(endpoint, "dynamodb")
        create_tables(dynamodb, outbox="OutboxStack-Outbox")
        example = python_example("## Operations runbook").replace("<OutboxTableName>", "OutboxStack-Outbox")
        for aggregate_id, seq, status in (("5d0c…", 3, "FAILED"), ("9e1f…", 7, "PENDING")):
            row = event(aggregate_id, seq).with_status(OutboxStatus(status)).to_item()
            dynamodb.put_item(TableName="OutboxStack-Outbox", Item=row)
        lines = example.splitlines()
        setup = [line for line in lines if not line.startswith(("redrive(", "skip(", "skip_missing"))]
        calls = [line for line in lines if line.startswith(("redrive(", "skip(", "skip_missing"))]

        # When the runbook's calls run as written, the redrive first, then (on the row it made PENDING,
        # failed again) the skip, then the gap's release
        script = tmp_path / "release.py"
        script.write_text("\n".join([*setup, calls[0], _fail_again(), calls[1], calls[2]]))
        result = subprocess.run(  # noqa: S603 - this interpreter, the README's own calls
            [sys.executable, str(script)],
            cwd=tmp_path,
            env=endpoint_environment(endpoint),
            capture_output=True,
            text=True,
            check=False,
        )

        # Then each did what the runbook says: redriven by alice, then skipped, and the gap released
        assert result.returncode == 0, result.stderr
        rows = {
            (r["aggregate_key"]["S"], int(r["seq"]["N"])): r for r in scan_all(dynamodb, "OutboxStack-Outbox")
        }
        held = rows[("Order#5d0c…", 3)]
        assert (held["redriven_by"]["S"], held["released_by"]["S"]) == ("alice", "alice")
        assert held["release_reason"]["S"] == "superseded by seq 4"
        assert "predecessor_released_at" in rows[("Order#9e1f…", 7)]


def _fail_again() -> str:
    """Between the runbook's redrive and its skip: the redriven row fails once more (as the sweeper would)."""
    return (
        'dynamodb.update_item(TableName=table, Key=RowKey("Order#5d0c…", 3).item(), '
        'UpdateExpression="SET #s = :f", ExpressionAttributeNames={"#s": "status"}, '
        'ExpressionAttributeValues={":f": {"S": "FAILED"}})'
    )
