"""What every resource handler shares: the template, the resolver, clients on the moto server, naming."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from outbox_local.errors import UnsupportedResourceError
from outbox_local.functions import FunctionSpec
from outbox_local.queue_mapping import QueueMappingSettings
from outbox_local.stream_mapping import MappingSettings
from outbox_local.template import ACCOUNT_ID, ResolvedResource, Resolver, Resource, Template, physical_name

Clients = Callable[[str], Any]
RegionalClients = Callable[[str, str], Any]
"""(service, region) -> an internal client in that region."""


class GlobalTables(Protocol):
    """What replicates a global table's replicas (`outbox_local.replication.Replicator`)."""

    def add_table(self, table: str, regions: Sequence[str]) -> None: ...

    def remove_table(self, table: str) -> tuple[str, ...] | None: ...


@dataclass(frozen=True)
class MappingSpec:
    logical_id: str
    function_arn: str
    settings: MappingSettings
    starting_position: str
    enabled: bool
    uuid: str
    """What `Ref` gives for the mapping and what Lambda's mapping API answers as its UUID."""
    parallelization_factor: int = 1
    filter_patterns: tuple[str, ...] = ()
    """The template's `FilterCriteria` patterns as written, which Lambda's mapping API answers back."""


@dataclass(frozen=True)
class QueueMappingSpec:
    """An event source mapping on an SQS queue (`outbox_local.queue_mapping`)."""

    logical_id: str
    settings: QueueMappingSettings
    enabled: bool
    uuid: str
    filter_patterns: tuple[str, ...] = ()
    maximum_concurrency: int | None = None
    """`ScalingConfig.MaximumConcurrency` as the template sets it: answered back by the mapping API, not
    enforced (locally one batch is in flight at a time, which is within any maximum)."""


@dataclass(frozen=True)
class RouteSpec:
    api_logical_id: str
    route_key: str
    function_arn: str


@dataclass(frozen=True)
class ScheduleSpec:
    rule_name: str
    rule_arn: str
    expression: str
    function_arn: str
    target_input: Any


@dataclass
class ProvisionedStack:
    """What the template became locally: physical resources plus what the runtime itself must run."""

    resources: dict[str, tuple[str, ResolvedResource]] = field(default_factory=dict)
    functions: list[FunctionSpec] = field(default_factory=list)
    mappings: list[MappingSpec] = field(default_factory=list)
    """DynamoDB stream mappings."""
    queue_mappings: list[QueueMappingSpec] = field(default_factory=list)
    routes: list[RouteSpec] = field(default_factory=list)
    schedules: list[ScheduleSpec] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    """Logical id -> why the resource needs nothing locally."""


@dataclass
class ProvisioningContext:
    template: Template
    resolver: Resolver
    clients: Clients
    stack: ProvisionedStack
    api_endpoint: Callable[[str], str]
    code_root_override: Path | None = None
    retry_delay_s: float = 0.0
    asset_store: Path | None = None
    """Set: functions' code comes from where the template says, `Code.S3Bucket`/`S3Key` (a `cdk deploy`d
    stack: cdk-assets uploaded it to the runtime's S3) or `Code.ZipFile`, extracted here. None: from the
    `aws:asset:path` metadata beside the template (cdk.out, for the stack `outbox local up` starts with)."""
    regional_clients: RegionalClients | None = None
    """Clients in other regions than the stack's (a global table's replicas); None: none."""
    global_tables: GlobalTables | None = None
    """Where a global table's replicas are registered for replication; None: global tables are refused."""

    @property
    def region(self) -> str:
        return self.resolver.region

    @property
    def stack_name(self) -> str:
        return self.resolver.stack_name

    def name(self, resource: Resource, properties: Mapping[str, Any], key: str, max_length: int = 255) -> str:
        """The name the template gives the resource, or the one CloudFormation would generate."""
        given = properties.get(key)
        return str(given) if given else physical_name(self.stack_name, resource.logical_id, max_length)

    def arn(self, service: str, resource_path: str) -> str:
        return f"arn:aws:{service}:{self.region}:{ACCOUNT_ID}:{resource_path}"


Handler = Callable[[ProvisioningContext, Resource, dict[str, Any]], ResolvedResource]


def check(resource: Resource, properties: Mapping[str, Any], handled: set[str], ignored: set[str]) -> None:
    """Refuse a property the handler neither implements nor deliberately ignores."""
    unknown = set(properties) - handled - ignored
    if unknown:
        raise UnsupportedResourceError(
            f"{resource.logical_id} ({resource.type}): properties not supported locally: "
            f"{', '.join(sorted(unknown))}"
        )


# CloudFormation takes booleans as JSON booleans or as the strings "true" and "false" (any case).
CFN_BOOLEANS: dict[object, bool] = {
    True: True,
    False: False,
    "true": True,
    "false": False,
    "True": True,
    "False": False,
    "TRUE": True,
    "FALSE": False,
}


def cfn_bool(value: object) -> bool:
    """A template boolean; `bool("false")` would be True, which is why this exists."""
    return CFN_BOOLEANS[value]


def attribute_text(value: object) -> str:
    """A template value as a service attribute string (booleans as "true"/"false")."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def json_text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value)
