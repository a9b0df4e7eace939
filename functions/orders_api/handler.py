"""Orders API handler: thin HTTP glue around `OrderService` (routes in `orders_api.http`).

Routes (API Gateway HTTP API, payload format 2.0); the contract is documented in docs/api.md:
  POST /orders                 place an order          (201; header Idempotency-Key optional)
  GET  /orders/{id}            read an order           (200 | 404)
  POST /orders/{id}/confirm    PLACED -> CONFIRMED     (200 | 409 | 412; header If-Match optional)
  POST /orders/{id}/cancel     PLACED|CONFIRMED -> CANCELLED (200 | 409 | 412; header If-Match optional)

Every answer that carries an order carries its `ETag` (its version, quoted). A confirm or cancel with
`If-Match` naming that version is one DynamoDB call, and answers with what it knows of the order (its id,
status, version, updated_at), not the fields it did not read.

Importing this module builds no boto3 client and no router but its own (`http` says why): the service
(and its one DynamoDB client) is built on the first invocation and reused by every later one. Tests swap it
with `set_service` and reset it with `set_service(None)`.
"""

from __future__ import annotations

import binascii
import json
import os
import re
import traceback
from decimal import Decimal
from typing import Any, TypeVar

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

import outbox_tracing as tracing
from orders.commands import IF_MATCH_HEADER, PlaceOrder, TransitionOrder, entity_tag
from orders.errors import (
    ConcurrentModificationError,
    IdempotencyConflictError,
    InvalidTransitionError,
    OrderNotFoundError,
    OrderStoreUnavailableError,
    OrderValidationError,
    PreconditionFailedError,
)
from orders.event_schemas import load_schemas
from orders.model import Command, Order, StatusChange
from orders.repository import DynamoDBOrderRepository
from orders.service import CommandResult, OrderService
from orders_api.config import OrdersApiConfig
from orders_api.http import Response, Router
from outbox.aws import client
from outbox.regions import writer_origin
from outbox.trace_context import TRACEPARENT, TraceContext, active_trace_context, is_traceparent

MAX_BODY_BYTES = 16 * 1024
IDEMPOTENCY_HEADER = "Idempotency-Key"
CORRELATION_HEADER = "X-Correlation-Id"
REPLAYED_HEADER = "Idempotent-Replayed"
ETAG_HEADER = "ETag"
_CORRELATION_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_CORRELATION_CONTEXT_KEY = "correlation_id"

logger = Logger()
# The outbox library's tracer, as the publisher's: X-Ray subsegments for the routes and each botocore call.
tracer = tracing.tracer()
metrics = Metrics()
app = Router(content_type="application/json")

_service: OrderService | None = None


def get_service() -> OrderService:
    """The service, built once per execution environment on first use (config, client, adapter)."""
    global _service  # noqa: PLW0603 - the per-process cache is the point
    if _service is None:
        config = OrdersApiConfig.from_env(os.environ)
        repository = DynamoDBOrderRepository(
            client("dynamodb"),
            orders_table=config.orders_table_name,
            outbox_table=config.outbox_table_name,
            trace_context=_trace_context,
            schemas=load_schemas(),
            origin=writer_origin(os.environ),  # OUTBOX_ORIGIN, set when the outbox spans regions
        )
        _service = OrderService(repository)
    return _service


def set_service(service: OrderService | None) -> None:
    """Injection seam: use `service` from now on; None drops the cache (rebuilt on next use)."""
    global _service  # noqa: PLW0603
    _service = service


# --- Routes -----------------------------------------------------------------------------------


@app.route("POST", "/orders")
@tracer.capture_method(capture_response=False)
def place_order() -> Response:
    request = PlaceOrder.from_json(_json_body(required=True))
    result = get_service().place(
        request, idempotency_key=_idempotency_key(), correlation_id=_correlation_id()
    )
    _count("OrdersPlaced", result)
    return _result_response(201, result)


@app.route("GET", "/orders/<order_id>")
@tracer.capture_method(capture_response=False)
def get_order(order_id: str) -> Response:
    order = get_service().get(order_id)
    metrics.add_metric(name="OrdersRead", unit=MetricUnit.Count, value=1)
    return _json_response(200, order_view(order), etag=entity_tag(order.version))


