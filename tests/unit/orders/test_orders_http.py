"""orders_api.http: the Orders API's own routing, held to what Powertools' HTTP API resolver does for the same
routes (the resolver is the oracle: every path is routed, or not, with the same parameters)."""

from __future__ import annotations

import base64
import itertools
from typing import Any, cast

import pytest
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from aws_lambda_powertools.event_handler import Response as PowertoolsResponse
from hypothesis import given, settings
from hypothesis import strategies as st

from orders_api.http import Response, Router
from tests.support.lambda_context import FakeLambdaContext
from tests.support.orders import http_event

ROUTES = (
    ("POST", "/orders"),
    ("GET", "/orders/<order_id>"),
    ("POST", "/orders/<order_id>/confirm"),
    ("POST", "/orders/<order_id>/cancel"),
)
PIECES = ("orders", "confirm", "cancel", "", "..", "%2F", "%00", "%ff", "a b", "é", "o-1", "?x=1", "#", "'!*")


def ours() -> Router:
    router = Router(content_type="application/json")
    for method, rule in ROUTES:
        router.route(method, rule)(lambda rule=rule, **parameters: Response(200, repr((rule, parameters))))
    router.on_not_found(lambda: Response(404, "not found"))
    return router


def powertools() -> APIGatewayHttpResolver:
    resolver = APIGatewayHttpResolver()
    for method, rule in ROUTES:

        def answer(rule: str = rule, **parameters: Any) -> PowertoolsResponse[str]:
            return PowertoolsResponse(200, "application/json", repr((rule, parameters)))

        resolver.route(rule, method)(answer)
    resolver.not_found(lambda _error: PowertoolsResponse(404, "application/json", "not found"))
    return resolver


OURS, POWERTOOLS = ours(), powertools()


def routed(method: str, path: str) -> tuple[tuple[int, str], tuple[int, str]]:
    event = http_event(method, path)
    mine = OURS.resolve(event)
    theirs = POWERTOOLS.resolve(event, cast(Any, FakeLambdaContext()))
    return (mine["statusCode"], mine["body"]), (theirs["statusCode"], theirs["body"])


PATHS = ["/" + "/".join(parts) for size in (1, 2, 3) for parts in itertools.product(PIECES[:8], repeat=size)]


def mismatches(requests: list[tuple[str, str]]) -> list[tuple[str, str, tuple[int, str], tuple[int, str]]]:
    """The requests the two routers answer differently, each with both answers."""
    answers = [(method, path, *routed(method, path)) for method, path in requests]
    return [(method, path, mine, theirs) for method, path, mine, theirs in answers if mine != theirs]


@pytest.mark.parametrize("method", ["GET", "POST", "get", "DELETE"])
def test_every_path_is_routed_as_powertools_routes_it(method: str) -> None:
    assert mismatches([(method, path) for path in PATHS[::2]]) == []


SEGMENTS = [chr(code) for code in range(1, 128)] + ["é", "\u00a0", "\u2028", "日本", "a b", "%2F", "x" * 300]


def test_an_order_id_of_any_character_is_routed_as_powertools_routes_it() -> None:
    requests = [("GET", f"/orders/{segment}") for segment in SEGMENTS]
    requests += [("POST", f"/orders/o-{segment}-1/confirm") for segment in SEGMENTS]
    assert mismatches(requests) == []


@settings(max_examples=300, deadline=None)
@given(
    method=st.sampled_from(["GET", "POST"]),
    parts=st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=6)), min_size=0, max_size=4),
)
def test_any_path_is_routed_as_powertools_routes_it(method: str, parts: list[str]) -> None:
    mine, theirs = routed(method, "/" + "/".join(parts))
    assert mine == theirs


def test_the_response_is_what_api_gateway_takes_with_the_content_type_unless_a_route_set_one() -> None:
    router = Router(content_type="application/json")
    router.route("GET", "/a")(lambda: Response(200, "{}", {"ETag": '"1"'}))
    router.route("GET", "/b")(lambda: Response(200, "x", {"Content-Type": "text/plain"}))
    assert router.resolve(http_event("GET", "/a")) == {
        "statusCode": 200,
        "body": "{}",
        "isBase64Encoded": False,
        "headers": {"Content-Type": "application/json", "ETag": '"1"'},
        "cookies": [],
    }
    assert router.resolve(http_event("GET", "/b"))["headers"] == {"Content-Type": "text/plain"}


class BaseError(Exception):
    pass


class SpecificError(BaseError):
    pass


class OtherError(SpecificError):
    pass


def test_an_exception_goes_to_the_handler_of_its_nearest_class() -> None:
    router = Router(content_type="application/json")
    raised: list[Exception] = [SpecificError("a"), OtherError("b"), ValueError("c")]

    def fail() -> Response:
        raise raised.pop(0)

    router.route("GET", "/fail")(fail)
    router.on_error(BaseError, lambda error: Response(400, f"base {error}"))
    router.on_error(SpecificError, lambda error: Response(409, f"specific {error}"))
    router.on_error(Exception, lambda error: Response(500, f"any {type(error).__name__}"))
    answers = [router.resolve(http_event("GET", "/fail")) for _ in range(3)]
    assert [(answer["statusCode"], answer["body"]) for answer in answers] == [
        (409, "specific a"),
        (409, "specific b"),
        (500, "any ValueError"),
    ]


def test_an_exception_no_handler_takes_is_raised() -> None:
    router = Router(content_type="application/json")

    def fail() -> Response:
        raise KeyError("k")

    router.route("GET", "/fail")(fail)
    with pytest.raises(KeyError):
        router.resolve(http_event("GET", "/fail"))
    with pytest.raises(LookupError, match="no route for GET"):
        router.resolve(http_event("GET", "/nowhere"))


