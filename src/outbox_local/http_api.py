"""The template's API Gateway HTTP API, served on localhost with payload format 2.0.

Real HTTP requests become the events API Gateway sends to a Lambda proxy integration, and the function's
answer becomes the HTTP response by API Gateway's rules for format 2.0: a dict with `statusCode` is used as
is; any other JSON value is the body of a 200 `application/json` response. A function error is a 500
`{"message": "Internal Server Error"}`; no matching route is a 404 `{"message": "Not Found"}`.

What never reaches a function, as API Gateway answers it: a request it cannot frame (a `Content-Length`
that is not a number of at most 19 ASCII digits, a body shorter than its `Content-Length`, chunked uploads, a
malformed request line, one without an HTTP version) is a 400 `{"message": "Bad Request"}`; a text body that
is not UTF-8 is a 400 too; a body over API Gateway's 10 MB limit is a 413; a method HTTP APIs do not route
(anything but GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS) is a 400. Nothing is invoked, so nothing is
written.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from outbox_local.http_framing import SHUTDOWN_POLL_S, content_length
from outbox_local.invocation import InvocationResult

MAX_BODY_BYTES = 10 * 1024 * 1024
"""API Gateway HTTP APIs' payload limit."""
BODY_READ_TIMEOUT_S = 10.0
"""How long a body that is shorter than its Content-Length is waited for before the request is refused."""
_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})
_TEXT_TYPES = re.compile(r"^(text/|application/(json|xml|x-www-form-urlencoded|.*\+json|.*\+xml))")


@dataclass(frozen=True)
class Route:
    route_key: str
    function_arn: str

    @property
    def method(self) -> str:
        return "ANY" if self.route_key == "$default" else self.route_key.split(" ", 1)[0]

    @property
    def path(self) -> str:
        return "" if self.route_key == "$default" else self.route_key.split(" ", 1)[1]

    def match(self, method: str, path: str) -> dict[str, str] | None:
        """Path parameters if this route serves the request, else None."""
        if self.route_key == "$default":
            return {}
        if self.method not in {"ANY", method}:
            return None
        pattern = ""
        for part in self.path.strip("/").split("/"):
            if part.startswith("{") and part.endswith("+}"):
                pattern += f"/(?P<{part[1:-2]}>.+)"
            elif part.startswith("{") and part.endswith("}"):
                pattern += f"/(?P<{part[1:-1]}>[^/]+)"
            elif part:
                pattern += "/" + re.escape(part)
        found = re.fullmatch(pattern or "/", path if pattern else path or "/")
        return {key: unquote(value) for key, value in found.groupdict().items()} if found else None

    @property
    def specificity(self) -> tuple[int, int, int]:
        """API Gateway prefers exact matches, then fewer greedy and path variables, and `$default` last."""
        parts = self.path.strip("/").split("/")
        greedy = sum(p.endswith("+}") for p in parts)
        variables = sum(p.startswith("{") for p in parts)
        return (self.route_key == "$default", greedy, variables)


Invoke = Callable[[str, dict[str, Any]], InvocationResult]


class MalformedRequestError(Exception):
    """The request cannot be turned into an event API Gateway would send: answered 4xx, never invoked."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


LISTEN_BACKLOG = 128
"""Connections waiting to be accepted. http.server's default is 5: under load (32 clients, each request on a
new connection, the accepting thread waiting for the interpreter lock) the kernel dropped connection attempts,
which clients saw as a second's stall (the retried SYN) or a reset, where API Gateway accepts them."""


class _ThreadingServer(ThreadingHTTPServer):
    request_queue_size = LISTEN_BACKLOG
    daemon_threads = True


class HttpApiServer:
    """One HTTP API: a threaded HTTP server on 127.0.0.1 that invokes the routes' functions."""

    def __init__(
        self,
        api_id: str,
        invoke: Invoke,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        stage: str = "$default",
    ) -> None:
        self.api_id = api_id
        self.routes: list[Route] = []
        self.stage = stage
        self._invoke = invoke
        self._server = _ThreadingServer((host, port), self._handler_class())
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def add_route(self, route: Route) -> None:
        self.routes.append(route)
        self.routes.sort(key=lambda r: r.specificity)

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(SHUTDOWN_POLL_S,), name=f"http-api-{self.api_id}"
        )
        self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()

    def handle(self, method: str, raw_path: str, headers: list[tuple[str, str]], body: bytes) -> HttpResponse:
        parts = urlsplit(raw_path)
        path = parts.path
        if self.stage != "$default":
            prefix = f"/{self.stage}"
            if not (path == prefix or path.startswith(prefix + "/")):
                return _message(404, "Not Found")
            path = path[len(prefix) :] or "/"
        if method not in _METHODS:
            return _message(400, "Bad Request")
        for route in self.routes:
            parameters = route.match(method, path)
            if parameters is not None:
                try:
                    event = build_event(
                        route,
                        method=method,
                        path=path,
                        query=parts.query,
                        headers=headers,
                        body=body,
                        path_parameters=parameters,
                        api=self,
                    )
                except MalformedRequestError as error:
                    return _message(error.status, error.message)
                return to_http_response(self._invoke(route.function_arn, event))
        return _message(404, "Not Found")

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                try:
                    body = self._body()
                except MalformedRequestError as error:
                    # The rest of the connection cannot be framed either: answer, then close it.
                    self.close_connection = True
                    self._send(_message(error.status, error.message))
                    return
                self._send(api.handle(self.command, self.path, list(self.headers.items()), body))

            def _body(self) -> bytes:
                if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                    raise MalformedRequestError(400, "Bad Request")
                length = content_length((self.headers.get("Content-Length") or "0").strip())
                if length is None:
                    raise MalformedRequestError(400, "Bad Request")
                if length > MAX_BODY_BYTES:
                    raise MalformedRequestError(413, "Request Entity Too Large")
                if not length:
                    return b""
                self.connection.settimeout(BODY_READ_TIMEOUT_S)
                try:
                    body = self.rfile.read(length)
                except TimeoutError:
                    raise MalformedRequestError(400, "Bad Request") from None
                if len(body) < length:  # the client stopped sending: never process a truncated body
                    raise MalformedRequestError(400, "Bad Request")
                return body

            def parse_request(self) -> bool:
                """http.server serves a request line without a version (`GET /orders`) as HTTP/0.9: no
                headers, an answer without a status line. API Gateway refuses it."""
                if not super().parse_request():
                    return False
                if self.request_version == "HTTP/0.9":
                    self.send_error(400)
                    return False
                return True

            def _send(self, response: HttpResponse) -> None:
                self.send_response(response.status)
                for name, value in response.headers:
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(response.body)))
                self.end_headers()
                self.wfile.write(response.body)

            def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
                """http.server's own refusals (a malformed request line, an unknown method) in API Gateway's
                JSON instead of its HTML page."""
                self.close_connection = True
                # A request line it could not parse leaves http.server on HTTP/0.9, which has no status line:
                # API Gateway answers HTTP/1.1 whatever it got.
                self.request_version = "HTTP/1.1"
                status = 400 if code == 501 else code
                self._send(_message(status, "Bad Request" if status == 400 else str(message)))

            # http.server dispatches on do_<METHOD>; every method goes to the route table.
            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _serve  # noqa: N815

            def log_message(self, format: str, *args: Any) -> None:
                """Request lines would drown the runtime's own output."""

        return Handler


