"""The local HTTP API refuses, as API Gateway does, what it cannot frame or decode: a clear 4xx in API
Gateway's JSON, and no function invoked (so nothing written). Raw sockets: clients that misbehave."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from outbox_local import http_api
from outbox_local.http_api import HttpApiServer, Route
from outbox_local.invocation import InvocationResult


class Recorder:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def __call__(self, _function_arn: str, event: dict[str, Any]) -> InvocationResult:
        self.events.append(event)
        return InvocationResult(payload={"statusCode": 201, "body": "{}"})


@pytest.fixture
def api() -> Iterator[tuple[HttpApiServer, Recorder]]:
    recorder = Recorder()
    server = HttpApiServer("api1", recorder)
    server.add_route(Route("POST /orders", "arn:aws:lambda:us-east-1:123456789012:function:orders"))
    server.start()
    try:
        yield server, recorder
    finally:
        server.stop()


def exchange(server: HttpApiServer, request: bytes, *, close_write: bool = False) -> tuple[int, Any]:
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as connection:
        connection.sendall(request)
        if close_write:
            connection.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := connection.recv(65536):
            received += chunk
            head, _, body = received.partition(b"\r\n\r\n")
            lengths = [line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")]
            if lengths and len(body) >= int(lengths[0].split(b":")[1]):
                break
    head, _, body = received.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), json.loads(body) if body else None


def post(headers: str, body: bytes = b"") -> bytes:
    return f"POST /orders HTTP/1.1\r\nHost: localhost\r\n{headers}\r\n".encode() + body


def test_a_well_framed_request_reaches_the_function(api: tuple[HttpApiServer, Recorder]) -> None:
    server, recorder = api
    status, _ = exchange(server, post("Content-Type: application/json\r\nContent-Length: 2\r\n", b"{}"))
    assert status == 201
    assert [event["body"] for event in recorder.events] == ["{}"]


@pytest.mark.parametrize(
    ("request_bytes", "status", "message"),
    [
        pytest.param(
            post("Content-Length: abc\r\n", b"{}"), 400, "Bad Request", id="content-length-not-a-number"
        ),
        pytest.param(post("Content-Length: -1\r\n"), 400, "Bad Request", id="content-length-negative"),
        pytest.param(
            post("Transfer-Encoding: chunked\r\n", b"2\r\n{}\r\n0\r\n\r\n"), 400, "Bad Request", id="chunked"
        ),
        pytest.param(
            post("Content-Type: application/json\r\nContent-Length: 2\r\n", b"\xff\xfe"),
            400,
            "Bad Request",
            id="text-body-not-utf8",
        ),
        pytest.param(
            post(f"Content-Length: {http_api.MAX_BODY_BYTES + 1}\r\n"),
            413,
            "Request Entity Too Large",
            id="body-over-10-mb",
        ),
        pytest.param(
            b"BREW /orders HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n",
            400,
            "Bad Request",
            id="unknown-method",
        ),
        pytest.param(b"POST /orders HTTP/1.1 extra\r\n\r\n", 400, "Bad Request", id="malformed-request-line"),
    ],
)
def test_what_cannot_be_framed_or_decoded_is_refused_and_never_invoked(
    api: tuple[HttpApiServer, Recorder], request_bytes: bytes, status: int, message: str
) -> None:
    # Given the local API with one route
    server, recorder = api
    # When a misframed request arrives
    answered, body = exchange(server, request_bytes)
    # Then API Gateway's 4xx comes back as JSON, and the function was never invoked
    assert (answered, body) == (status, {"message": message})
    assert recorder.events == []


def test_a_body_shorter_than_its_content_length_is_never_processed(
    api: tuple[HttpApiServer, Recorder],
) -> None:
    # Given a client that announces 100 bytes, sends 10, and stops sending
    server, recorder = api
    request = post("Content-Type: application/json\r\nContent-Length: 100\r\n", b'{"a": "b"}')
    # When it closes its side
    status, body = exchange(server, request, close_write=True)
    # Then the truncated body is refused, not handed to the function
    assert (status, body) == (400, {"message": "Bad Request"})
    assert recorder.events == []


def test_a_body_that_never_comes_is_refused_after_the_read_timeout(
    api: tuple[HttpApiServer, Recorder], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a client that announces a body and then sends nothing more (the connection stays open)
    server, recorder = api
    monkeypatch.setattr(http_api, "BODY_READ_TIMEOUT_S", 0.01)
    # When the server's read timeout passes
    status, body = exchange(server, post("Content-Length: 100\r\n", b"{"))
    # Then it answers 400 and invokes nothing
    assert (status, body) == (400, {"message": "Bad Request"})
    assert recorder.events == []


def test_a_burst_of_connections_waits_to_be_accepted_instead_of_being_dropped() -> None:
    """Before the accepting thread takes them (here: it never runs), up to LISTEN_BACKLOG connections are
    held by the kernel; with http.server's default of 5 the next attempts were dropped, each a stalled SYN."""
    server = HttpApiServer("api1", Recorder())  # not started: nothing accepts
    host, port = server.url.removeprefix("http://").split(":")
    burst = http_api.LISTEN_BACKLOG // 2
    opened: list[socket.socket] = []
    try:
        for _ in range(burst):
            # A dropped attempt is retried after a second: a connection not made within one was dropped.
            opened.append(socket.create_connection((host, int(port)), timeout=1.0))
        assert len(opened) == burst
    finally:
        for connection in opened:
            connection.close()
        server.stop()
