"""The stacks a running runtime holds: each created (provisioned into moto, then run), attached (run, its
resources already there: a restore) or detached (no longer run; its resources stay), under its own name."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from outbox_local.background import Background
from outbox_local.errors import RuntimeStateError
from outbox_local.event_source_mapping_api import EventSourceMappingApi
from outbox_local.functions import FunctionHost
from outbox_local.local_apis import LocalApis
from outbox_local.moto_streams import Visible
from outbox_local.provisioning import GlobalTables, Progress, ProvisionedStack, Provisioner
from outbox_local.schedules import ScheduleRunner
from outbox_local.stack_mappings import attach_mappings
from outbox_local.stacks import DeployedStack, StackDefinition, stack_id
from outbox_local.stream_poller import ShardPosition
from outbox_local.template import ResolvedResource, Resolver


class StackSet:
    def __init__(
        self,
        *,
        host: FunctionHost,
        schedules: ScheduleRunner,
        background: Background | None,
        apis: LocalApis,
        event_source_mappings: EventSourceMappingApi,
        clients: Callable[[str], Any],
        clock: Callable[[], float],
        region: str,
        retry_delay_s: float,
        visible: Visible | None = None,
        regional_clients: Callable[[str, str], Any] | None = None,
        global_tables: GlobalTables | None = None,
    ) -> None:
        """`clients`: the runtime's internal clients (faults armed on a service never fail them), in
        `region`, the runtime's; `regional_clients(service, region)`: the same in any region (a stack in a
        region of its own, a global table's replicas); `background`: None when the caller drives the
        mappings itself; `visible`: how much of each stream the mappings may read
        (`outbox_local.moto_streams`; None: all of it); `global_tables`: what replicates a global table's
        replicas (`outbox_local.replication`)."""
        self._host = host
        self._schedules = schedules
        self._background = background
        self._apis = apis
        self._event_source_mappings = event_source_mappings
        self._clients = clients
        self._clock = clock
        self._region = region
        self._retry_delay_s = retry_delay_s
        self._visible = visible
        self._regional_clients = regional_clients
        self._global_tables = global_tables
        self.stacks: dict[str, DeployedStack] = {}
        """By key (`StackDefinition.key`: the name, in the runtime's region), in the order they were created
        (a stack updated, detached then attached again, keeps its place)."""
        self._order: list[str] = []
        self.lock = threading.RLock()
        """Held while a stack is created, attached or detached."""

    def create(self, definition: StackDefinition) -> DeployedStack:
        """Provision the stack's resources into moto, then run what it needs (`attach`)."""
        with self.lock:
            if definition.key in self.stacks:
                raise RuntimeStateError(f"the runtime already holds a stack named {definition.key}")
            provisioned, outputs = self.provision(definition)
            return self.attach(
                definition,
                provisioned,
                outputs,
                stack_id=stack_id(self.region_of(definition), definition.name),
                created_at=self._clock(),
            )

    def provision(
        self,
        definition: StackDefinition,
        *,
        keep: Mapping[str, tuple[str, ResolvedResource]] | None = None,
        asset_store: Path | None = None,
        progress: Progress | None = None,
        exports: Mapping[str, str] | None = None,
    ) -> tuple[ProvisionedStack, dict[str, Any]]:
        """Provision the stack's resources into moto (those of `keep` stay as they are, a stack update:
        `Provisioner.provision`), and resolve its outputs; nothing runs yet. `asset_store`: functions' code
        from the S3 objects the template names, extracted there (a deployed stack); `exports`: what the other
        stacks export, for `Fn::ImportValue`."""
        with self.lock:
            region = self.region_of(definition)
            resolver = Resolver(
                definition.template,
                region=region,
                stack_name=definition.name,
                parameter_values=definition.parameter_values,
                exports=exports,
            )
            served_before = set(self._apis.servers)
            try:
                provisioned = Provisioner(
                    definition.template,
                    resolver,
                    self.clients_in(region),
                    code_root_override=definition.code_root,
                    api_endpoint=self._apis.open,
                    retry_delay_s=self._retry_delay_s,
                    asset_store=asset_store,
                    progress=progress,
                    regional_clients=self.regional_client,
                    global_tables=self._global_tables,
                ).provision(keep)
            except BaseException:
                # An API it opened would keep its port (the one `local up` announced, maybe) for nothing.
                self._apis.close(set(self._apis.servers) - served_before)
                raise
            outputs = {
                name: self._apis.localized(resolver.resolve(spec.get("Value")), region)
                for name, spec in definition.template.outputs.items()
            }
            return provisioned, outputs

    def attach(
        self,
        definition: StackDefinition,
        provisioned: ProvisionedStack,
        outputs: dict[str, Any],
        *,
        stack_id: str,
        created_at: float,
        resume_at: Mapping[str, Sequence[ShardPosition]] | None = None,
    ) -> DeployedStack:
        """Run what a provisioned stack needs: its functions, HTTP APIs, event source mappings and schedules.
        No call to moto: the resources are there already (just provisioned, or restored). `resume_at`: where
        each stream mapping (by logical id) of a restored or updated stack resumes."""
        with self.lock:
            deployed = DeployedStack(definition, provisioned, outputs, stack_id, created_at)
            for spec in provisioned.functions:
                self._host.register(spec)
            region = self.region_of(definition)
            attach_mappings(
                deployed,
                self._host,
                self.clients_in(region),
                self._clock,
                region,
                visible=self._visible,
                resume_at=resume_at or {},
            )
            for schedule in provisioned.schedules:
                self._schedules.add(
                    schedule.rule_name,
                    schedule.rule_arn,
                    schedule.expression,
                    schedule.function_arn,
                    schedule.target_input,
                )
            if definition.key not in self._order:
                self._order.append(definition.key)
            self.stacks[definition.key] = deployed
            self.stacks = {name: self.stacks[name] for name in self._order if name in self.stacks}
            self._publish_mappings()
            if self._background is not None:
                self._background.add([*deployed.mappings, *deployed.queue_mappings])
            self._apis.attach(deployed)
            return deployed

    def detach(self, key: str) -> DeployedStack:
        """Stop running the stack (by its key): its pollers (after what they are doing), APIs, schedules and
        functions. Its resources stay in moto."""
        with self.lock:
            deployed = self.stacks.pop(key, None)
            if deployed is None:
                raise RuntimeStateError(f"the runtime holds no stack named {key}")
            self._publish_mappings()
            if self._background is not None:
                self._background.remove([*deployed.mappings, *deployed.queue_mappings])
            self._apis.detach(deployed)
            self._schedules.remove({schedule.rule_arn for schedule in deployed.provisioned.schedules})
            for spec in deployed.provisioned.functions:
                self._host.unregister(spec.arn)
            return deployed

    def region_of(self, definition: StackDefinition) -> str:
        """The region a stack is deployed in."""
        return definition.region or self._region

    def clients_in(self, region: str) -> Callable[[str], Any]:
        """The runtime's internal clients in `region`."""
        if region == self._region:
            return self._clients
        regional = self.regional_client
        return lambda service: regional(service, region)

    def regional_client(self, service: str, region: str) -> Any:
        """An internal client in any region."""
        if region == self._region:
            return self._clients(service)
        if self._regional_clients is None:
            raise RuntimeStateError(f"this runtime has no clients in {region}, only in {self._region}")
        return self._regional_clients(service, region)

    def _publish_mappings(self) -> None:
        self._event_source_mappings.publish(
            [published for deployed in self.stacks.values() for published in deployed.published]
        )
