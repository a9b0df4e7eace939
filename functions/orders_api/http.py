"""The Orders API's HTTP layer: API Gateway HTTP API events (payload format 2.0) in, routed, responses out.

Powertools' `APIGatewayHttpResolver` lacks a cheap import: its package loads every resolver (AppSync's
asyncio) and every event data class, 104 modules, +12% on this function's cold start (bench/cold_start.py,
import and first-invoke wiring: 958 -> 1,075 M instructions, 304 -> 343 ms). This router routes as that
resolver does, and the tests hold it to the resolver: a route is a method and a rule whose `<name>` parts
match one path segment of the resolver's characters, in the path after a named stage; no match is the
not-found handler's; an exception from a route goes to the handler registered for its nearest class;
headers are read case-insensitively; a base64 body is decoded.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Mapping
from typing import Any

SEGMENT = r"[-._~()'!*:@,;=+&$%<> \[\]{}|^\w]+"
"""What a `<name>` in a rule matches: Powertools' set (RFC 3986's unreserved and sub-delims, and more)."""
_PARAMETER = re.compile(r"<(\w+)>")


class Request:
    """The request being handled: one API Gateway event, read as the routes need it."""

    def __init__(self, event: Mapping[str, Any]) -> None:
        self.event = event
        self.headers = {str(name).lower(): value for name, value in (event.get("headers") or {}).items()}
        self.context: dict[str, Any] = {}
        """What the routes work out once per request."""

    @property
    def method(self) -> str:
        return str(self.event["requestContext"]["http"]["method"]).upper()

    @property
    def path(self) -> str:
        """The path routed: rawPath after a named stage's `/<stage>`, which API Gateway puts before it."""
        stage = self.event["requestContext"].get("stage", "$default")
        raw_path = str(self.event["rawPath"])
        return raw_path if stage == "$default" else raw_path[len(f"/{stage}") :]

    @property
    def request_id(self) -> str | None:
        value = (self.event.get("requestContext") or {}).get("requestId")
        return None if value is None else str(value)

    def header(self, name: str) -> str | None:
        value = self.headers.get(name.lower())
        return None if value is None else str(value)

    def decoded_body(self) -> str:
        """The body as text (raises binascii.Error or UnicodeDecodeError for a base64 body that is not)."""
        body = self.event.get("body") or ""
        return base64.b64decode(body.encode()).decode() if self.event.get("isBase64Encoded") else str(body)


class Response:
    def __init__(self, status: int, body: str, headers: dict[str, str] | None = None) -> None:
        self.status = status
        self.body = body
        self.headers = headers if headers is not None else {}

    def to_event(self, content_type: str) -> dict[str, Any]:
        """The response API Gateway takes from a Lambda integration (payload format 2.0)."""
        return {
            "statusCode": self.status,
            "body": self.body,
            "isBase64Encoded": False,
            "headers": {"Content-Type": content_type} | self.headers,
            "cookies": [],
        }


Route = Callable[..., Response]
ErrorHandler = Callable[[Any], Response]


class Router:
    """Routes requests to handlers; the request being handled is `current` while a handler runs."""

    def __init__(self, content_type: str) -> None:
        self.content_type = content_type
        self._routes: list[tuple[str, re.Pattern[str], Route]] = []
        self._errors: dict[type[BaseException], ErrorHandler] = {}
        self._not_found: Callable[[], Response] | None = None
        self._current: Request | None = None

    @property
    def current(self) -> Request:
        if self._current is None:
            raise RuntimeError("no request is being handled")
        return self._current

    def route(self, method: str, rule: str) -> Callable[[Route], Route]:
        pattern = re.compile("^" + _PARAMETER.sub(lambda name: f"(?P<{name[1]}>{SEGMENT})", rule) + "$")

        def register(function: Route) -> Route:
            self._routes.append((method.upper(), pattern, function))
            return function

        return register

    def on_error(self, error_type: type[BaseException], handler: ErrorHandler) -> None:
        self._errors[error_type] = handler

    def on_not_found(self, handler: Callable[[], Response]) -> None:
        self._not_found = handler

    def resolve(self, event: Mapping[str, Any]) -> dict[str, Any]:
        self._current = request = Request(event)
        try:
            return self._respond(request).to_event(self.content_type)
        finally:
            self._current = None

    def _respond(self, request: Request) -> Response:
        function, arguments = self._match(request)
        try:
            return function(**arguments)
        except Exception as error:  # the not-found handler's too, as in Powertools' resolver
            return self._handler_of(error)(error)

    def _match(self, request: Request) -> tuple[Route, dict[str, str]]:
        for method, pattern, function in self._routes:
            matched = pattern.match(request.path) if method == request.method else None
            if matched is not None:
                return function, matched.groupdict()
        if self._not_found is None:
            raise LookupError(f"no route for {request.method} and no not-found handler")
        return self._not_found, {}

    def _handler_of(self, error: Exception) -> ErrorHandler:
        for error_type in type(error).__mro__:
            if error_type in self._errors:
                return self._errors[error_type]
        raise error
