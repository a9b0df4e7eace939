"""Every botocore call as an X-Ray subsegment, and the services called told which subsegment called them.

The two places the X-Ray SDK's own botocore patch wraps: `BaseClient._make_api_call` (every client, every
operation, retries included) opens a subsegment named after the service's endpoint prefix, in the `aws`
namespace, with the operation, the region, the request id, the HTTP status and the resources named (a
table, a topic, a queue: never an item or a message) and, when it fails, the AWS error code (not the
error's text, which may quote the request); `Endpoint.prepare_request` sets the request's
`X-Amzn-Trace-Id` to that subsegment, so SNS, EventBridge and the rest continue the trace from the call.
Without a sampled invocation both pass straight through.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from botocore.client import BaseClient
from botocore.endpoint import Endpoint
from botocore.exceptions import ClientError

from outbox.aws_errors import error_code

if TYPE_CHECKING:
    from outbox.xray import Recorder, Subsegment

TRACE_HTTP_HEADER = "X-Amzn-Trace-Id"

RESOURCE_PARAMETERS = {"TableName": "table_name", "TopicArn": "topic_arn", "QueueUrl": "queue_url"}
"""Request parameters that name a resource, recorded under these names (the X-Ray SDK's)."""


def instrument(recorder: Recorder) -> Callable[[], None]:
    """Wrap botocore for `recorder`; returns what restores botocore as it was."""
    make_api_call, prepare_request = BaseClient._make_api_call, Endpoint.prepare_request

    def traced_call(client: BaseClient, operation_name: str, api_params: dict[str, Any]) -> Any:
        subsegment = recorder.begin(client.meta.service_model.endpoint_prefix, namespace="aws")
        if subsegment is None:
            return make_api_call(client, operation_name, api_params)
        subsegment.aws = {"operation": operation_name, "region": client.meta.region_name}
        subsegment.aws |= _resources(api_params)
        try:
            response = make_api_call(client, operation_name, api_params)
        except ClientError as error:
            _answered(subsegment, error.response)
            subsegment.add_exception(error, remote=True, message=error_code(error))
            raise
        except Exception as error:
            subsegment.add_exception(error)
            raise
        else:
            _answered(subsegment, response)
            return response
        finally:
            recorder.end(subsegment)

    def traced_request(endpoint: Endpoint, request: Any) -> Any:
        subsegment = recorder.current()
        if subsegment is not None and subsegment.namespace == "aws":
            request.headers[TRACE_HTTP_HEADER] = subsegment.context.header_for(subsegment.id)
        return prepare_request(endpoint, request)

    BaseClient._make_api_call = traced_call
    Endpoint.prepare_request = traced_request

    def restore() -> None:
        BaseClient._make_api_call = make_api_call
        Endpoint.prepare_request = prepare_request

    return restore


def _resources(api_params: dict[str, Any]) -> dict[str, Any]:
    named = {field: api_params[name] for name, field in RESOURCE_PARAMETERS.items() if name in api_params}
    if isinstance(api_params.get("RequestItems"), dict):  # BatchGetItem, BatchWriteItem
        named["table_names"] = sorted(api_params["RequestItems"])
    return named


def _answered(subsegment: Subsegment, response: Any) -> None:
    metadata = (response.get("ResponseMetadata") if isinstance(response, dict) else None) or {}
    if metadata.get("RequestId"):
        subsegment.aws["request_id"] = metadata["RequestId"]
    subsegment.set_status(metadata.get("HTTPStatusCode"))
