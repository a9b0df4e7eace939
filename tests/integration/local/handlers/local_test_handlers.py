"""Plain handlers hosted by the runtime in the integration tests, so those tests need no project code.

Each record's `behaviour` decides what the stream handler does: "ok", "fail" (reported as a batch item
failure) or "raise"; a request with behaviour "api-raise" makes the API handler raise. The queue handler
reads an SQS message's body the same way (any other body is "ok"), plus "report-unknown", "report-empty"
and "report-null", which answer an `itemIdentifier` Lambda cannot use.
"""

from __future__ import annotations

import json
import os
from typing import Any

import boto3

_clients: dict[str, Any] = {}


def _client(service: str) -> Any:
    # Created once per process, lazily, with whatever the function's environment says: as real handlers do.
    if service not in _clients:
        _clients[service] = boto3.client(service)
    return _clients[service]


def api(event: dict[str, Any], context: Any) -> dict[str, Any]:
    if event["routeKey"] == "GET /items/{id}":
        item = (
            _client("dynamodb")
            .get_item(TableName=os.environ["TABLE_NAME"], Key={"pk": {"S": event["pathParameters"]["id"]}})
            .get("Item")
        )
        if item is None:
            return {"statusCode": 404, "body": json.dumps({"error": "not found"})}
        return {"statusCode": 200, "headers": {"x-item": "yes"}, "body": json.dumps({"id": item["pk"]["S"]})}
    if event["routeKey"] == "GET /echo":
        return {"event": event, "remaining_ms": context.get_remaining_time_in_millis()}
    body = json.loads(event["body"])
    if body.get("behaviour") == "api-raise":
        raise RuntimeError("the API handler failed")
    _client("dynamodb").put_item(
        TableName=os.environ["TABLE_NAME"],
        Item={"pk": {"S": body["id"]}, "behaviour": {"S": body.get("behaviour", "ok")}},
    )
    return {"statusCode": 201, "body": json.dumps({"id": body["id"], "request_id": context.aws_request_id})}


def stream(event: dict[str, Any], context: Any) -> dict[str, Any]:
    failures = []
    for record in event["Records"]:
        image = record["dynamodb"]["NewImage"]
        behaviour = image.get("behaviour", {}).get("S", "ok")
        if behaviour == "raise":
            raise RuntimeError(f"cannot process {image['pk']['S']}")
        if behaviour == "fail":
            failures.append({"itemIdentifier": record["dynamodb"]["SequenceNumber"]})
            continue
        _client("sqs").send_message(QueueUrl=os.environ["DELIVERED_URL"], MessageBody=image["pk"]["S"])
    return {"batchItemFailures": failures}


# What the queue handler reports for a message, by its body; None: nothing (processed).
_QUEUE_REPORTS: dict[str, Any] = {
    "fail": lambda record: {"itemIdentifier": record["messageId"]},
    "report-unknown": lambda _record: {"itemIdentifier": "no-such-message"},
    "report-empty": lambda _record: {"itemIdentifier": ""},
    "report-null": lambda _record: {"itemIdentifier": None},
}


def queue(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Records every event it gets on the SEEN_URL queue (so tests read what Lambda sent), then answers."""
    _client("sqs").send_message(QueueUrl=os.environ["SEEN_URL"], MessageBody=json.dumps(event))
    failures = []
    for record in event["Records"]:
        if record["body"] == "raise":
            raise RuntimeError(f"cannot process message {record['messageId']}")
        report = _QUEUE_REPORTS.get(record["body"])
        if report is not None:
            failures.append(report(record))
    return {"batchItemFailures": failures}


def environment(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return {key: value for key, value in os.environ.items() if key.startswith(("AWS_", "TABLE_", "LOCAL_"))}


def client_timeouts(event: dict[str, Any], context: Any) -> dict[str, list[float]]:
    """The connect and read timeouts of the library's clients, as this function's environment makes them."""
    from outbox.aws import client, invocation_client

    return {
        kind: [made.meta.config.connect_timeout, made.meta.config.read_timeout]
        for kind, made in (("client", client("sqs")), ("invocation", invocation_client("sqs")))
    }
