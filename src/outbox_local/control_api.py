"""The running runtime's own controls, on its AWS endpoint under `/_outbox/`: what `outbox local fault`,
`outbox local faults` and `outbox local mappings` call while `outbox local up` runs.

- `GET /_outbox/faults`: the armed rules; `POST /_outbox/faults` arms one (JSON: service, operation (`*` for
  every operation), error_code, http_status, times, duration_s); `DELETE /_outbox/faults` disarms them all.
- `GET /_outbox/mappings`: each event source mapping's state, what Lambda's API does not say locally or at
  all: backlog, iterator age, invocations, failures, discarded records.
- `GET /_outbox/runtime`: what the runtime runs as (region, stack name): the `outbox` commands given this
  endpoint and no region ask it (`outbox_ops.clients`).
- `GET /_outbox/trace/<event_id>`: one event's trace, request -> row -> publish -> consumer
  (`outbox_local.trace_journal`): what `outbox trace` prints.
- `GET /_outbox/regions`: the regions the runtime holds something in, those cut off, the replication's queued
  writes; `POST /_outbox/regions/cut` and `POST /_outbox/regions/restore` (JSON: region) cut a region off and
  bring it back (`LocalRuntime.cut_region`); `POST /_outbox/regions/lag` (JSON: seconds) sets the replication
  lag (`Replicator.set_lag`): what `outbox local region` and `outbox local regions` call.

Plain JSON over the loopback endpoint, unsigned: like moto's own `/moto-api/`, it is a local developer tool.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from outbox_local.faults import FaultInjector, WsgiApp
from outbox_local.queue_mapping import QueueMappingRunner
from outbox_local.stream_poller import StreamMappingRunner

PREFIX = "/_outbox/"
MappingReport = Callable[[], list[dict[str, Any]]]
RuntimeReport = Callable[[], dict[str, Any]]
TraceReport = Callable[[str], dict[str, Any] | None]
_ARM_FIELDS = {"service", "operation", "error_code", "http_status", "times", "duration_s", "message"}
_MAX_TIMES = 2**31 - 1
_MAX_S = 36_500 * 86_400
_MAX_LAG_S = 300.0
_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-\d{1,2}")


class RegionControl(Protocol):
    """What the regions' routes act on (`region_cuts.RegionCuts`)."""

    def cut_region(self, region: str) -> None: ...

    def restore_region(self, region: str) -> None: ...

    def region_report(self) -> dict[str, Any]: ...

    def set_replication_lag(self, seconds: float) -> None: ...


