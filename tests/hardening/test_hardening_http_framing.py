"""Bad HTTP at the local HTTP API (outbox_local.http_api), in front of the real Orders API handler: methods,
raw paths and query strings, headers, bodies and their Content-Length, over a real socket and through the
server's routing.

What API Gateway would refuse never reaches the function (a 4xx in API Gateway's JSON, nothing invoked, so
nothing written); what reaches it gets the function's typed answer; never a 500, nothing partial in the
tables, and no body value or header value in the function's log.
"""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infra.constants import ORDERS_API_ROUTES
from orders_api import handler as api
from outbox_local import http_api
from outbox_local.http_api import HttpApiServer, Route
from outbox_local.invocation import InvocationResult
from tests.hardening.checks import captured, judge, leaks_in, marker
from tests.hardening.orders_world import ERROR_CODES, OrdersTables, accepted_writes, nothing_written
from tests.hardening.profiles import examples
from tests.hardening.strategies import hostile_text, marked_text, raw_json_texts, short_text
from tests.hardening.tally import Outcome, Source
from tests.integration.local.test_local_http_framing import post
from tests.support.lambda_context import FakeLambdaContext
from tests.support.orders import place_body

CATEGORY = "http-framing"
FUNCTION_ARN = "arn:aws:lambda:us-east-1:123456789012:function:orders-api"
# Refusals that never reach the function: API Gateway's 4xx, and http.server's own for what it cannot even
# read (431 for a header line too long, 505 for an HTTP version it does not speak), all in API Gateway's JSON.
REFUSED_UNREAD = frozenset({431, 505})


@dataclass
class OrdersFunction:
    """The Orders API handler as the local runtime hosts it: each event in, its answer (or its error) out."""

    events: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, _function_arn: str, event: dict[str, Any]) -> InvocationResult:
        self.events.append(event)
        try:
            return InvocationResult(payload=api.handler(event, FakeLambdaContext()))
        except Exception as error:
            return InvocationResult(error_type=type(error).__name__, error_message=str(error))


@dataclass
class LocalApi:
    server: HttpApiServer
    function: OrdersFunction
    orders: OrdersTables


@pytest.fixture(scope="module")
def local_api(orders_api: OrdersTables) -> Iterator[LocalApi]:
    function = OrdersFunction()
    server = HttpApiServer("orders", function)
    for method, path in ORDERS_API_ROUTES:
        server.add_route(Route(f"{method} {path}", FUNCTION_ARN))
    server.start()
    with pytest.MonkeyPatch.context() as patch:
        # A body that never comes is refused after this long: short, so no input waits for it.
        patch.setattr(http_api, "BODY_READ_TIMEOUT_S", 0.2)
        try:
            yield LocalApi(server, function, orders_api)
        finally:
            server.stop()


def judge_answer(api_: LocalApi, send: Any, *, source: Source) -> None:
    """Sends one request (`send()` returns status and parsed body); judges the answer, whether the function
    was reached, the tables and the log; puts the tables back."""
    api_.function.events.clear()
    before = api_.orders.read()
    with captured() as output:
        status, body, headers = send()
    after = api_.orders.read()
    try:
        if not api_.function.events:
            assert 400 <= status < 500 or status in REFUSED_UNREAD, (status, body)
            assert isinstance(body, dict), (status, body)
            assert body.get("message"), (status, body)
            outcome, partial = Outcome.REJECTED, nothing_written(before, after)
        elif status < 300:  # the function answered: never a 500, whatever it was sent
            outcome, partial = Outcome.ACCEPTED, accepted_writes(before, after, body, headers)
        else:
            assert status < 500, (status, body)
            assert body["error"]["code"] in ERROR_CODES, body
            outcome, partial = Outcome.REJECTED, nothing_written(before, after)
        judge(CATEGORY, outcome, source=source, partial_writes=partial, leaks=leaks_in(output.places))
    finally:
        api_.orders.put_back(before, after)


def through_socket(api_: LocalApi, request: bytes) -> Any:
    def send() -> tuple[int, Any, dict[str, str]]:
        status, body = exchange_until_closed(api_.server, request)
        return status, body, {}

    return send


def exchange_until_closed(server: HttpApiServer, request: bytes) -> tuple[int, Any]:
    """Sends the request, closes the sending side (a body shorter than its Content-Length ends there) and
    reads the answer until the server closes. Unlike `exchange` (tests/integration/local), it takes a server
    that refuses and closes before the request is even all sent (no reset or unconnected socket error
    then)."""
    host, port = server.url.removeprefix("http://").split(":")
    received = b""
    with socket.create_connection((host, int(port)), timeout=30) as connection:
        with contextlib.suppress(OSError):
            connection.sendall(request)
        with contextlib.suppress(OSError):
            connection.shutdown(socket.SHUT_WR)
        with contextlib.suppress(OSError):
            while chunk := connection.recv(65536):
                received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), json.loads(body) if body else None


