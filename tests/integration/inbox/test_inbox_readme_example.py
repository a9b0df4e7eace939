"""docs/inbox.md's consumer example works as written: its handler, on moto, applies what it should, once."""

import importlib
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.support.inbox import Consumer, order_events, sqs_record
from tests.support.lambda_context import FakeLambdaContext
from tests.support.readme import INBOX, INBOX_SECTION, python_example


def test_the_readme_consumer_ships_each_confirmed_order_once(
    consumer: Consumer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given docs/inbox.md's consumer as the user's shipments/handler.py, configured as the construct does
    package = tmp_path / "shipments"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "handler.py").write_text(python_example(INBOX_SECTION, document=INBOX))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("INBOX_TABLE_NAME", consumer.table)
    monkeypatch.setenv("INBOX_CONSUMER", "shipments")
    monkeypatch.setenv("INBOX_DEAD_LETTER_QUEUE_URL", consumer.dead_letter_url)
    module: Any = importlib.import_module("shipments.handler")
    placed, confirmed, *_ = order_events("o-5")
    now = datetime.now(UTC)
    batch = [sqs_record(e.envelope_json(), first_received=now) for e in (confirmed, placed, confirmed)]
    try:
        # When a batch brings OrderConfirmed before its OrderPlaced, then again after it
        response = module.handler({"Records": batch}, FakeLambdaContext())
    finally:
        sys.modules.pop("shipments.handler", None)
        sys.modules.pop("shipments", None)
    # Then the early one is handed back, and the order is to ship exactly once
    assert response == {"batchItemFailures": [{"itemIdentifier": batch[0]["messageId"]}]}
    item = consumer.dynamodb.get_item(TableName=consumer.table, Key={"pk": {"S": "shipment#o-5"}})["Item"]
    assert item["status"] == {"S": "TO_SHIP"}