@app.route("POST", "/orders/<order_id>/confirm")
@tracer.capture_method(capture_response=False)
def confirm_order(order_id: str) -> Response:
    return _transition(Command.CONFIRM, order_id, "OrdersConfirmed")


@app.route("POST", "/orders/<order_id>/cancel")
@tracer.capture_method(capture_response=False)
def cancel_order(order_id: str) -> Response:
    return _transition(Command.CANCEL, order_id, "OrdersCancelled")


def _transition(command: Command, order_id: str, metric: str) -> Response:
    request = TransitionOrder.from_json(
        command, order_id, _json_body(required=False), if_match=app.current.header(IF_MATCH_HEADER)
    )
    result = get_service().transition(
        request, idempotency_key=_idempotency_key(), correlation_id=_correlation_id()
    )
    _count(metric, result)
    return _result_response(200, result)


# --- Errors: one typed error, one status. Bodies are {"error": {"code", "message", "field"}}. ---

_E = TypeVar("_E", bound=Exception)


def _error_handler(exc_type: type[_E], status: int, code: str) -> None:
    def handle(error: _E) -> Response:
        field = getattr(error, "field", None)
        # The error type and code only: messages may carry ids, never request bodies; a field name that came
        # from the request (an unknown key) is not logged either.
        logged = "(a field the request named)" if getattr(error, "field_is_input", False) else field
        logger.info("request rejected", extra={"error_code": code, "status": status, "field": logged})
        metrics.add_metric(name="RequestsRejected", unit=MetricUnit.Count, value=1)
        return error_response(status, code, str(error), field=field)

    app.on_error(exc_type, handle)


_error_handler(OrderValidationError, 400, "validation_error")
_error_handler(OrderNotFoundError, 404, "order_not_found")
_error_handler(InvalidTransitionError, 409, "invalid_transition")
_error_handler(ConcurrentModificationError, 409, "version_conflict")
_error_handler(IdempotencyConflictError, 409, "idempotency_key_reused")
_error_handler(PreconditionFailedError, 412, "precondition_failed")


def _unavailable(error: OrderStoreUnavailableError) -> Response:
    logger.warning("order store unavailable", extra={"error_type": type(error.__cause__).__name__})
    metrics.add_metric(name="RequestsFailed", unit=MetricUnit.Count, value=1)
    response = error_response(503, "service_unavailable", "the service is busy; retry later")
    response.headers["Retry-After"] = "1"
    return response


def _unexpected(error: Exception) -> Response:
    # Anything else is a bug or an unexpected AWS failure: log where it happened (the stack's frames) and its
    # type, never its message, which may quote the request (Python's own `int("...")` quotes its input);
    # answer a generic 500 that leaks nothing about the internals.
    stack = traceback.format_tb(error.__traceback__)
    logger.error("unhandled error", extra={"error_type": type(error).__name__, "stack": stack})
    metrics.add_metric(name="RequestsFailed", unit=MetricUnit.Count, value=1)
    return error_response(500, "internal_error", "internal error")


def _route_not_found() -> Response:
    metrics.add_metric(name="RequestsRejected", unit=MetricUnit.Count, value=1)
    return error_response(404, "route_not_found", "no such route")


app.on_error(OrderStoreUnavailableError, _unavailable)
app.on_error(Exception, _unexpected)
app.on_not_found(_route_not_found)


# --- Entry point ------------------------------------------------------------------------------


@logger.inject_lambda_context(log_event=False)  # never log events: bodies hold customer data
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics(capture_cold_start_metric=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event)


# --- Helpers ----------------------------------------------------------------------------------


def order_view(order: Order | StatusChange) -> dict[str, Any]:
    """The order as the API shows it (`last_seq` is an outbox detail and stays internal). A status change made
    without reading the order (If-Match) shows what the command knows: a subset of the order's fields."""
    if isinstance(order, StatusChange):
        return {
            "order_id": order.order_id,
            "status": order.status.value,
            "version": order.version,
            "updated_at": order.updated_at,
        }
    view = order.to_dict()
    del view["last_seq"]
    return view


