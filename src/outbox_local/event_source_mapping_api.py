"""The local runtime's own answer to Lambda's `ListEventSourceMappings` and `GetEventSourceMapping`.

Why: the runtime never creates a moto event source mapping, because moto would then drain the stream (or
the queue) itself and invoke the function through Docker; the emulators own the template's mappings
(`outbox_local.stream_poller`, `outbox_local.queue_mapping`). moto's Lambda therefore knows none, and
`list_event_source_mappings` would answer [] to the operators' tools (the `outbox` CLI, the AWS CLI) that
check a mapping's state and last result. These two read calls are what operators use, so a WSGI layer in
front of moto (like the fault injector) answers them from the emulators' state, in the JSON shape AWS
returns. Every other request goes to moto untouched, creating, updating or deleting a mapping included.
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
from outbox_local.provisioning.context import MappingSpec, QueueMappingSpec
from outbox_local.queue_mapping import QueueMappingRunner
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


@dataclass(frozen=True)
class PublishedQueueMapping:
    """One SQS queue mapping of the template as this runtime start runs it."""

    spec: QueueMappingSpec
    runner: QueueMappingRunner | None
    """None when the template disables the mapping: the runtime does not run it."""
    last_modified: float


Published = PublishedMapping | PublishedQueueMapping


class EventSourceMappingApi:
    """Answers the two read calls from what the runtime published at start-up."""

    def __init__(self) -> None:
        self._mappings: tuple[Published, ...] = ()
        self._lock = threading.Lock()

    def publish(self, mappings: Sequence[Published]) -> None:
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


def configuration(mapping: Published) -> dict[str, Any]:
    """The `EventSourceMappingConfiguration` Lambda answers for a mapping (below: a DynamoDB stream's)."""
    if isinstance(mapping, PublishedQueueMapping):
        return queue_configuration(mapping)
    spec, settings = mapping.spec, mapping.spec.settings
    destination = settings.on_failure_destination_arn
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
        "FunctionResponseTypes": _response_types(settings.report_batch_item_failures),
        "EventSourceMappingArn": _mapping_arn(settings.function_arn, spec.uuid),
    }
    if spec.filter_patterns:
        answer["FilterCriteria"] = _filter_criteria(spec.filter_patterns)
    return answer


def queue_configuration(mapping: PublishedQueueMapping) -> dict[str, Any]:
    """What Lambda answers for an SQS queue mapping: no stream settings, and no `LastProcessingResult`
    ("This value will be null if an SQS queue is the event source"); its own StateTransitionReason."""
    spec, settings = mapping.spec, mapping.spec.settings
    answer: dict[str, Any] = {
        "UUID": spec.uuid,
        "BatchSize": settings.batch_size,
        "MaximumBatchingWindowInSeconds": round(settings.maximum_batching_window_s),
        "EventSourceArn": settings.queue_arn,
        "FunctionArn": settings.function_arn,
        "LastModified": mapping.last_modified,
        "State": "Enabled" if mapping.runner is not None else "Disabled",
        "StateTransitionReason": "USER_INITIATED",
        "FunctionResponseTypes": _response_types(settings.report_batch_item_failures),
        "EventSourceMappingArn": _mapping_arn(settings.function_arn, spec.uuid),
    }
    if spec.filter_patterns:
        answer["FilterCriteria"] = _filter_criteria(spec.filter_patterns)
    if spec.maximum_concurrency is not None:
        answer["ScalingConfig"] = {"MaximumConcurrency": spec.maximum_concurrency}
    return answer


def _mapping_arn(function_arn: str, mapping_uuid: str) -> str:
    _, partition, _, region, account, *_ = function_arn.split(":")
    return f"arn:{partition}:lambda:{region}:{account}:event-source-mapping:{mapping_uuid}"


def _response_types(report_batch_item_failures: bool) -> list[str]:
    return ["ReportBatchItemFailures"] if report_batch_item_failures else []


def _filter_criteria(patterns: Sequence[str]) -> dict[str, Any]:
    return {"Filters": [{"Pattern": pattern} for pattern in patterns]}


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
