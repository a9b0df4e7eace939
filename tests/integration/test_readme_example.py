"""The README's library example runs as written: the documentation stays true."""

import re
from pathlib import Path
from typing import Any

from outbox.aws import client
from tests.support.aws import create_tables, scan_all

README = Path(__file__).resolve().parents[2] / "README.md"


def _library_example() -> str:
    section = README.read_text().split("### Use the library from your own Lambda", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, "the README lost its library example"
    return match.group(1)


def test_readme_library_example_commits_the_business_item_and_its_event(dynamodb: Any) -> None:
    # Given the tables the example names: a business table and the outbox
    create_tables(dynamodb, orders="shipments", outbox="outbox")
    client.cache_clear()  # the example's cached client must be created inside this test's moto

    # When the README's example runs, unchanged
    exec(compile(_library_example(), str(README), "exec"), {})  # noqa: S102 - our own README

    # Then the business item and its PENDING outbox row are both stored
    assert [item["pk"]["S"] for item in scan_all(dynamodb, "shipments")] == ["SHIPMENT#s-1"]
    (row,) = scan_all(dynamodb, "outbox")
    assert row["aggregate_key"]["S"] == "Shipment#s-1"
    assert row["event_type"]["S"] == "ShipmentCreated"
    assert row["status"]["S"] == "PENDING"
