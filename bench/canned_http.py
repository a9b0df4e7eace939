"""Real botocore clients whose HTTP is canned: each request is validated, serialized and signed exactly as in
production, then answered at botocore's `before-send` event with a canned success instead of going out.

`before-send` comes after the request is built and signed (`request-created`); a handler that returns a
response stops botocore from sending, and the response is parsed as a real one would be. So a CPU figure on
these clients counts all of botocore's work but the socket. (botocore's Stubber would skip serialization and
signing altogether: not what we want to measure.)

The answers are the smallest valid successes: every SNS batch entry successful (ids read from the request),
one EventBridge EventId per entry, `{}` for DynamoDB writes and GetItem (no item), every key of a BatchGetItem
absent, an empty Scan page. An operation without a canned answer fails at once: a CPU figure must not quietly
measure an error path.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from typing import Any

from botocore.awsrequest import AWSResponse

_SNS_ENTRY_ID = re.compile(rb"PublishBatchRequestEntries\.member\.\d+\.Id=([A-Za-z0-9_-]+)")
_SNS_XML = (
    '<{op}Response xmlns="http://sns.amazonaws.com/doc/2010-03-31/"><{op}Result>{body}</{op}Result>'
    + ("<ResponseMetadata><RequestId>canned</RequestId></ResponseMetadata></{op}Response>")
)
_JSON_EMPTY = {"TransactWriteItems", "UpdateItem", "PutItem", "DeleteItem", "GetItem"}


class CannedBody:
    """The `raw` of an AWSResponse: botocore reads it through `stream()`."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._data


def can(client: Any) -> Any:
    """Answer every request of `client` with a canned success from now on; returns the client."""
    client.meta.events.register("before-send", answer)
    return client


def answer(request: Any, event_name: str, **_: Any) -> AWSResponse:
    operation = event_name.rsplit(".", 1)[-1]
    body = request.body or b""
    data = body.encode() if isinstance(body, str) else bytes(body)
    if operation == "PublishBatch":
        return _response(request, "text/xml", _publish_batch(tuple(_SNS_ENTRY_ID.findall(data))))
    if operation == "Publish":
        return _response(request, "text/xml", _sns_publish())
    if operation == "PutEvents":
        return _response(request, "application/x-amz-json-1.1", _put_events(data.count(b'"Source":')))
    if operation in _JSON_EMPTY:
        return _response(request, "application/x-amz-json-1.0", b"{}")
    if operation == "BatchGetItem":
        return _response(request, "application/x-amz-json-1.0", _batch_get(data))
    if operation == "Scan":
        return _response(
            request, "application/x-amz-json-1.0", b'{"Items": [], "Count": 0, "ScannedCount": 0}'
        )
    raise NotImplementedError(f"no canned answer for {event_name}")


def _response(request: Any, content_type: str, payload: bytes) -> AWSResponse:
    return AWSResponse(request.url, 200, {"content-type": content_type}, CannedBody(payload))


@functools.cache
def _publish_batch(ids: tuple[bytes, ...]) -> bytes:
    members = "".join(
        f"<member><Id>{entry.decode()}</Id><MessageId>canned</MessageId></member>" for entry in ids
    )
    return _SNS_XML.format(op="PublishBatch", body=f"<Successful>{members}</Successful><Failed/>").encode()


@functools.cache
def _sns_publish() -> bytes:
    return _SNS_XML.format(op="Publish", body="<MessageId>canned</MessageId>").encode()


def _batch_get(data: bytes) -> bytes:
    """Every key absent, for every table asked."""
    tables = json.loads(data)["RequestItems"]
    return json.dumps({"Responses": {table: [] for table in tables}, "UnprocessedKeys": {}}).encode()


@functools.cache
def _put_events(entries: int) -> bytes:
    return json.dumps({"FailedEntryCount": 0, "Entries": [{"EventId": "canned"}] * entries}).encode()