def test_the_request_is_read_as_the_routes_need_it_and_only_while_it_is_handled() -> None:
    router = Router(content_type="application/json")
    seen: list[dict[str, Any]] = []

    def look() -> Response:
        request = router.current
        seen.append(
            {
                "idempotency": request.header("Idempotency-Key"),
                "absent": request.header("If-Match"),
                "body": request.decoded_body(),
                "request_id": request.request_id,
                "method": request.method,
                "context": dict(request.context),
            }
        )
        request.context["kept"] = True
        return Response(200, "")

    router.route("POST", "/look")(look)
    body = '{"a": 1}'
    event = http_event(
        "POST", "/look", raw_body=body, headers={"Idempotency-Key": "k-1"}, base64_encoded=True
    )
    assert event["body"] == base64.b64encode(body.encode()).decode()
    router.resolve(event)
    router.resolve(event)
    expected = {
        "idempotency": "k-1",
        "absent": None,
        "body": body,
        "request_id": "api-request-1",
        "method": "POST",
    }
    assert seen == [expected | {"context": {}}] * 2  # each request starts with an empty context
    with pytest.raises(RuntimeError, match="no request is being handled"):
        router.current  # noqa: B018 - the property is what is tested


@pytest.mark.parametrize("stage", ["prod", "v1", "$default"])
def test_a_named_stage_in_the_raw_path_is_routed_as_powertools_routes_it(stage: str) -> None:
    # Given an API on a named stage: API Gateway puts the stage's name in front of rawPath (the local runtime
    # does too), and Powertools' resolver routes the path after it (its issue #621)
    raw_paths = ["/{stage}/orders/o-1", "/{stage}/orders/o-1/confirm", "/{stage}", "/{stage}x/orders/o-1"]
    for method in ("GET", "POST"):
        for raw_path in raw_paths:
            event = http_event(method, "/")
            event["rawPath"] = raw_path.format(stage=stage)
            event["requestContext"]["stage"] = stage
            # When it is resolved / Then it is routed, or not, as the resolver routes it
            mine = OURS.resolve(event)
            theirs = POWERTOOLS.resolve(event, cast(Any, FakeLambdaContext()))
            assert (mine["statusCode"], mine["body"]) == (theirs["statusCode"], theirs["body"]), event[
                "rawPath"
            ]


def test_an_exception_from_the_not_found_handler_goes_to_the_exception_handlers_as_in_powertools() -> None:
    # Given a not-found handler that fails, and a handler for every exception, in both routers
    def not_found() -> Response:
        raise ValueError("broken")

    router = Router(content_type="application/json")
    router.on_not_found(not_found)
    router.on_error(Exception, lambda error: Response(500, f"any {type(error).__name__}"))
    resolver = APIGatewayHttpResolver()

    def powertools_not_found(_error: Exception) -> PowertoolsResponse[str]:
        raise ValueError("broken")

    resolver.not_found(powertools_not_found)
    resolver.exception_handler(Exception)(
        lambda error: PowertoolsResponse(500, "application/json", f"any {type(error).__name__}")
    )
    # When a path no route takes is resolved
    event = http_event("GET", "/nowhere")
    mine = router.resolve(event)
    theirs = resolver.resolve(event, cast(Any, FakeLambdaContext()))
    # Then the failure is answered by the exception handler, as the resolver answers it
    assert (mine["statusCode"], mine["body"]) == (theirs["statusCode"], theirs["body"])
    assert (mine["statusCode"], mine["body"]) == (500, "any ValueError")


@pytest.mark.parametrize(
    "headers",
    [
        {"Idempotency-Key": "k-1", "X-CORRELATION-ID": "c-1"},
        {"Idempotency-Key": "k-1", "idempotency-key": "k-2"},
        {"idempotency-key": "k-2", "IDEMPOTENCY-KEY": "k-1", "if-match": '"3"'},
    ],
    ids=["any-case", "twice-lower-last", "twice-upper-last"],
)
def test_headers_are_read_in_any_case_as_powertools_read_them(headers: dict[str, str]) -> None:
    # Given an event whose header names are not lower-cased (a hand-built event; API Gateway lower-cases them)
    event = http_event("GET", "/look")
    event["headers"] = headers
    names = ("Idempotency-Key", "X-Correlation-Id", "If-Match", "idempotency-key")
    router, resolver = Router(content_type="application/json"), APIGatewayHttpResolver()
    seen: dict[str, list[str | None]] = {}

    def mine() -> Response:
        seen["mine"] = [router.current.header(name) for name in names]
        return Response(200, "")

    def theirs() -> PowertoolsResponse[str]:
        seen["theirs"] = [resolver.current_event.headers.get(name) for name in names]
        return PowertoolsResponse(200, "application/json", "")

    # When a route reads them
    router.route("GET", "/look")(mine)
    resolver.route("/look", "GET")(theirs)
    router.resolve(event)
    resolver.resolve(event, cast(Any, FakeLambdaContext()))
    # Then each is found whatever its case, the later of two spellings winning, as in the resolver
    assert seen["mine"] == seen["theirs"]


def test_a_route_registered_with_a_lower_case_method_is_routed_as_powertools_routes_it() -> None:
    router, resolver = Router(content_type="application/json"), APIGatewayHttpResolver()
    router.route("get", "/a")(lambda: Response(200, "a"))
    resolver.route("/a", "get")(lambda: PowertoolsResponse(200, "application/json", "a"))
    for method in ("GET", "get"):
        event = http_event(method, "/a")
        theirs = resolver.resolve(event, cast(Any, FakeLambdaContext()))
        assert router.resolve(event)["body"] == theirs["body"] == "a"
