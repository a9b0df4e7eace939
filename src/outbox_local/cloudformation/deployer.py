"""The stack operations on the running runtime: what CloudFormation's create, update and delete do to a
stack's resources (in moto) and to what the runtime runs for it (functions, mappings, APIs, schedules).

- Create: provision every resource (functions' code from the S3 objects `cdk deploy` uploaded, extracted
  under the runtime's work directory), then run the stack (`StackSet.attach`).
- Update: provision only what the change needs (`outbox_local.cloudformation.changes`): added resources,
  and the re-applied types (functions with their new code and settings, mappings, routes, rules); every
  other resource stays as it is, data and all. The stack's runners are then swapped: the old ones stop
  (`detach_stack`), removed resources are deleted, and the new ones start, each stream mapping after the
  last record its previous runner was done with (never from its starting position again), unless it now
  reads another stream (then from its starting position, as the new mapping AWS makes for it).
- Delete: stop running the stack, then delete its resources in reverse dependency order (a `Retain`ed one
  stays).

Each resource's step is reported to the caller (`Progress`), which turns them into stack events.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from outbox_local.cloudformation.changes import (
    ADD,
    REMOVE,
    Deployed,
    imports,
    refuse_what_cannot_change_in_place,
    resolver_over,
    resource_changes,
)
from outbox_local.cloudformation.host import Progress, RunningStack
from outbox_local.cloudformation.parameters import ssm_reader
from outbox_local.cloudformation.template_text import s3_location
from outbox_local.errors import ProvisioningError, TemplateError
from outbox_local.provisioning.cloudformation import stack_outputs
from outbox_local.provisioning.removal import remove, remove_global_table, retained
from outbox_local.stacks import DeployedStack, StackDefinition
from outbox_local.template import ResolvedResource, Resource, Template

if TYPE_CHECKING:
    from outbox_local.runtime import LocalRuntime
    from outbox_local.stack_set import StackSet

Clients = Callable[[str], Any]


class RuntimeStackHost:
    """`service.StackHost` on a LocalRuntime."""

    def __init__(self, runtime: LocalRuntime, clients: Clients, stack_set: Callable[[], StackSet]) -> None:
        """`clients`: the runtime's internal clients (faults armed on a service never fail them);
        `stack_set`: the runtime's stacks, once it started."""
        self._runtime = runtime
        self._clients = clients
        self._stack_set = stack_set
        self.region = runtime.options.region
        self._left: dict[str, tuple[Template, dict[str, tuple[str, ResolvedResource]], bool, str | None]] = {}
        """By stack, what is no longer running but still in moto: what a failed create made (until its
        rollback removes it), what a delete could not remove (until a retried delete does); and whether
        removing it is a create's rollback (a `RetainExceptOnCreate` resource goes then); and the stack's
        region."""

    # --- reading ---------------------------------------------------------------------------------------

    def running(self) -> Mapping[str, RunningStack]:
        # A copy taken in one step (no lock: a deployment holds the stacks' lock while it reports progress,
        # which takes the service's; taking them the other way round here could deadlock).
        stacks = dict(self._runtime.stacks)
        return {key: self._running(deployed) for key, deployed in stacks.items()}

    def _running(self, deployed: DeployedStack) -> RunningStack:
        definition = deployed.definition
        resources = deployed.provisioned.resources
        region = definition.region or self.region
        resolver = resolver_over(
            definition.template,
            region=region,
            stack_name=definition.name,
            parameter_values=definition.parameter_values,
            resources=resources,
        )
        return RunningStack(
            stack_id=deployed.stack_id,
            created_at=deployed.created_at,
            deployed=Deployed(
                template=definition.template,
                parameter_values=definition.parameter_values,
                resources=resources,
                region=region,
                stack_name=definition.name,
            ),
            outputs=stack_outputs(definition.template, resolver, deployed.outputs),
        )

    def exports(self) -> dict[str, str]:
        return {
            output.export_name: output.value
            for running in self.running().values()
            for output in running.outputs
            if output.export_name
        }

    def template_text(self, url: str) -> str:
        bucket, key = s3_location(url)
        try:
            found = self._clients("s3").get_object(Bucket=bucket, Key=key)
        except ClientError as error:
            raise TemplateError(
                f"TemplateURL {url}: s3://{bucket}/{key} cannot be read: {error.response['Error']['Code']}"
            ) from error
        return str(found["Body"].read().decode("utf-8"))

    def read_ssm(self, name: str) -> str | None:
        return ssm_reader(self._clients("ssm"))(name)

    # --- operations ------------------------------------------------------------------------------------

    def exclusive(self) -> AbstractContextManager[object]:
        return self._stack_set().lock

    def create(
        self, name: str, stack_id: str, template: Template, values: Mapping[str, str], progress: Progress
    ) -> None:
        # The stack's region is the one its id names: the region of the request that created it.
        region = stack_id.split(":")[3]
        definition = StackDefinition(
            name, template, parameter_values=dict(values), region=None if region == self.region else region
        )
        made = _Made(progress, existing={})
        stacks = self._stack_set()
        with stacks.lock:
            try:
                provisioned, outputs = stacks.provision(
                    definition,
                    asset_store=self._runtime.work_dir,
                    progress=made.report,
                    exports=self.exports(),
                )
            except Exception:
                self._left[definition.key] = (template, made.resources, True, definition.region)
                raise
            stacks.attach(definition, provisioned, outputs, stack_id=stack_id, created_at=self._now())

    def update(
        self,
        key: str,
        template: Template,
        values: Mapping[str, str],
        progress: Progress,
        *,
        code_from_s3: bool = True,
    ) -> None:
        stacks = self._stack_set()
        with stacks.lock:
            current = stacks.stacks[key]
            before = self._running(current).deployed
            exports = self.exports()
            changes = resource_changes(before, template, values, exports)
            refuse_what_cannot_change_in_place(changes)
            modified = {c.logical_id for c in changes if c.action not in {ADD, REMOVE}}
            # The code root a stack started with (tests' own handlers) stays its code root.
            definition = StackDefinition(
                current.definition.name,
                template,
                parameter_values=dict(values),
                code_root=current.definition.code_root,
                region=current.definition.region,
            )
            made = _Made(progress, existing=dict(current.provisioned.resources), modified=modified)
            try:
                provisioned, outputs = stacks.provision(
                    definition,
                    asset_store=self._runtime.work_dir if code_from_s3 else None,
                    progress=made.report,
                    keep=current.provisioned.resources,
                    exports=exports,
                )
            except Exception:
                self._remove(template, made.added, progress, rollback=True, region=definition.region)
                raise
            detached = stacks.detach(key)
            # Read once the runners stopped: nothing moves them on any more. A mapping whose stream changed
            # is a new mapping on AWS (EventSourceArn is replaced): it starts at its StartingPosition.
            streams = {mapping.logical_id: mapping.settings.stream_arn for mapping in provisioned.mappings}
            positions = {
                runner.name: runner.positions()
                for runner in detached.mappings
                if streams.get(runner.name) == runner.settings.stream_arn
            }
            removed = {
                c.logical_id: current.provisioned.resources[c.logical_id]
                for c in changes
                if c.action == REMOVE
            }
            self._remove(before.template, removed, progress, region=definition.region)
            stacks.attach(
                definition,
                provisioned,
                outputs,
                stack_id=current.stack_id,
                created_at=current.created_at,
                resume_at=positions,
            )

    def delete(self, key: str, progress: Progress) -> list[str]:
        """Remove the stack (by its key, `StackDefinition.key`; a failed create: what it made, as its
        rollback; a delete that failed: what it left); nothing to remove when the runtime holds nothing of
        it. What could not be removed is kept, for the next delete to retry."""
        stacks = self._stack_set()
        with stacks.lock:
            if key in self._left:
                template, resources, rollback, region = self._left.pop(key)
            elif key in stacks.stacks:
                self._refuse_exports_in_use(key)
                detached = stacks.detach(key)
                template, resources = detached.definition.template, dict(detached.provisioned.resources)
                rollback, region = False, detached.definition.region
            else:
                return []
            failed = self._remove(template, resources, progress, rollback=rollback, region=region)
            if failed:
                left = {logical_id: resources[logical_id] for logical_id in failed}
                self._left[key] = (template, left, rollback, region)
            return failed

    # --- internals -------------------------------------------------------------------------------------

    def _refuse_exports_in_use(self, name: str) -> None:
        """CloudFormation refuses to delete a stack whose export another stack imports."""
        running = self.running()
        if name not in running:
            return
        exports = self.exports()
        own = {output.export_name for output in running[name].outputs if output.export_name}
        for other, stack in running.items():
            in_use = sorted(own & imports(stack.deployed, exports)) if other != name else []
            if in_use:
                raise ProvisioningError(f"Export {in_use[0]} cannot be deleted as it is in use by {other}")

    def _remove(
        self,
        template: Template,
        resources: Mapping[str, tuple[str, ResolvedResource]],
        progress: Progress,
        *,
        rollback: bool = False,
        region: str | None = None,
    ) -> list[str]:
        """Delete `resources` from moto (in the stack's `region`; None: the runtime's), dependents first;
        the logical ids that could not be deleted."""
        stacks = self._stack_set()
        clients = stacks.clients_in(region or self.region)
        order = [r.logical_id for r in _dependency_order(template) if r.logical_id in resources]
        order += [logical_id for logical_id in resources if logical_id not in order]
        failed = []
        for logical_id in reversed(order):
            kind, resolved = resources[logical_id]
            if retained(template.body, logical_id) and not (
                rollback and _retained_except_on_create(template, logical_id)
            ):
                progress(logical_id, kind, resolved.ref, "DELETE_SKIPPED", None)
                continue
            progress(logical_id, kind, resolved.ref, "DELETE_IN_PROGRESS", None)
            try:
                if kind == "AWS::DynamoDB::GlobalTable":
                    # Replication stops first: no write is replicated into a replica being deleted.
                    replicas = self._runtime.replication.remove_table(resolved.ref)
                    remove_global_table(stacks.regional_client, replicas or [region or self.region], resolved)
                else:
                    remove(clients, kind, resolved)
            except ClientError as error:
                failed.append(logical_id)
                progress(logical_id, kind, resolved.ref, "DELETE_FAILED", _reason(error))
                continue
            progress(logical_id, kind, resolved.ref, "DELETE_COMPLETE", None)
        return failed

    def _now(self) -> float:
        return self._runtime.clock()


