"""One invocation traced by outbox_tracing on moto, as on Lambda with a sampled trace header:
`python -m tests.integration.publisher.tracing_scenario on|off` (`off`: POWERTOOLS_TRACE_DISABLED).

A process of its own: the X-Ray SDK patches botocore for the life of the process. It plays the X-Ray daemon
(a UDP socket) and prints, as one JSON line, the documents sent, the trace header each request carried, and
whether the SDK was imported (its emitter opens a socket at import).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
from typing import Any

ROOT = "1-5759e988-bd862e3fe1be46a994272793"
PARENT = "53995c3f42cd8ad8"
SECRET = "secret-order-id"


def main(mode: str) -> None:
    daemon = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    daemon.bind(("127.0.0.1", 0))
    os.environ.update(
        {
            "AWS_XRAY_DAEMON_ADDRESS": f"127.0.0.1:{daemon.getsockname()[1]}",
            "_X_AMZN_TRACE_ID": f"Root={ROOT};Parent={PARENT};Sampled=1;Lineage=a87bd80c:0",
            "LAMBDA_TASK_ROOT": os.getcwd(),
            "AWS_LAMBDA_FUNCTION_NAME": "scenario",
            "POWERTOOLS_TRACE_DISABLED": "false" if mode == "on" else "true",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
        }
    )
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError
    from moto import mock_aws

    import outbox_tracing as tracing
    from tests.support.lambda_context import FakeLambdaContext

    tracer = tracing.tracer("scenario")
    headers: list[str] = []

    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        dynamodb.meta.events.register(
            "before-send", lambda request, **_: headers.append(_trace_header(request))
        )

        @tracer.capture_method(capture_response=False)
        def publish() -> None:
            tracer.put_annotation("destination", "sns")
            tracer.put_metadata("event_ids", ["e-1", "e-2"])
            dynamodb.list_tables(Limit=1)

        @tracer.capture_method(capture_response=False)
        def parse() -> int:
            return int(SECRET)  # Python's own text quotes the input

        @tracer.capture_lambda_handler(capture_response=False)
        def handler(event: Any, context: Any) -> None:
            publish()
            with contextlib.suppress(ClientError):
                dynamodb.get_item(TableName="missing", Key={"pk": {"S": SECRET}})
            with contextlib.suppress(BotoCoreError):  # botocore's text quotes the value refused
                dynamodb.put_item(TableName="orders", Item={"pk": {"S": SECRET.encode()}})
            with contextlib.suppress(ValueError):
                parse()

        handler({}, FakeLambdaContext())

    daemon.setblocking(False)
    sent = []
    while True:
        try:
            sent.append(daemon.recv(65536))
        except BlockingIOError:
            break
    result = {
        "documents": [json.loads(datagram.split(b"\n", 1)[1]) for datagram in sent],
        "raw": b"".join(sent).decode(),
        "headers": headers,
        "sdk_imported": "aws_xray_sdk.core" in sys.modules,
    }
    sys.stdout.write(json.dumps(result) + "\n")


def _trace_header(request: Any) -> str:
    value = request.headers.get("X-Amzn-Trace-Id", "")
    return value.decode() if isinstance(value, bytes) else str(value)


if __name__ == "__main__":
    main(sys.argv[1])