def error_response(status: int, code: str, message: str, *, field: str | None = None) -> Response:
    error: dict[str, Any] = {"code": code, "message": message}
    if field is not None:
        error["field"] = field
    return _json_response(status, {"error": error})


def _result_response(status: int, result: CommandResult) -> Response:
    response = _json_response(
        status,
        {**order_view(result.order), "event_id": result.event_id},
        etag=entity_tag(result.order.version),
    )
    if result.replayed:
        response.headers[REPLAYED_HEADER] = "true"
    return response


def _json_response(status: int, body: dict[str, Any], *, etag: str | None = None) -> Response:
    headers: dict[str, str] = {}
    if etag is not None:
        headers[ETAG_HEADER] = etag
    correlation_id = _current_correlation_id()
    if correlation_id is not None:
        headers[CORRELATION_HEADER] = correlation_id
    return Response(status, _RESPONSE_ENCODER.encode(body), headers)


def _count(metric: str, result: CommandResult) -> None:
    metrics.add_metric(
        name="IdempotentReplays" if result.replayed else metric, unit=MetricUnit.Count, value=1
    )


def _json_body(*, required: bool) -> object:
    try:
        raw = app.current.decoded_body()
    except (UnicodeDecodeError, binascii.Error):
        # A body sent as binary (base64) that is not UTF-8 text cannot be JSON.
        raise OrderValidationError("is not UTF-8 text", field="body") from None
    if len(raw.encode()) > MAX_BODY_BYTES:
        raise OrderValidationError(f"must be at most {MAX_BODY_BYTES} bytes", field="body")
    if not raw.strip():
        if required:
            raise OrderValidationError("is required", field="body")
        return None
    try:
        # Decimals, not floats, and no NaN/Infinity or duplicate keys: what is hashed for
        # idempotency and stored must be exactly what the client meant.
        return _BODY_DECODER.decode(raw)
    except (ValueError, RecursionError):
        raise OrderValidationError("is not valid JSON", field="body") from None


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError("duplicate key")
        result[key] = value
    return result


# Built once: `json.loads` and `json.dumps` with options build a new decoder or encoder per call.
_BODY_DECODER = json.JSONDecoder(
    parse_float=Decimal, parse_constant=_reject_constant, object_pairs_hook=_unique_keys
)
_RESPONSE_ENCODER = json.JSONEncoder(separators=(",", ":"))


def _idempotency_key() -> str | None:
    value = app.current.header(IDEMPOTENCY_HEADER)
    return None if value is None else value.strip()


def _trace_context() -> TraceContext:
    """What the order's event is saved with: the invocation's X-Ray header, and the caller's W3C `traceparent`
    header when it sent a well-formed one (trace context is advisory: a malformed header is ignored, never a
    400)."""
    active = active_trace_context()
    header = app.current.header(TRACEPARENT)
    return active._replace(traceparent=header) if header is not None and is_traceparent(header) else active


def _correlation_id() -> str:
    correlation_id = _current_correlation_id()
    if correlation_id is None:  # pragma: no cover - API Gateway always sends a request id
        raise OrderValidationError("request has no id", field=CORRELATION_HEADER)
    return correlation_id


def _current_correlation_id() -> str | None:
    """A valid X-Correlation-Id header from the caller, else API Gateway's request id.

    Worked out once per request and kept in the request's context: a command needs it for its event and again
    for its response."""
    context = app.current.context
    if _CORRELATION_CONTEXT_KEY in context:
        known: str | None = context[_CORRELATION_CONTEXT_KEY]
        return known
    header = app.current.header(CORRELATION_HEADER)
    if header is not None and _CORRELATION_ID.fullmatch(header):
        correlation_id: str | None = header
    else:
        correlation_id = app.current.request_id or None
    if correlation_id is not None:
        logger.set_correlation_id(correlation_id)
    context[_CORRELATION_CONTEXT_KEY] = correlation_id
    return correlation_id
