"""How the query protocol's answers show a stack's events, resources and a change set's changes."""

from __future__ import annotations

from typing import Any

from outbox_local.cloudformation import wire
from outbox_local.cloudformation.changes import ResourceChange
from outbox_local.cloudformation.host import StackResource
from outbox_local.cloudformation.records import StackEvent


def resource(resource: StackResource, timestamp_field: str) -> dict[str, Any]:
    """A stack resource as the resource calls describe it (each names its timestamp differently)."""
    return {
        "LogicalResourceId": resource.logical_id,
        "PhysicalResourceId": resource.physical_id,
        "ResourceType": resource.resource_type,
        timestamp_field: wire.timestamp(resource.at),
        "ResourceStatus": resource.status,
        "DriftInformation": {"StackResourceDriftStatus": "NOT_CHECKED"},
    }


def event(event: StackEvent) -> dict[str, Any]:
    return {
        "StackId": event.stack_id,
        "EventId": event.event_id,
        "StackName": event.stack_name,
        "LogicalResourceId": event.logical_id,
        "PhysicalResourceId": event.physical_id,
        "ResourceType": event.resource_type,
        "Timestamp": wire.timestamp(event.timestamp),
        "ResourceStatus": event.status,
        "ResourceStatusReason": event.reason,
    }


def changes_described(changes: list[ResourceChange]) -> list[dict[str, Any]]:
    """DescribeChangeSet's `Changes`."""
    described = []
    for change in changes:
        resource: dict[str, Any] = {
            "Action": change.action,
            "LogicalResourceId": change.logical_id,
            "ResourceType": change.resource_type,
        }
        if change.physical_id:
            resource["PhysicalResourceId"] = change.physical_id
        if change.action == "Modify":
            resource["Replacement"] = "False"
            resource["Scope"] = ["Properties"]
            resource["Details"] = [
                {"Target": {"Attribute": "Properties", "Name": name, "RequiresRecreation": "Never"}}
                for name in change.properties
            ]
        described.append({"Type": "Resource", "ResourceChange": resource})
    return described
