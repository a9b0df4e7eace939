"""HTTP/1.1 keep-alive on the runtime's moto server (`outbox_local.keep_alive`), over raw sockets so that what
goes over the wire is what is checked: a connection serves request after request, pipelined requests are each
answered, a body the application leaves unread never becomes the next request, and every case that must
close the connection does."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from werkzeug.serving import BaseWSGIServer, make_server

from outbox_local.aws_server import LocalAwsServer
from outbox_local.endpoint import LOCAL_CREDENTIALS
from outbox_local.faults import FaultInjector
from outbox_local.keep_alive import Connections, KeepAliveHandler, keep_alive_handler

TIMEOUT_S = 10.0


class _App:
    """Answers `<method> <path> <body length read>`; `/fail` raises; `/ignore` reads no body; `/last` answers
    with hop-by-hop headers of its own; `/slow` answers once `release` is set."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int]] = []  # (path, client port)
        self.release = threading.Event()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        path = environ["PATH_INFO"]
        self.seen.append((path, environ["REMOTE_PORT"]))
        if path == "/fail":
            raise RuntimeError("the application failed")
        if path == "/slow":
            self.release.wait(TIMEOUT_S)
        body = b"" if path == "/ignore" else environ["wsgi.input"].read()
        hop_by_hop = [("Connection", "close"), ("Transfer-Encoding", "chunked")] if path == "/last" else []
        start_response("200 OK", [("Content-Type", "text/plain"), *hop_by_hop])
        return [f"{environ['REQUEST_METHOD']} {path} {len(body)}".encode()]


@pytest.fixture
def served() -> Iterator[tuple[BaseWSGIServer, _App, Connections]]:
    app, connections = _App(), Connections()
    server = make_server("127.0.0.1", 0, app, True, request_handler=keep_alive_handler(connections))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server, app, connections
    finally:
        server.shutdown()
        connections.close_all()
        server.server_close()
        thread.join(TIMEOUT_S)


def _connect(server: BaseWSGIServer) -> socket.socket:
    return socket.create_connection(("127.0.0.1", int(server.server_address[1])), timeout=TIMEOUT_S)


def _request(path: str, *, method: str = "POST", body: bytes = b"", headers: str = "") -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: {len(body)}\r\n{headers}\r\n"
    return head.encode() + body


class _Responses:
    """Reads HTTP responses one by one off a socket, by their Content-Length."""

    def __init__(self, connection: socket.socket) -> None:
        self._connection = connection
        self._buffer = b""

    def next(self, *, head: bool = False) -> tuple[str, dict[str, str], bytes]:
        while b"\r\n\r\n" not in self._buffer:
            self._fill()
        head_bytes, self._buffer = self._buffer.split(b"\r\n\r\n", 1)
        status, *lines = head_bytes.decode("latin-1").split("\r\n")
        headers = {name.lower(): value for name, value in (line.split(": ", 1) for line in lines)}
        length = 0 if head else int(headers["content-length"])
        while len(self._buffer) < length:
            self._fill()
        body, self._buffer = self._buffer[:length], self._buffer[length:]
        return status, headers, body

    def closed(self) -> bool:
        """True once the server has closed the connection (and sent nothing more)."""
        return self._buffer == b"" and self._connection.recv(1) == b""

    def _fill(self) -> None:
        data = self._connection.recv(65536)
        assert data, "the server closed the connection"
        self._buffer += data


def test_one_connection_serves_request_after_request(
    served: tuple[BaseWSGIServer, _App, Connections],
) -> None:
    server, app, _ = served
    with _connect(server) as connection:
        responses = _Responses(connection)
        for number in range(3):
            connection.sendall(_request(f"/{number}", body=b"x" * number))
            status, headers, body = responses.next()
            assert (status, body) == ("HTTP/1.1 200 OK", f"POST /{number} {number}".encode())
            assert "connection" not in headers  # kept open
    assert [path for path, _ in app.seen] == ["/0", "/1", "/2"]
    assert len({port for _, port in app.seen}) == 1  # one client connection served all three