def through_routing(
    api_: LocalApi, method: str, path: str, headers: list[tuple[str, str]], body: bytes
) -> Any:
    def send() -> tuple[int, Any, dict[str, str]]:
        response = api_.server.handle(method, path, headers, body)
        return response.status, json.loads(response.body) if response.body else None, dict(response.headers)

    return send


# --- Listed: what a client can get wrong on the wire ----------------------------------------------------

BODY = json.dumps(place_body(customer_id=marker(1))).encode()
LISTED_REQUESTS: list[tuple[str, bytes]] = [
    ("well-framed", post(f"Content-Type: application/json\r\nContent-Length: {len(BODY)}\r\n", BODY)),
    ("content-length-not-a-number", post("Content-Length: abc\r\n", BODY)),
    ("content-length-negative", post("Content-Length: -1\r\n", BODY)),
    ("content-length-plus", post(f"Content-Length: +{len(BODY)}\r\n", BODY)),
    ("content-length-arabic-indic", post("Content-Length: \u0661\u0660\r\n", BODY)),
    ("content-length-fullwidth", post("Content-Length: \uff11\r\n", BODY)),
    ("content-length-hex", post("Content-Length: 0x10\r\n", BODY)),
    ("content-length-over-10-mb", post(f"Content-Length: {http_api.MAX_BODY_BYTES + 1}\r\n")),
    ("content-length-5000-digits", post(f"Content-Length: {'9' * 5000}\r\n", BODY)),
    (
        "content-length-short-body",
        post(f"Content-Type: application/json\r\nContent-Length: {len(BODY) + 50}\r\n", BODY),
    ),
    ("content-length-twice", post(f"Content-Length: {len(BODY)}\r\nContent-Length: 3\r\n", BODY)),
    ("chunked", post("Transfer-Encoding: chunked\r\n", b"2\r\n{}\r\n0\r\n\r\n")),
    ("chunked-mixed-case", post("Transfer-Encoding: ChUnKeD\r\n", b"0\r\n\r\n")),
    ("text-body-not-utf8", post("Content-Type: application/json\r\nContent-Length: 2\r\n", b"\xff\xfe")),
    (
        "binary-body-not-utf8",
        post("Content-Type: application/octet-stream\r\nContent-Length: 3\r\n", b"\xff\xfe{"),
    ),
    ("header-without-colon", post(f"X-Broken {marker(2)}\r\nContent-Length: 0\r\n")),
    ("header-value-marker", post(f"X-Api-Key: {marker(3)}\r\nContent-Length: 0\r\n")),
    ("header-latin-1", post("X-Name: caf\xe9\r\nContent-Length: 0\r\n")),
    ("cookie-marker", post(f"Cookie: session={marker(4)}\r\nContent-Length: 0\r\n")),
    ("unknown-method", b"BREW /orders HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n"),
    ("lowercase-method", b"post /orders HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n"),
    ("malformed-request-line", b"POST /orders HTTP/1.1 extra\r\n\r\n"),
    ("request-line-only-method", b"POST\r\n\r\n"),
    ("http-2-line", b"GET /orders/x HTTP/2.0\r\n\r\n"),
    ("http-0.9-request-line", b"GET /orders\r\n"),
    ("http-0.9-request-line-of-an-order", b"GET /orders/x\r\n\r\n"),
    ("absolute-uri", b"GET http://evil.example/orders/x HTTP/1.1\r\nHost: localhost\r\n\r\n"),
    ("path-traversal", b"GET /orders/../../etc/passwd HTTP/1.1\r\nHost: localhost\r\n\r\n"),
    ("encoded-slash", b"GET /orders/a%2Fb HTTP/1.1\r\nHost: localhost\r\n\r\n"),
    ("encoded-nul", b"GET /orders/a%00b HTTP/1.1\r\nHost: localhost\r\n\r\n"),
    ("non-utf8-path", b"GET /orders/%ff%fe HTTP/1.1\r\nHost: localhost\r\n\r\n"),
    ("query-marker", f"GET /orders/x?token={marker(5)}&a=1&a=2 HTTP/1.1\r\nHost: localhost\r\n\r\n".encode()),
    ("very-long-header", post(f"X-Long: {'x' * 70_000}\r\nContent-Length: 0\r\n")),
]


