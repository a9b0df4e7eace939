"""Handlers for the execution-environment tests: each can be held inside an invocation by the test's
rendezvous (`tests.unit.local.rendezvous`), so a test proves what runs at the same time without timing it.

`api` (the test template's HTTP routes): a body with a `port` meets the test first; every answer says which
process served it and how many calls that process's module has seen. `stream`: a record whose item has a
`port` attribute meets the test first; each record's key then goes to the DELIVERED_URL queue, in order.
"""

from __future__ import annotations

import json
import os
from typing import Any

import boto3

from tests.unit.local.rendezvous import meet

CALLS = 0
_sqs: Any = None


def api(event: dict[str, Any], context: Any) -> dict[str, Any]:
    global CALLS  # noqa: PLW0603 - the module's own state is what the tests look at
    CALLS += 1
    body = json.loads(event.get("body") or "{}")
    if "port" in body:
        meet(body["port"])
    return {"statusCode": 200, "body": json.dumps({"pid": os.getpid(), "calls": CALLS})}


def stream(event: dict[str, Any], context: Any) -> dict[str, Any]:
    global _sqs  # noqa: PLW0603 - created once per environment, as real handlers do
    _sqs = _sqs or boto3.client("sqs")
    for record in event["Records"]:
        image = record["dynamodb"]["NewImage"]
        port = image.get("port", {}).get("N")
        if port is not None:
            meet(int(port))
        _sqs.send_message(QueueUrl=os.environ["DELIVERED_URL"], MessageBody=image["pk"]["S"])
    return {"batchItemFailures": []}
