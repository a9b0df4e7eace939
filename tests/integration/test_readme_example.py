"""The README's library example runs as written, the way a user runs it: their own script, in the project's
environment, from a directory of their own, with no path set up for it. (The runbook's commands run in
tests/integration/ops/test_ops_readme_runbook.py.)"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.support.aws import create_tables, endpoint_client, moto_server, scan_all
from tests.support.readme import run_library_example


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