@pytest.mark.parametrize(
    "request_bytes", [r for _, r in LISTED_REQUESTS], ids=[i for i, _ in LISTED_REQUESTS]
)
def test_listed_requests_are_refused_before_the_function_or_answered_by_it(
    local_api: LocalApi, request_bytes: bytes
) -> None:
    # Given the local API / When a listed request arrives on the socket / Then refused or typed, no partial
    judge_answer(local_api, through_socket(local_api, request_bytes), source=Source.LISTED)


@pytest.mark.parametrize(
    "request_bytes",
    [
        pytest.param(post(f"Content-Length: {'9' * 5000}\r\n", BODY), id="content-length-5000-digits"),
        pytest.param(b"GET /orders\r\n", id="http-0.9-request-line"),
    ],
)
def test_a_5000_digit_content_length_and_an_http_0_9_request_line_are_a_400_never_invoked(
    local_api: LocalApi, request_bytes: bytes
) -> None:
    # Given the local API / When the request arrives / Then API Gateway's 400, on a status line; not invoked
    local_api.function.events.clear()
    assert exchange_until_closed(local_api.server, request_bytes) == (400, {"message": "Bad Request"})
    assert local_api.function.events == []


# --- Generated ------------------------------------------------------------------------------------------

methods = st.one_of(
    st.sampled_from(("GET", "POST")),
    st.sampled_from(("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "TRACE", "CONNECT")),
    st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabc", min_size=1, max_size=8),
)
# Percent-encoded as a client sends them: a raw space would split the request line into other words.
path_parts = st.one_of(
    st.sampled_from(("orders", "confirm", "cancel", "", "..", "%2F", "%00", "%ff")),
    short_text.map(lambda text: quote(text, safe="%")),
)
# The routes themselves ({id}: an order that exists), and paths near them or nowhere near.
paths = st.one_of(
    st.sampled_from(("/orders", "/orders/{id}", "/orders/{id}/confirm", "/orders/{id}/cancel")),
    st.lists(path_parts, max_size=4).map(lambda parts: "/" + "/".join(parts)),
)
raw_paths = st.builds(
    lambda path, query: path + (f"?{quote(query, safe='=&%')}" if query is not None else ""),
    paths,
    st.one_of(st.none(), st.text(max_size=20), marked_text.map(lambda text: f"secret={text}")),
)
header_lists = st.lists(
    st.tuples(
        st.sampled_from(("Content-Type", "Cookie", "X-Api-Key", "Authorization", "Idempotency-Key", "Host")),
        st.one_of(
            st.sampled_from(("application/json", "application/octet-stream", "text/plain")), marked_text
        ),
    ),
    max_size=4,
)
bodies = st.one_of(
    st.just(b""),
    st.just(BODY),
    st.just(b'{"expected_version": 1}'),
    raw_json_texts().map(str.encode),
    st.binary(max_size=64),
    hostile_text.map(lambda text: text.encode("utf-8", "surrogatepass")),
)


@examples(3)
@given(request=st.tuples(methods, raw_paths, header_lists, bodies))
def test_generated_requests_are_refused_before_the_function_or_answered_by_it(
    local_api: LocalApi, order_id: str, request: tuple[str, str, list[tuple[str, str]], bytes]
) -> None:
    # Given the local API / When a generated request reaches its routing / Then refused or typed, no partial
    method, path, headers, body = request
    send = through_routing(local_api, method, path.replace("{id}", order_id), headers, body)
    judge_answer(local_api, send, source=Source.GENERATED)


content_lengths = st.one_of(
    st.integers(min_value=-5, max_value=200).map(str),
    st.sampled_from(("", " ", "abc", "0x10", "+1", "1.0", "1e3", "\u0661", "9" * 50, "9" * 5000)),
)
request_lines = st.builds(
    lambda method, path, version: " ".join(word for word in (method, path, version) if word),
    methods,
    raw_paths,
    # No version at all: a line of two words, which http.server would serve as HTTP/0.9.
    st.sampled_from(("HTTP/1.1", "HTTP/1.0", "HTTP/2", "HTTP/1.1 extra", "HTTP/x", "http/1.1", "")),
)


@examples(1)
@given(line=request_lines, length=content_lengths, body=bodies)
def test_generated_framing_is_refused_before_the_function_or_answered_by_it(
    local_api: LocalApi, order_id: str, line: str, length: str, body: bytes
) -> None:
    # Given the local API / When a request with a generated request line and Content-Length arrives on the
    # socket / Then refused (never invoked) or typed, nothing partial
    headers = f"Host: localhost\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n"
    head = f"{line.replace('{id}', order_id)}\r\n{headers}\r\n"
    request = head.encode("utf-8", "surrogatepass") + body
    judge_answer(local_api, through_socket(local_api, request), source=Source.GENERATED)