def test_pipelined_requests_are_each_answered_in_order(
    served: tuple[BaseWSGIServer, _App, Connections],
) -> None:
    server, _, _ = served
    with _connect(server) as connection:
        connection.sendall(_request("/a", body=b"12345") + _request("/b") + _request("/c", body=b"1"))
        responses = _Responses(connection)
        assert [responses.next()[2] for _ in range(3)] == [b"POST /a 5", b"POST /b 0", b"POST /c 1"]


def test_a_body_the_application_leaves_unread_is_not_taken_for_the_next_request(
    served: tuple[BaseWSGIServer, _App, Connections],
) -> None:
    server, app, _ = served
    smuggled = _request("/smuggled")  # the unread body looks like a request of its own
    with _connect(server) as connection:
        connection.sendall(_request("/ignore", body=smuggled) + _request("/next", body=b"ab"))
        responses = _Responses(connection)
        assert [responses.next()[2] for _ in range(2)] == [b"POST /ignore 0", b"POST /next 2"]
    assert [path for path, _ in app.seen] == ["/ignore", "/next"]


@pytest.mark.parametrize(
    ("request_bytes", "status", "answer"),
    [
        (_request("/bye", headers="Connection: close\r\n"), "HTTP/1.1 200 OK", b"POST /bye 0"),
        (_request("/last"), "HTTP/1.1 200 OK", b"POST /last 0"),
        (b"POST /old HTTP/1.0\r\nContent-Length: 2\r\n\r\nab", "HTTP/1.1 200 OK", b"POST /old 2"),
        (
            b"POST /chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
            "HTTP/1.1 200 OK",
            b"POST /chunked 3",
        ),
        (b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", "HTTP/1.1 400 ", None),
        (_request("/fail", body=b"unread"), "HTTP/1.1 500 INTERNAL SERVER ERROR", None),
        (
            # No chunked coding: the body's length is unknown (RFC 9112 6.3), it must not become a request
            b"POST /ignore HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n" + _request("/smuggled"),
            "HTTP/1.1 400 ",
            None,
        ),
        (b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: \xb2\r\n\r\nab", "HTTP/1.1 400 ", None),
        (
            b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: " + b"1" * 5000 + b"\r\n\r\n",
            "HTTP/1.1 400 ",
            None,
        ),
        (
            b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 5\r\n\r\nabcde",
            "HTTP/1.1 400 ",
            None,
        ),
    ],
    ids=[
        "Connection: close",
        "the application's Connection: close",
        "HTTP/1.0",
        "a chunked body",
        "a Content-Length that is not a number",
        "an application error",
        "a Transfer-Encoding that is not chunked",
        "a Content-Length in digits other than ASCII's",
        "a Content-Length longer than any length (int() refuses 4,300 digits)",
        "two different Content-Lengths",
    ],
)
def test_the_connection_is_closed_after_a_request_that_asks_for_it_is_chunked_refused_or_failed(
    served: tuple[BaseWSGIServer, _App, Connections], request_bytes: bytes, status: str, answer: bytes | None
) -> None:
    server, app, _ = served
    with _connect(server) as connection:
        connection.sendall(request_bytes)
        responses = _Responses(connection)
        answered, headers, body = responses.next()
        assert answered.startswith(status)
        assert headers["connection"] == "close"
        assert "transfer-encoding" not in headers  # the body is sent whole, with its length
        assert responses.closed()
    if answer is not None:
        assert body == answer
    elif status.endswith("400 "):
        assert app.seen == []  # refused before the application


def test_a_client_that_expects_100_continue_gets_it_before_the_answer(
    served: tuple[BaseWSGIServer, _App, Connections],
) -> None:
    server, _, _ = served
    with _connect(server) as connection:
        connection.sendall(_request("/upload", headers="Expect: 100-continue\r\n"))
        assert connection.recv(25) == b"HTTP/1.1 100 Continue\r\n\r\n"
        assert _Responses(connection).next()[2] == b"POST /upload 0"


def test_a_head_request_is_answered_without_a_body_and_the_connection_goes_on(
    served: tuple[BaseWSGIServer, _App, Connections],
) -> None:
    server, _, _ = served
    with _connect(server) as connection:
        connection.sendall(_request("/h", method="HEAD") + _request("/after"))
        responses = _Responses(connection)
        status, headers, _ = responses.next(head=True)
        assert (status, headers["content-length"]) == ("HTTP/1.1 200 OK", str(len(b"HEAD /h 0")))
        assert responses.next()[2] == b"POST /after 0"


def test_closing_all_ends_idle_connections_and_the_threads_serving_them(
    served: tuple[BaseWSGIServer, _App, Connections],
) -> None:
    server, _, connections = served
    before = set(threading.enumerate())
    with _connect(server) as first, _connect(server) as second:
        for connection in (first, second):
            connection.sendall(_request("/idle"))
            _Responses(connection).next()
        serving = set(threading.enumerate()) - before
        assert len(serving) == 2  # one thread per connection, waiting for its next request
        connections.close_all()
        assert all(_Responses(connection).closed() for connection in (first, second))
        assert not any(thread.is_alive() for thread in serving)


def test_an_application_error_is_logged_with_its_traceback(
    served: tuple[BaseWSGIServer, _App, Connections], caplog: pytest.LogCaptureFixture
) -> None:
    # werkzeug's handler logged the traceback; moto's own failures (a KeyError deep in a backend) reach here
    server, _, _ = served
    caplog.set_level(logging.ERROR, logger="werkzeug")
    with _connect(server) as connection:
        connection.sendall(_request("/fail"))
        assert _Responses(connection).next()[0] == "HTTP/1.1 500 INTERNAL SERVER ERROR"
    assert "RuntimeError: the application failed" in caplog.text


def test_closing_all_waits_for_busy_threads_at_most_its_timeout_in_all(
    served: tuple[BaseWSGIServer, _App, Connections],
) -> None:
    server, app, connections = served
    busy = [_connect(server) for _ in range(3)]
    try:
        for connection in busy:
            connection.sendall(_request("/slow"))
        deadline = time.monotonic() + TIMEOUT_S
        while len(app.seen) < len(busy) and time.monotonic() < deadline:
            time.sleep(0.01)
        started = time.monotonic()
        connections.close_all(timeout_s=1.0)
        assert time.monotonic() - started < 1.9  # one timeout, not one per busy connection
    finally:
        app.release.set()
        for connection in busy:
            connection.close()


def test_a_connection_set_up_while_closing_all_runs_is_closed_too(
    served: tuple[BaseWSGIServer, _App, Connections], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A connection accepted just before the server stopped, whose thread registers it only after close_all
    # looked (the thread was waiting for the interpreter lock), must not outlive the server.
    server, _, connections = served
    entered, go_on = threading.Event(), threading.Event()
    original = KeepAliveHandler.setup

    def late_setup(self: KeepAliveHandler) -> None:
        entered.set()
        go_on.wait(TIMEOUT_S)
        original(self)

    monkeypatch.setattr(KeepAliveHandler, "setup", late_setup)
    before = set(threading.enumerate())
    with _connect(server) as connection:
        assert entered.wait(TIMEOUT_S)
        serving = set(threading.enumerate()) - before
        connections.close_all()
        go_on.set()
        connection.settimeout(2.0)
        assert connection.recv(1) == b""  # closed by the server, not waiting for a request
        for thread in serving:
            thread.join(2.0)
        assert not any(thread.is_alive() for thread in serving)


def test_a_boto3_client_makes_its_calls_over_one_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[socket.socket] = []
    original = Connections.opened

    def counting(self: Connections, connection: socket.socket) -> None:
        opened.append(connection)
        original(self, connection)

    monkeypatch.setattr(Connections, "opened", counting)
    server = LocalAwsServer(FaultInjector())
    server.start()
    try:
        sqs = boto3.client(
            "sqs", endpoint_url=server.endpoint_url, region_name="us-east-1", **LOCAL_CREDENTIALS
        )
        queue_url = sqs.create_queue(QueueName="kept-alive")["QueueUrl"]
        for number in range(10):
            sqs.send_message(QueueUrl=queue_url, MessageBody=f"message {number}")
        received = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10)["Messages"]
        assert len(received) == 10
        assert len(opened) == 1
    finally:
        server.stop()
    assert all(connection.fileno() == -1 for connection in opened)  # stopping closed it