class ControlApi:
    def __init__(
        self,
        faults: FaultInjector,
        mappings: MappingReport,
        runtime: RuntimeReport = dict,
        trace: TraceReport = lambda _event_id: None,
        regions: RegionControl | None = None,
    ) -> None:
        self._regions = regions
        self._faults = faults
        self._mappings = mappings
        self._runtime = runtime
        self._trace = trace

    def wrap(self, app: WsgiApp) -> WsgiApp:
        def middleware(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            path = environ.get("PATH_INFO", "")
            if not path.startswith(PREFIX):
                return app(environ, start_response)
            return self._route(path, environ, start_response)

        return middleware

    def _route(
        self, path: str, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD", "GET")
        if path == f"{PREFIX}faults":
            return self._faults_route(method, environ, start_response)
        if path == f"{PREFIX}mappings" and method == "GET":
            return _json(start_response, 200, {"mappings": self._mappings()})
        if path == f"{PREFIX}runtime" and method == "GET":
            return _json(start_response, 200, self._runtime())
        if path.startswith(f"{PREFIX}regions") and self._regions is not None:
            return self._regions_route(self._regions, method, path, environ, start_response)
        if path.startswith(f"{PREFIX}trace/") and method == "GET":
            return self._trace_route(path.removeprefix(f"{PREFIX}trace/"), start_response)
        return _json(start_response, 404, {"error": f"no {method} {path} here"})

    def _trace_route(self, event_id: str, start_response: Callable[..., Any]) -> Iterable[bytes]:
        chain = self._trace(event_id)
        if chain is None:
            return _json(start_response, 404, {"error": f"the runtime has seen no event {event_id}"})
        return _json(start_response, 200, chain)

    def _regions_route(
        self,
        regions: RegionControl,
        method: str,
        path: str,
        environ: dict[str, Any],
        start_response: Callable[..., Any],
    ) -> Iterable[bytes]:
        action = path.removeprefix(f"{PREFIX}regions")
        if action == "" and method == "GET":
            return _json(start_response, 200, regions.region_report())
        if action not in {"/cut", "/restore", "/lag"} or method != "POST":
            return _json(start_response, 404, {"error": f"no {method} {path} here"})
        if action == "/lag":
            try:
                regions.set_replication_lag(_lag_request(environ))
            except ValueError as error:
                return _json(start_response, 400, {"error": str(error)})
            return _json(start_response, 200, regions.region_report())
        try:
            region = _region_request(environ)
        except ValueError as error:
            return _json(start_response, 400, {"error": str(error)})
        (regions.cut_region if action == "/cut" else regions.restore_region)(region)
        return _json(start_response, 200, regions.region_report())

    def _faults_route(
        self, method: str, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        if method == "GET":
            return _json(start_response, 200, {"faults": self._faults.rules()})
        if method == "DELETE":
            self._faults.disarm()
            return _json(start_response, 200, {"faults": []})
        if method != "POST":
            return _json(start_response, 405, {"error": f"{method} is not allowed here"})
        try:
            request = _arm_request(environ)
        except ValueError as error:
            return _json(start_response, 400, {"error": str(error)})
        self._faults.arm(**request)
        return _json(start_response, 201, {"faults": self._faults.rules()})


def mapping_report(
    mappings: Sequence[StreamMappingRunner], queue_mappings: Sequence[QueueMappingRunner]
) -> list[dict[str, Any]]:
    """Each running event source mapping's state, for `outbox local mappings`."""
    report: list[dict[str, Any]] = []
    for mapping in mappings:
        stats = mapping.stats()
        report.append(
            {
                "name": stats.name,
                "kind": "stream",
                "function": mapping.settings.function_arn.rsplit(":", 1)[-1],
                "source": mapping.settings.stream_arn,
                "last_processing_result": stats.last_processing_result,
                "backlog": stats.backlog,
                "iterator_age_s": round(stats.iterator_age_s, 1),
                "invocations": stats.invocations,
                "failed_invocations": stats.failed_invocations,
                "discarded_records": stats.discarded_records,
            }
        )
    for queue_mapping in queue_mappings:
        queue_stats = queue_mapping.stats()
        report.append(
            {
                "name": queue_stats.name,
                "kind": "queue",
                "function": queue_mapping.settings.function_arn.rsplit(":", 1)[-1],
                "source": queue_mapping.settings.queue_arn,
                "backlog": queue_stats.held,
                "invocations": queue_stats.invocations,
                "failed_invocations": queue_stats.failed_invocations,
                "partial_failures": queue_stats.partial_failures,
                "deleted_messages": queue_stats.deleted_messages,
            }
        )
    return report


def _arm_request(environ: dict[str, Any]) -> dict[str, Any]:
    length = int(environ.get("CONTENT_LENGTH") or 0)
    try:
        body = json.loads(environ["wsgi.input"].read(length) or b"{}")
    except ValueError:
        raise ValueError("the body is not JSON") from None
    if not isinstance(body, dict):
        raise ValueError("the body is not a JSON object")
    unknown = set(body) - _ARM_FIELDS
    if unknown:
        raise ValueError(f"unknown fields {sorted(unknown)}")
    if not isinstance(body.get("service"), str) or not isinstance(body.get("operation"), str):
        raise ValueError("service and operation are required")
    for name, kind in (("error_code", str), ("message", str)):
        if name in body and not isinstance(body[name], kind):
            raise ValueError(f"{name} must be text")
    # The bounds `outbox local fault` checks (outbox_cli.arguments), for a caller that posts JSON itself.
    for name, low, high in (("http_status", 400, 599), ("times", 1, _MAX_TIMES)):
        value = body.get(name, low)
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise ValueError(f"{name} must be a whole number from {low} to {high}")
    duration = body.get("duration_s", 1)
    # json.loads reads 1e400 as inf and NaN as nan: neither is a duration.
    if not isinstance(duration, int | float) or isinstance(duration, bool) or not 0 < duration <= _MAX_S:
        raise ValueError(f"duration_s must be a number above 0 and at most {_MAX_S}")
    return body


def _region_request(environ: dict[str, Any]) -> str:
    length = int(environ.get("CONTENT_LENGTH") or 0)
    try:
        body = json.loads(environ["wsgi.input"].read(length) or b"{}")
    except ValueError:
        raise ValueError("the body is not JSON") from None
    region = body.get("region") if isinstance(body, dict) else None
    if not isinstance(region, str) or not _REGION.fullmatch(region):
        raise ValueError('the body must name a region: {"region": "us-west-2"}')
    return region


def _lag_request(environ: dict[str, Any]) -> float:
    length = int(environ.get("CONTENT_LENGTH") or 0)
    try:
        body = json.loads(environ["wsgi.input"].read(length) or b"{}")
    except ValueError:
        raise ValueError("the body is not JSON") from None
    seconds = body.get("seconds") if isinstance(body, dict) else None
    # The bounds `outbox local up --replication-lag` checks (outbox_cli.arguments); NaN fails both.
    if not isinstance(seconds, int | float) or isinstance(seconds, bool) or not 0 <= seconds <= _MAX_LAG_S:
        raise ValueError(f'the body must give seconds from 0 to {_MAX_LAG_S:g}: {{"seconds": 5}}')
    return float(seconds)


def _json(start_response: Callable[..., Any], status: int, body: object) -> Iterable[bytes]:
    text = json.dumps(body).encode()
    reason = {200: "OK", 201: "Created", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}
    start_response(
        f"{status} {reason[status]}",
        [("Content-Type", "application/json"), ("Content-Length", str(len(text)))],
    )
    return [text]
