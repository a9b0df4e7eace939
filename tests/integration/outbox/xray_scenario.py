"""One traced invocation, recorded by the X-Ray SDK or by outbox.xray: `python -m ... sdk|ours`.

Run in a process of its own (the X-Ray SDK patches botocore for good), on moto, as if on Lambda with a sampled
trace header. It plays the daemon itself (a UDP socket) and prints what was sent, and the trace header each
request carried, as one JSON line. tests/integration/outbox/test_xray_botocore.py compares the two.
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


def main(recorder: str) -> None:
    daemon = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    daemon.bind(("127.0.0.1", 0))
    os.environ.update(
        {
            "AWS_XRAY_DAEMON_ADDRESS": f"127.0.0.1:{daemon.getsockname()[1]}",
            "_X_AMZN_TRACE_ID": f"Root={ROOT};Parent={PARENT};Sampled=1;Lineage=a87bd80c:0",
            "LAMBDA_TASK_ROOT": os.getcwd(),
            "AWS_LAMBDA_FUNCTION_NAME": "scenario",
            "POWERTOOLS_TRACE_DISABLED": "false",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
        }
    )
    import boto3
    from aws_lambda_powertools import Tracer
    from botocore.exceptions import ClientError
    from moto import mock_aws

    from tests.support.lambda_context import FakeLambdaContext

    if recorder == "sdk":
        tracer = Tracer(service="scenario", patch_modules=("botocore",))
    else:
        from outbox import tracing

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

        @tracer.capture_lambda_handler(capture_response=False)
        def handler(event: Any, context: Any) -> None:
            publish()
            with contextlib.suppress(ClientError):
                dynamodb.get_item(TableName="missing", Key={"pk": {"S": "a"}})

        handler({}, FakeLambdaContext())

    daemon.setblocking(False)
    sent = []
    while True:
        try:
            sent.append(daemon.recv(65536))
        except BlockingIOError:
            break
    documents = [json.loads(datagram.split(b"\n", 1)[1]) for datagram in sent]
    sys.stdout.write(json.dumps({"documents": documents, "headers": headers}) + "\n")


def _trace_header(request: Any) -> str:
    value = request.headers["X-Amzn-Trace-Id"]
    return value.decode() if isinstance(value, bytes) else str(value)


if __name__ == "__main__":
    main(sys.argv[1])
