"""Wire-level fault injection: the moto server answers chosen operations with a real AWS error response.

The code under test sees exactly what it would see from AWS during an outage (an HTTP error with the
service's error document, which botocore turns into a `ClientError`), so its real retry and classification
logic runs. Requests are identified by the SigV4 signing scope (service) and the operation name from the
`X-Amz-Target` header (JSON protocols) or the `Action` form field (query protocols such as SNS).
"""

from __future__ import annotations

import io
import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
_SCOPE = re.compile(r"Credential=[^/]+/[^/]+/[^/]+/([^/]+)/aws4_request")


ANY_OPERATION = "*"
INTERNAL_USER_AGENT = "outbox-local-runtime"
"""In the user agent of the runtime's own clients (what AWS itself does: mapping polls, on-failure sends,
provisioning, metrics): never faulted, so an outage reaches the functions' calls only."""


@dataclass
class FaultRule:
    service: str
    operation: str
    """An operation name, or `*` for every operation of the service."""
    error_code: str
    http_status: int
    message: str
    remaining: int | None
    injected: int = 0
    until: float | None = None
    """The injector's clock (time.monotonic) after which the rule no longer fires (None: until disarmed)."""

    def active(self, now: float) -> bool:
        return self.remaining != 0 and (self.until is None or now < self.until)

    def describe(self, now: float) -> dict[str, object]:
        """What `outbox local faults` shows of the rule."""
        return {
            "service": self.service,
            "operation": self.operation,
            "error_code": self.error_code,
            "http_status": self.http_status,
            "remaining": self.remaining,
            "seconds_left": None if self.until is None else max(0.0, round(self.until - now, 1)),
            "injected": self.injected,
            "active": self.active(now),
        }


class FaultInjector:
    """Armed rules fail matching requests until disarmed (or for a number of requests)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._rules: list[FaultRule] = []
        self._lock = threading.Lock()
        self._injected = threading.Condition(self._lock)

    def arm(
        self,
        service: str,
        operation: str,
        *,
        error_code: str = "InternalError",
        http_status: int = 500,
        message: str = "Injected fault: the service is unavailable",
        times: int | None = None,
        duration_s: float | None = None,
    ) -> FaultRule:
        until = None if duration_s is None else self._clock() + duration_s
        rule = FaultRule(service, operation, error_code, http_status, message, times, until=until)
        with self._lock:
            self._rules.append(rule)
        return rule

    def disarm(self, rule: FaultRule | None = None) -> None:
        """Remove one rule, or every rule."""
        with self._lock:
            self._rules = [r for r in self._rules if rule is not None and r is not rule]

    def rules(self) -> list[dict[str, object]]:
        now = self._clock()
        with self._lock:
            return [rule.describe(now) for rule in self._rules]

    def wait_for_injections(self, rule: FaultRule, count: int, timeout_s: float) -> bool:
        """Block until `rule` has failed `count` requests (True) or the timeout passed (False)."""
        with self._injected:
            return self._injected.wait_for(lambda: rule.injected >= count, timeout_s)

    def _match(self, service: str, operation: str) -> FaultRule | None:
        now = self._clock()
        with self._lock:
            for rule in self._rules:
                matches = rule.service == service and rule.operation in (operation, ANY_OPERATION)
                if matches and rule.active(now):
                    rule.injected += 1
                    if rule.remaining is not None:
                        rule.remaining -= 1
                    self._injected.notify_all()
                    return rule
        return None

    def wrap(self, app: WsgiApp) -> WsgiApp:
        def middleware(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            with self._lock:
                armed = bool(self._rules)
            if armed and INTERNAL_USER_AGENT not in environ.get("HTTP_USER_AGENT", ""):
                service, operation = operation_of(environ)
                rule = self._match(service, operation)
                if rule is not None:
                    return _error_response(rule, environ, start_response)
            return app(environ, start_response)

        return middleware


def operation_of(environ: dict[str, Any]) -> tuple[str, str]:
    """(signing service, API operation) of a request to the endpoint; the body stays readable."""
    scope = _SCOPE.search(environ.get("HTTP_AUTHORIZATION", ""))
    service = scope.group(1) if scope else ""
    target = environ.get("HTTP_X_AMZ_TARGET")
    if target:
        return service, target.rsplit(".", 1)[-1]
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length) if length else b""
    environ["wsgi.input"] = io.BytesIO(body)  # the wrapped app must still be able to read the request
    action = parse_qs(body.decode("utf-8", "replace")).get("Action", [""])[0]
    return service, action


def _error_response(
    rule: FaultRule, environ: dict[str, Any], start_response: Callable[..., Any]
) -> Iterable[bytes]:
    request_id = str(uuid.uuid4())
    status = f"{rule.http_status} Injected"
    if environ.get("HTTP_X_AMZ_TARGET"):
        body = json.dumps({"__type": rule.error_code, "message": rule.message}).encode()
        headers = [
            ("Content-Type", "application/x-amz-json-1.1"),
            ("x-amzn-ErrorType", rule.error_code),
            ("x-amzn-RequestId", request_id),
        ]
    else:
        kind = "Sender" if rule.http_status < 500 else "Receiver"
        body = (
            "<ErrorResponse><Error>"
            f"<Type>{kind}</Type><Code>{rule.error_code}</Code><Message>{rule.message}</Message>"
            f"</Error><RequestId>{request_id}</RequestId></ErrorResponse>"
        ).encode()
        headers = [("Content-Type", "text/xml"), ("x-amzn-RequestId", request_id)]
    start_response(status, [*headers, ("Content-Length", str(len(body)))])
    return [body]
