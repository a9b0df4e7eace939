"""HTTP/1.1 keep-alive for the runtime's moto server: a client's connection, and the thread serving it, last
for many requests. Without it the runtime's commit -> delivery p50 is 12-16% longer and its p99 24-88% (two
paired runs of `python -m bench.local_load --orders 600 --rate 15`, a loaded 2-core machine).

werkzeug 3.1's handler (`WSGIRequestHandler.run_wsgi`) ends every response with `Connection: close` and then
reads whatever the client sent after its request, so every AWS call opened a connection and a thread, all
under the interpreter lock every request shares. `KeepAliveHandler` runs the WSGI application as werkzeug does
up to the response, reads exactly the request's `Content-Length`, and keeps the connection unless the client
asks to close it, the body was chunked, or the application failed; a body whose length is unknown (another
`Transfer-Encoding`, a `Content-Length` that is not one number) is refused (400), so it is never read as the
next request. It answers in one write with the body's `Content-Length`. `Connections` knows every open
connection, so stopping the server closes the idle ones at once and no handler thread outlives it.
"""

from __future__ import annotations

import contextlib
import threading
import time
import traceback
from collections.abc import Iterable
from socket import SHUT_RDWR, socket
from typing import IO, Any, cast

from moto.moto_server.werkzeug_app import MotoRequestHandler
from werkzeug.exceptions import InternalServerError
from werkzeug.wsgi import LimitedStream

from outbox_local.http_framing import content_length

_NO_BODY_STATUSES = (204, 304)


class Connections:
    """The server's open client connections and the threads serving them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[socket, threading.Thread] = {}
        self._closing = False

    def opened(self, connection: socket) -> None:
        with self._lock:
            self._open[connection] = threading.current_thread()
            closing = self._closing
        if closing:  # accepted before the server stopped, but set up after close_all looked: closed as well
            with contextlib.suppress(OSError):
                connection.shutdown(SHUT_RDWR)

    def closed(self, connection: socket) -> None:
        with self._lock:
            self._open.pop(connection, None)

    def close_all(self, timeout_s: float = 5.0) -> None:
        """Shut every open connection down (and any set up from now on) and wait, `timeout_s` in all, for the
        threads that served them to end."""
        with self._lock:
            self._closing = True
            open_now = list(self._open.items())
        for connection, _ in open_now:
            with contextlib.suppress(OSError):  # the client closed it first
                connection.shutdown(SHUT_RDWR)  # a thread waiting for the next request reads end-of-file
        deadline = time.monotonic() + timeout_s
        for _, thread in open_now:
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))


def keep_alive_handler(connections: Connections) -> type[KeepAliveHandler]:
    """The handler class for one server: it reports its connections to `connections`."""
    return type("KeepAliveHandler", (KeepAliveHandler,), {"connections": connections})


class KeepAliveHandler(MotoRequestHandler):
    protocol_version = "HTTP/1.1"
    connections: Connections

    def setup(self) -> None:
        super().setup()
        self.connections.opened(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.connections.closed(self.connection)

    def log_request(self, *args: Any, **kwargs: Any) -> None:
        """Request lines would drown the runtime's own output."""

    def run_wsgi(self) -> None:
        # `Expect: 100-continue` was answered by http.server's parse_request (HTTP/1.1), once.
        environ = self.make_environ()
        body: LimitedStream | None = None
        if environ.get("wsgi.input_terminated"):
            self.close_connection = True  # chunked: werkzeug's reader may read past the body's end
        else:
            length = content_length(environ.get("CONTENT_LENGTH") or "0")
            if "HTTP_TRANSFER_ENCODING" in environ:  # not chunked: where the body ends is unknown
                self._refuse("Transfer-Encoding is not chunked")
                return
            if length is None or len(set(self.headers.get_all("Content-Length") or ())) > 1:
                self._refuse("Content-Length is not one number")
                return
            body = LimitedStream(cast(IO[bytes], self.rfile), length)
            environ["wsgi.input"] = body
        status, headers, content = self._run(environ)
        if body is not None and not self.close_connection:
            try:
                body.exhaust()  # what the application did not read: the next request starts where it should
            except Exception:  # the client sent less than it announced: nothing more can be read from it
                self.close_connection = True
        self._respond(status, headers, content, head=environ["REQUEST_METHOD"] == "HEAD")

    def _refuse(self, reason: str) -> None:
        self.close_connection = True
        self.send_error(400, reason)

    def _run(self, environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bytes]:
        started: list[Any] = []
        written: list[bytes] = []

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            started[:] = [status, headers]  # nothing is sent before the application returns: no conflict
            return written.append

        try:
            answer: Iterable[bytes] = self.server.app(environ, start_response)
            try:
                written.extend(answer)
            finally:
                close = getattr(answer, "close", None)
                if close is not None:
                    close()
        except Exception:  # the application failed: answered 500, as werkzeug does, and the connection closed
            self.log_error(
                "Error on request %s %s:\n%s",
                environ["REQUEST_METHOD"],
                environ["PATH_INFO"],
                traceback.format_exc(),  # what werkzeug logs: moto's own failures are found by it
            )
            self.close_connection = True
            error = InternalServerError()
            return "500 INTERNAL SERVER ERROR", error.get_headers(environ), error.get_body(environ).encode()
        return started[0], started[1], b"".join(written)

    def _respond(self, status: str, headers: list[tuple[str, str]], content: bytes, *, head: bool) -> None:
        code = int(status.split(None, 1)[0])
        lines = [f"{self.protocol_version} {status}"]
        names = set()
        for name, value in headers:
            lowered = name.lower()
            if lowered == "connection" and value.lower() == "close":
                self.close_connection = True
            if lowered in ("connection", "transfer-encoding"):
                continue  # hop-by-hop (a WSGI application must not set them; PEP 3333): this handler decides
            names.add(lowered)
            lines.append(f"{name}: {value}")
        if code >= 200 and code not in _NO_BODY_STATUSES and "content-length" not in names:
            lines.append(f"Content-Length: {len(content)}")
        if "date" not in names:
            lines.append(f"Date: {self.date_time_string()}")
        if self.close_connection:
            lines.append("Connection: close")
        head_bytes = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        self.wfile.write(head_bytes if head or code in _NO_BODY_STATUSES else head_bytes + content)
