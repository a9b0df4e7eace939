"""The local runtime's own answer to Lambda's `ListEventSourceMappings` and `GetEventSourceMapping`.

Why: the runtime never creates a moto event source mapping, because moto would then drain the stream
itself and invoke the function through Docker; the stream mapping emulator owns the template's mappings
(`outbox_local.stream_poller`). moto's Lambda therefore knows none, and `list_event_source_mappings` would
answer [] to the operators' tools (the `outbox` CLI, the AWS CLI) that check a mapping's state and last
result. These two read calls are what operators use, so a WSGI layer in front of moto (like the fault
injector) answers them from the emulator's state, in the JSON shape AWS returns. Every other request goes
to moto untouched, creating, updating or deleting a mapping included.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from outbox_local.faults import WsgiApp
from outbox_local.provisioning.context import MappingSpec
from outbox_local.stream_poller import NO_RECORDS_PROCESSED, StreamMappingRunner

_LIST_PATHS = {"/2015-03-31/event-source-mappings", "/2015-03-31/event-source-mappings/"}
_GET_PATH = re.compile(r"^/2015-03-31/event-source-mappings/([^/]+)/?$")
_MAX_ITEMS_PER_PAGE = 100  # "ListEventSourceMappings returns a maximum of 100 items in each response"
_NOT_FOUND_MESSAGE = "The resource you requested does not exist."
_INVALID_PAGE_MESSAGE = "Marker or MaxItems is not valid"


@dataclass(frozen=True)
class PublishedMapping:
    """One mapping of the template as this runtime start runs it."""

    spec: MappingSpec
    runner: StreamMappingRunner | None
    """None when the template disables the mapping: the runtime does not run it."""
    last_modified: float
    """Epoch seconds: when this runtime start created the mapping."""


class EventSourceMappingApi:
    """Answers the two read calls from what the runtime published at start-up."""

    def __init__(self) -> None:
        self._mappings: tuple[PublishedMapping, ...] = ()
        self._lock = threading.Lock()

    def publish(self, mappings: Sequence[PublishedMapping]) -> None:
        with self._lock:
            self._mappings = tuple(mappings)

    def clear(self) -> None:
        self.publish(())

    def configurations(self) -> list[dict[str, Any]]:
        """Every mapping, as `ListEventSourceMappings` lists it."""
        with self._lock:
            mappings = self._mappings
        return [configuration(mapping) for mapping in mappings]

    def wrap(self, app: WsgiApp) -> WsgiApp:
        def middleware(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            if environ.get("REQUEST_METHOD") == "GET":
                path = environ.get("PATH_INFO", "")
                if path in _LIST_PATHS:
                    return self._list(environ, start_response)
                found = _GET_PATH.match(path)
                if found:
                    return self._get(found.group(1), start_response)
            return app(environ, start_response)

        return middleware

    def _list(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        query = parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
        function = _single(query, "FunctionName")
        source = _single(query, "EventSourceArn")
        try:
            start = int(_single(query, "Marker") or 0)
            max_items = int(_single(query, "MaxItems") or _MAX_ITEMS_PER_PAGE)
        except ValueError:
            return _error(start_response, 400, "InvalidParameterValueException", _INVALID_PAGE_MESSAGE)
        matching = [
            mapping
            for mapping in self.configurations()
            if (function is None or _names_function(function, str(mapping["FunctionArn"])))
            and (source is None or mapping["EventSourceArn"] == source)
        ]
        if not 0 <= start <= len(matching) or max_items < 1:
            return _error(start_response, 400, "InvalidParameterValueException", _INVALID_PAGE_MESSAGE)
        end = start + min(max_items, _MAX_ITEMS_PER_PAGE)
        body: dict[str, Any] = {"EventSourceMappings": matching[start:end]}
        if end < len(matching):
            body["NextMarker"] = str(end)
        return _json(start_response, 200, body)

    def _get(self, mapping_uuid: str, start_response: Callable[..., Any]) -> Iterable[bytes]:
        for mapping in self.configurations():
            if mapping["UUID"] == mapping_uuid:
                return _json(start_response, 200, mapping)
        return _error(start_response, 404, "ResourceNotFoundException", _NOT_FOUND_MESSAGE)


def configuration(mapping: PublishedMapping) -> dict[str, Any]:
    """The `EventSourceMappingConfiguration` Lambda answers for a DynamoDB stream mapping."""
    spec, settings = mapping.spec, mapping.spec.settings
    _, partition, _, region, account, *_ = settings.function_arn.split(":")
    destination = settings.on_failure_destination_arn
    mapping_arn = f"arn:{partition}:lambda:{region}:{account}:event-source-mapping:{spec.uuid}"
    answer: dict[str, Any] = {
        "UUID": spec.uuid,
        "StartingPosition": spec.starting_position,
        "BatchSize": settings.batch_size,
        "MaximumBatchingWindowInSeconds": round(settings.maximum_batching_window_s),
        "ParallelizationFactor": spec.parallelization_factor,
        "EventSourceArn": settings.stream_arn,
        "FunctionArn": settings.function_arn,
        "LastModified": mapping.last_modified,
        "LastProcessingResult": (
            mapping.runner.last_processing_result if mapping.runner is not None else NO_RECORDS_PROCESSED
        ),
        "State": "Enabled" if mapping.runner is not None else "Disabled",
        "StateTransitionReason": "User action",
        "DestinationConfig": {"OnFailure": {"Destination": destination} if destination else {}},
        "MaximumRecordAgeInSeconds": settings.maximum_record_age_s,
        "BisectBatchOnFunctionError": settings.bisect_batch_on_function_error,
        "MaximumRetryAttempts": settings.maximum_retry_attempts,
        "TumblingWindowInSeconds": 0,  # the provisioner refuses tumbling windows
        "FunctionResponseTypes": ["ReportBatchItemFailures"] if settings.report_batch_item_failures else [],
        "EventSourceMappingArn": mapping_arn,
    }
    if spec.filter_patterns:
        answer["FilterCriteria"] = {"Filters": [{"Pattern": pattern} for pattern in spec.filter_patterns]}
    return answer


def _names_function(given: str, function_arn: str) -> bool:
    """Whether `FunctionName` as Lambda takes it (name, ARN, partial ARN) names this function."""
    parts = function_arn.split(":")
    return given in {function_arn, ":".join(parts[4:]), parts[-1]}


def _single(query: dict[str, list[str]], name: str) -> str | None:
    values = query.get(name)
    return values[-1] if values else None


def _json(start_response: Callable[..., Any], status: int, body: object) -> Iterable[bytes]:
    data = json.dumps(body).encode()
    start_response(
        f"{status} {'OK' if status == 200 else 'Error'}",
        [
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(data))),
            ("x-amzn-RequestId", str(uuid.uuid4())),
        ],
    )
    return [data]


def _error(start_response: Callable[..., Any], status: int, code: str, message: str) -> Iterable[bytes]:
    # Lambda's error document: the code in x-amzn-ErrorType, the body {"Type": "User", "Message": ...}.
    data = json.dumps({"Type": "User", "Message": message}).encode()
    start_response(
        f"{status} Error",
        [
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(data))),
            ("x-amzn-ErrorType", code),
            ("x-amzn-RequestId", str(uuid.uuid4())),
        ],
    )
    return [data]