class _Made:
    """What a provisioning run made, told resource by resource: the events, and what to undo on failure."""

    def __init__(
        self,
        progress: Progress,
        *,
        existing: Mapping[str, tuple[str, ResolvedResource]],
        modified: set[str] | None = None,
    ) -> None:
        self._progress = progress
        self._existing = existing
        self._modified = modified or set()
        self.resources: dict[str, tuple[str, ResolvedResource]] = {}
        self.added: dict[str, tuple[str, ResolvedResource]] = {}

    def report(
        self, resource: Resource, resolved: ResolvedResource | None, error: BaseException | None
    ) -> None:
        existed = resource.logical_id in self._existing
        if existed and resource.logical_id not in self._modified and error is None:
            return  # re-applied unchanged (a function's spec made again): no event, as CloudFormation
        step = "UPDATE" if existed else "CREATE"
        if error is not None:
            self._progress(resource.logical_id, resource.type, None, f"{step}_FAILED", str(error))
            return
        if resolved is None:
            return
        if not existed:
            self._progress(resource.logical_id, resource.type, None, "CREATE_IN_PROGRESS", None)
            self.added[resource.logical_id] = (resource.type, resolved)
        self.resources[resource.logical_id] = (resource.type, resolved)
        self._progress(resource.logical_id, resource.type, resolved.ref, f"{step}_COMPLETE", None)


def _dependency_order(template: Template) -> list[Resource]:
    try:
        return template.in_dependency_order()
    except TemplateError:
        return list(template.resources.values())


def _retained_except_on_create(template: Template, logical_id: str) -> bool:
    raw = (template.body.get("Resources") or {}).get(logical_id) or {}
    return raw.get("DeletionPolicy") == "RetainExceptOnCreate"


def _reason(error: ClientError) -> str:
    detail = error.response.get("Error", {})
    return f"{detail.get('Code', 'Error')}: {detail.get('Message', error)}"