@dataclass(frozen=True)
class HttpResponse:
    status: int
    headers: list[tuple[str, str]]
    body: bytes


def build_event(
    route: Route,
    *,
    method: str,
    path: str,
    query: str,
    headers: list[tuple[str, str]],
    body: bytes,
    path_parameters: dict[str, str],
    api: HttpApiServer,
) -> dict[str, Any]:
    """An API Gateway payload format 2.0 event, as a Lambda proxy integration receives it."""
    merged: dict[str, str] = {}
    cookies: list[str] = []
    for name, value in headers:
        key = name.lower()
        if key == "cookie":
            cookies.extend(part.strip() for part in value.split(";") if part.strip())
            continue
        merged[key] = f"{merged[key]},{value}" if key in merged else value
    query_parameters: dict[str, str] = {}
    for name, value in parse_qsl(query, keep_blank_values=True):
        query_parameters[name] = f"{query_parameters[name]},{value}" if name in query_parameters else value
    now = time.time()
    is_text = not body or bool(_TEXT_TYPES.match(merged.get("content-type", "text/plain")))
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": route.route_key,
        "rawPath": path if api.stage == "$default" else f"/{api.stage}{path}",
        "rawQueryString": query,
        "headers": merged,
        "requestContext": {
            "accountId": "123456789012",
            "apiId": api.api_id,
            "domainName": merged.get("host", "localhost"),
            "domainPrefix": merged.get("host", "localhost").split(".")[0],
            "http": {
                "method": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": "127.0.0.1",
                "userAgent": merged.get("user-agent", ""),
            },
            "requestId": str(uuid.uuid4()),
            "routeKey": route.route_key,
            "stage": api.stage,
            "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
            "timeEpoch": int(now * 1000),
        },
        "isBase64Encoded": not is_text,
    }
    if cookies:
        event["cookies"] = cookies
    if query_parameters:
        event["queryStringParameters"] = query_parameters
    if path_parameters:
        event["pathParameters"] = path_parameters
    if body and is_text:
        try:
            event["body"] = body.decode("utf-8")
        except UnicodeDecodeError:
            raise MalformedRequestError(400, "Bad Request") from None
    elif body:
        event["body"] = base64.b64encode(body).decode("ascii")
    return event


def to_http_response(result: InvocationResult) -> HttpResponse:
    """API Gateway's mapping of a format 2.0 Lambda response to HTTP."""
    if result.failed:
        return _message(500, "Internal Server Error")
    payload = result.payload
    if not (isinstance(payload, dict) and "statusCode" in payload):
        # Without statusCode, API Gateway assumes 200, JSON, and the whole value as the body.
        text = payload if isinstance(payload, str) else json.dumps(payload)
        return HttpResponse(200, [("Content-Type", "application/json")], text.encode())
    try:
        status = int(payload["statusCode"])
    except (TypeError, ValueError):
        return _message(500, "Internal Server Error")
    headers = [(str(name), str(value)) for name, value in (payload.get("headers") or {}).items()]
    headers.extend(("Set-Cookie", str(cookie)) for cookie in payload.get("cookies") or [])
    if not any(name.lower() == "content-type" for name, _ in headers):
        headers.append(("Content-Type", "application/json"))
    raw_body = payload.get("body")
    text = raw_body if isinstance(raw_body, str) else ("" if raw_body is None else json.dumps(raw_body))
    body = base64.b64decode(text) if payload.get("isBase64Encoded") else text.encode()
    return HttpResponse(status, headers, body)


def _message(status: int, message: str) -> HttpResponse:
    return HttpResponse(
        status, [("Content-Type", "application/json")], json.dumps({"message": message}).encode()
    )
