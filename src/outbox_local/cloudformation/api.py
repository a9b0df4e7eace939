"""The runtime's CloudFormation endpoint: a WSGI layer in front of moto that answers every request signed
for `cloudformation` (SigV4 credential scope) from the runtime's stacks (`CloudFormationService`), in the
query protocol the CDK CLI and boto3 speak (`outbox_local.cloudformation.wire`). moto's own CloudFormation
is never reached: it would create resources its own way (`outbox_local.provisioning`'s docstring says why).

The actions are those the CDK CLI calls for `cdk bootstrap`, `cdk deploy` (change sets, with
`--method=direct` CreateStack/UpdateStack too) and `cdk destroy`, plus what tools read a stack with
(DescribeStackResources, ListStackResources, GetTemplateSummary, ListExports). Any other action is answered
with an error naming it, never with moto's answer.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from typing import Any

from outbox_local.cloudformation import render, wire
from outbox_local.cloudformation.host import CloudFormationError, validation_error
from outbox_local.cloudformation.records import ChangeSet, StackRecord, described_parameters
from outbox_local.cloudformation.service import CloudFormationService
from outbox_local.cloudformation.template_text import parse_body
from outbox_local.errors import TemplateError
from outbox_local.faults import WsgiApp

Result = dict[str, Any] | None


class CloudFormationApi:
    def __init__(self, service: CloudFormationService) -> None:
        self.service = service
        self._actions: dict[str, Callable[[wire.Request], Result]] = {
            "DescribeStacks": self._describe_stacks,
            "ListStacks": self._list_stacks,
            "CreateChangeSet": self._create_change_set,
            "DescribeChangeSet": self._describe_change_set,
            "ExecuteChangeSet": self._execute_change_set,
            "DeleteChangeSet": self._delete_change_set,
            "ListChangeSets": self._list_change_sets,
            "CreateStack": self._create_stack,
            "UpdateStack": self._update_stack,
            "DeleteStack": self._delete_stack,
            "DescribeStackEvents": self._describe_stack_events,
            "GetTemplate": self._get_template,
            "GetTemplateSummary": self._get_template_summary,
            "ValidateTemplate": self._validate_template,
            "DescribeStackResources": self._describe_stack_resources,
            "DescribeStackResource": self._describe_stack_resource,
            "ListStackResources": self._list_stack_resources,
            "ListExports": self._list_exports,
        }

    def wrap(self, app: WsgiApp) -> WsgiApp:
        def wrapped(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            scope = wire.signed_for(environ.get("HTTP_AUTHORIZATION", ""))
            if scope is None or scope[1] != "cloudformation" or environ.get("REQUEST_METHOD") != "POST":
                return app(environ, start_response)
            length = int(environ.get("CONTENT_LENGTH") or 0)
            status, body = self.handle(wire.Request(environ["wsgi.input"].read(length), region=scope[0]))
            start_response(status, [("Content-Type", "text/xml"), ("Content-Length", str(len(body)))])
            return [body]

        return wrapped

    def handle(self, request: wire.Request) -> tuple[str, bytes]:
        action = self._actions.get(request.action)
        if action is None:
            message = (
                f"the local runtime's CloudFormation does not implement {request.action or 'this request'}"
            )
            return "400 Bad Request", wire.error_response("InvalidAction", message)
        try:
            return "200 OK", wire.response(request.action, action(request))
        except CloudFormationError as error:
            return "400 Bad Request", wire.error_response(error.code, error.message)

    # --- stacks ----------------------------------------------------------------------------------------

    def _describe_stacks(self, request: wire.Request) -> Result:
        name = request.get("StackName")
        records = (
            [self.service.stack(name, deleted_too=True, region=request.region)]
            if name
            else self.service.stacks(request.region)
        )
        return {"Stacks": [self._stack(record) for record in records]}

    def _stack(self, record: StackRecord) -> dict[str, Any]:
        stack: dict[str, Any] = {
            "StackId": record.stack_id,
            "StackName": record.name,
            "Description": record.description,
            "Parameters": described_parameters(record.parameters),
            "CreationTime": wire.timestamp(record.created_at),
            "LastUpdatedTime": wire.timestamp(record.updated_at) if record.updated_at else None,
            "DeletionTime": wire.timestamp(record.deleted_at) if record.deleted_at else None,
            "StackStatus": record.status,
            "StackStatusReason": record.status_reason,
            "DisableRollback": False,
            "Capabilities": list(record.capabilities) or None,
            "Outputs": [
                {
                    "OutputKey": output.key,
                    "OutputValue": output.value,
                    "Description": output.description,
                    "ExportName": output.export_name,
                }
                for output in self.service.outputs(record)
            ]
            or None,
            "Tags": [{"Key": key, "Value": value} for key, value in record.tags] or None,
            "EnableTerminationProtection": False,
            "DriftInformation": {"StackDriftStatus": "NOT_CHECKED"},
        }
        return stack

    def _list_stacks(self, request: wire.Request) -> Result:
        wanted = set(request.members("StackStatusFilter"))
        summaries = [
            {
                "StackId": record.stack_id,
                "StackName": record.name,
                "TemplateDescription": record.description,
                "CreationTime": wire.timestamp(record.created_at),
                "LastUpdatedTime": wire.timestamp(record.updated_at) if record.updated_at else None,
                "DeletionTime": wire.timestamp(record.deleted_at) if record.deleted_at else None,
                "StackStatus": record.status,
                "StackStatusReason": record.status_reason,
            }
            for record in [*self.service.stacks(request.region), *self.service.deleted_in(request.region)]
            if not wanted or record.status in wanted
        ]
        return {"StackSummaries": summaries}

    def _delete_stack(self, request: wire.Request) -> Result:
        self.service.delete_stack(_required(request, "StackName"), request.region)
        return None

    def _describe_stack_events(self, request: wire.Request) -> Result:
        record = self.service.stack(_required(request, "StackName"), deleted_too=True, region=request.region)
        return {"StackEvents": [render.event(event) for event in reversed(record.events)]}

    def _get_template(self, request: wire.Request) -> Result:
        record = self.service.stack(_required(request, "StackName"), deleted_too=True, region=request.region)
        text = record.template_text
        if request.get("ChangeSetName"):
            text = self.service.change_set(str(request.get("ChangeSetName")), record.name, request.region)[
                1
            ].template_text
        return {"TemplateBody": text, "StagesAvailable": ["Original", "Processed"]}

    def _get_template_summary(self, request: wire.Request) -> Result:
        body = self._template_body(request, allow_stack=True)
        declared = body.get("Parameters") or {}
        return {
            "Parameters": [
                {
                    "ParameterKey": name,
                    "DefaultValue": spec.get("Default"),
                    "ParameterType": spec.get("Type"),
                    "NoEcho": bool(spec.get("NoEcho", False)),
                    "Description": spec.get("Description"),
                }
                for name, spec in declared.items()
            ],
            "Description": body.get("Description"),
            "Version": body.get("AWSTemplateFormatVersion"),
            "ResourceTypes": sorted({str(r.get("Type")) for r in body["Resources"].values()}),
            "DeclaredTransforms": [],
        }

    def _validate_template(self, request: wire.Request) -> Result:
        body = self._template_body(request, allow_stack=False)
        return {
            "Parameters": [
                {"ParameterKey": name, "DefaultValue": spec.get("Default"), "NoEcho": False}
                for name, spec in (body.get("Parameters") or {}).items()
            ],
            "Description": body.get("Description"),
        }

    def _template_body(self, request: wire.Request, *, allow_stack: bool) -> dict[str, Any]:
        text = self._template_text(request)
        if text is None and allow_stack and request.get("StackName"):
            text = self.service.stack(str(request.get("StackName")), region=request.region).template_text
        if text is None:
            raise validation_error("Either Template URL or Template Body must be specified.")
        try:
            return parse_body(text)
        except TemplateError as error:
            raise validation_error(str(error)) from error

    def _template_text(self, request: wire.Request) -> str | None:
        if request.get("TemplateBody"):
            return request.get("TemplateBody")
        url = request.get("TemplateURL")
        if not url:
            return None
        try:
            return self.service.host.template_text(url)
        except TemplateError as error:
            raise validation_error(str(error)) from error

    # --- change sets -----------------------------------------------------------------------------------

    def _create_change_set(self, request: wire.Request) -> Result:
        change_set, record = self._change_set_from(
            request,
            _required(request, "ChangeSetName"),
            request.get("ChangeSetType", "UPDATE") or "UPDATE",
        )
        return {"Id": change_set.arn, "StackId": record.stack_id}

    def _change_set_from(
        self, request: wire.Request, name: str, change_set_type: str
    ) -> tuple[ChangeSet, StackRecord]:
        given = {}
        use_previous = set()
        for entry in request.members("Parameters"):
            if str(entry.get("UsePreviousValue", "false")).lower() == "true":
                use_previous.add(entry["ParameterKey"])
            else:
                given[entry["ParameterKey"]] = entry.get("ParameterValue", "")
        return self.service.create_change_set(
            _required(request, "StackName"),
            name,
            change_set_type,
            template_text=self._template_text(request),
            use_previous_template=request.flag("UsePreviousTemplate"),
            given=given,
            use_previous=use_previous,
            description=request.get("Description"),
            capabilities=tuple(request.members("Capabilities")),
            tags=tuple((tag["Key"], tag.get("Value", "")) for tag in request.members("Tags")),
            region=request.region,
        )

    def _describe_change_set(self, request: wire.Request) -> Result:
        record, change_set = self.service.change_set(
            _required(request, "ChangeSetName"), request.get("StackName"), request.region
        )
        return {
            "ChangeSetName": change_set.name,
            "ChangeSetId": change_set.arn,
            "StackId": record.stack_id,
            "StackName": record.name,
            "Description": change_set.description,
            "Parameters": described_parameters(change_set.parameters),
            "CreationTime": wire.timestamp(change_set.created_at),
            "ExecutionStatus": change_set.execution_status,
            "Status": change_set.status,
            "StatusReason": change_set.status_reason,
            "Capabilities": list(change_set.capabilities) or None,
            "Tags": [{"Key": key, "Value": value} for key, value in change_set.tags] or None,
            "Changes": render.changes_described(change_set.changes),
            "IncludeNestedStacks": False,
        }

    def _execute_change_set(self, request: wire.Request) -> Result:
        self.service.execute_change_set(
            _required(request, "ChangeSetName"), request.get("StackName"), request.region
        )
        return None

    def _delete_change_set(self, request: wire.Request) -> Result:
        self.service.delete_change_set(
            _required(request, "ChangeSetName"), request.get("StackName"), request.region
        )
        return None

    def _list_change_sets(self, request: wire.Request) -> Result:
        record = self.service.stack(_required(request, "StackName"), region=request.region)
        return {
            "Summaries": [
                {
                    "StackId": record.stack_id,
                    "StackName": record.name,
                    "ChangeSetId": change_set.arn,
                    "ChangeSetName": change_set.name,
                    "ExecutionStatus": change_set.execution_status,
                    "Status": change_set.status,
                    "StatusReason": change_set.status_reason,
                    "CreationTime": wire.timestamp(change_set.created_at),
                }
                for change_set in record.change_sets.values()
            ]
        }

    def _create_stack(self, request: wire.Request) -> Result:
        return self._direct(request, "CREATE")

    def _update_stack(self, request: wire.Request) -> Result:
        return self._direct(request, "UPDATE")

    def _direct(self, request: wire.Request, change_set_type: str) -> Result:
        """CreateStack / UpdateStack (`cdk deploy --method=direct`): a change set made, executed at once."""
        change_set, record = self._change_set_from(
            request, f"direct-{uuid.uuid4().hex[:12]}", change_set_type
        )
        if change_set.status == "FAILED":
            record.change_sets.pop(change_set.name, None)
            reason = change_set.status_reason or ""
            if reason.startswith("The submitted information didn't contain changes"):
                reason = "No updates are to be performed."
            raise validation_error(reason)
        self.service.execute_change_set(change_set.arn, record.name, request.region)
        return {"StackId": record.stack_id}

    # --- resources -------------------------------------------------------------------------------------

    def _describe_stack_resources(self, request: wire.Request) -> Result:
        record = self.service.stack(_required(request, "StackName"), region=request.region)
        wanted = request.get("LogicalResourceId")
        return {
            "StackResources": [
                {
                    "StackName": record.name,
                    "StackId": record.stack_id,
                    **render.resource(resource, "Timestamp"),
                }
                for resource in self.service.resources(record)
                if wanted in {None, resource.logical_id}
            ]
        }

    def _describe_stack_resource(self, request: wire.Request) -> Result:
        found = self._describe_stack_resources(request) or {}
        resources = found.get("StackResources") or []
        if not resources:
            raise validation_error(
                f"Resource {request.get('LogicalResourceId')} does not exist for stack "
                f"{request.get('StackName')}"
            )
        detail = dict(resources[0])
        detail["LastUpdatedTimestamp"] = detail.pop("Timestamp")
        return {"StackResourceDetail": detail}

    def _list_stack_resources(self, request: wire.Request) -> Result:
        record = self.service.stack(_required(request, "StackName"), region=request.region)
        return {
            "StackResourceSummaries": [
                render.resource(resource, "LastUpdatedTimestamp")
                for resource in self.service.resources(record)
            ]
        }

    def _list_exports(self, request: wire.Request) -> Result:
        return {
            "Exports": [
                {"ExportingStackId": record.stack_id, "Name": output.export_name, "Value": output.value}
                for record in self.service.stacks(request.region)
                for output in self.service.outputs(record)
                if output.export_name
            ]
        }


def _required(request: wire.Request, key: str) -> str:
    value = request.get(key)
    if not value:
        raise validation_error(
            f"1 validation error detected: Value null at '{key}' failed to satisfy constraint"
        )
    return value
