"""The runtime's own part of a snapshot: each stack as it was deployed (its definition, what provisioning made
of it, its outputs and identity), so a restore runs it again without provisioning anything (moto's restored
backends hold its resources), and where each of its stream mappings resumes.

Not saved, because it is rebuilt or has no lasting meaning: the functions' execution environments (started
again, cold), the queue mappings' state (SQS keeps the messages, and their visibility), schedules' next firing
(counted again from the start), alarms' sampled datapoints (their states are kept), the trace journal of
`outbox trace`, armed faults.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from outbox_local.alarms import AlarmEvaluator, RegionalAlarms
from outbox_local.cloudformation.host import CloudFormationError
from outbox_local.cloudformation.records import SavedRecords
from outbox_local.local_apis import LocalApis
from outbox_local.persistence import Persistence, Snapshot, StateDirError, moto_state
from outbox_local.provisioning import ProvisionedStack
from outbox_local.replication import Replicator, ReplicatorState
from outbox_local.runtime_options import RuntimeOptions
from outbox_local.stack_set import StackSet
from outbox_local.stacks import DeployedStack, StackDefinition, stack_key
from outbox_local.stream_poller import ShardPosition
from outbox_local.template import Template

if TYPE_CHECKING:
    from outbox_local.runtime import LocalRuntime


@dataclass(frozen=True)
class SavedStack:
    definition: StackDefinition
    provisioned: ProvisionedStack
    outputs: Mapping[str, Any]
    stack_id: str
    created_at: float
    api_urls: Mapping[str, str]
    """Where each of its HTTP APIs was served (its outputs name these URLs): by API id."""
    positions: Mapping[str, tuple[ShardPosition, ...]]
    """Each stream mapping's shard positions, by the mapping's logical id."""


@dataclass(frozen=True)
class SavedRuntime:
    stacks: tuple[SavedStack, ...]
    alarm_states: Mapping[str, str] = field(default_factory=dict)
    """Each alarm's state as the runtime last evaluated it (CloudWatch holds it too; the evaluator resumes
    from it, so a restart notifies no change that did not happen)."""
    cloudformation: SavedRecords | None = None
    """What CloudFormation describes of the stacks: statuses, events, parameters as given, deleted stacks."""
    replication: ReplicatorState | None = None
    cut_regions: frozenset[str] = frozenset()
    """Regions cut off (`LocalRuntime.cut_region`): a restart keeps them so."""
    regional_alarm_states: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """The alarm states of the other regions than the runtime's, by region."""
    """The global tables' replication: where it read each replica's stream, the writes queued (a cut
    region's), each item's last write time per replica."""


class StacksHeld:
    """What each cut holds first (`Persistence.start`'s guard): the stacks' lock, so no stack is half created
    or removed in a cut, and, read while it is held and before the cut, the CloudFormation records (the
    records' own lock is taken after the stacks' one, as a deploy takes them; taken inside the cut, it could
    wait for a thread holding it whose request waits for the cut)."""

    def __init__(self, lock: AbstractContextManager[Any], records: Callable[[], SavedRecords]) -> None:
        self._lock = lock
        self._read = records
        self.records: SavedRecords | None = None

    def __enter__(self) -> StacksHeld:
        self._lock.__enter__()
        try:
            self.records = self._read()
        except BaseException:
            self._lock.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exception: object) -> None:
        self.records = None
        self._lock.__exit__(None, None, None)


def saved_runtime(
    stacks: Sequence[DeployedStack],
    api_urls: Mapping[str, str],
    alarms: AlarmEvaluator | None,
    records: SavedRecords | None = None,
    *,
    replication: ReplicatorState | None = None,
    cut_regions: frozenset[str] = frozenset(),
    regional_alarms: RegionalAlarms | None = None,
) -> SavedRuntime:
    """The runtime's stacks and alarm states as a snapshot holds them (read during a cut)."""
    return SavedRuntime(
        cloudformation=records,
        replication=replication,
        cut_regions=cut_regions,
        regional_alarm_states=regional_alarms.states() if regional_alarms is not None else {},
        alarm_states=alarms.states() if alarms is not None else {},
        stacks=tuple(
            SavedStack(
                definition=deployed.definition,
                provisioned=deployed.provisioned,
                outputs=dict(deployed.outputs),
                stack_id=deployed.stack_id,
                created_at=deployed.created_at,
                api_urls={api_id: api_urls[api_id] for api_id in deployed.api_ids if api_id in api_urls},
                positions={runner.name: tuple(runner.positions()) for runner in list(deployed.mappings)},
            )
            for deployed in stacks
        ),
    )


def open_state(options: RuntimeOptions) -> tuple[Persistence | None, Snapshot | None]:
    """The runtime's persistence (None without a state directory), its directory claimed, and the snapshot
    to restore from (None: none, or `--fresh`)."""
    if options.state_dir is None:
        return None, None
    persistence = Persistence(options.state_dir, fresh=options.fresh_state)
    try:
        snapshot = persistence.open()
    except BaseException:
        persistence.close()
        raise
    return persistence, snapshot


def restore_moto(snapshot: Snapshot | None) -> None:
    """moto emptied, then its backends as saved (with a snapshot): before the AWS endpoint serves anyone, so
    no client is answered from an empty moto, nor has its acknowledged write discarded by the restore."""
    moto_state.reset()
    if snapshot is not None:
        moto_state.restore(snapshot.moto)


def restore(
    snapshot: Snapshot,
    stacks: StackSet,
    apis: LocalApis,
    alarms: AlarmEvaluator | None,
    replication: Replicator | None = None,
) -> None:
    """Every saved stack attached, in its place (nothing provisioned; moto's backends were restored before
    the endpoint served: `restore_moto`), each HTTP API on the port it had, so the URLs its outputs and its
    clients know still answer."""
    saved: SavedRuntime = snapshot.runtime
    if alarms is not None:
        alarms.resume(saved.alarm_states)
    # getattr: a snapshot written before replication was kept has none.
    replicated = getattr(saved, "replication", None)
    if replication is not None and replicated is not None:
        replication.resume(replicated)
    for stack in saved.stacks:
        for api_id, url in stack.api_urls.items():
            apis.reserve(api_id, url)
    for stack in saved.stacks:
        stacks.attach(
            stack.definition,
            stack.provisioned,
            dict(stack.outputs),
            stack_id=stack.stack_id,
            created_at=stack.created_at,
            resume_at=stack.positions,
        )


def resume_runtime(snapshot: Snapshot, runtime: LocalRuntime, stacks: StackSet, apis: LocalApis) -> None:
    """`restore`, then what the runtime itself held: the regions cut off (a region cut off stays so), the
    other regions' alarm states, CloudFormation's records."""
    restore(snapshot, stacks, apis, runtime.alarms, runtime.replication)
    for region in getattr(snapshot.runtime, "cut_regions", ()):
        runtime.cut_region(region)
    runtime.regional_alarms.resume(getattr(snapshot.runtime, "regional_alarm_states", {}))
    if snapshot.runtime.cloudformation is not None:
        runtime.cloudformation.resume(snapshot.runtime.cloudformation)


def keep_runtime(persistence: Persistence, runtime: LocalRuntime, apis: LocalApis) -> None:
    """Each cut of `persistence` from now on holds the runtime's own part (`saved_runtime`), read while the
    stacks are held still (`StacksHeld`)."""
    held = StacksHeld(runtime.stacks_lock, runtime.cloudformation.saved)
    persistence.start(
        lambda: saved_runtime(
            list(runtime.stacks.values()),
            apis.urls(),
            runtime.alarms,
            held.records,
            replication=runtime.replication.state(),
            cut_regions=runtime.cut_regions,
            regional_alarms=runtime.regional_alarms,
        ),
        guard=held,
    )


def start_up_stack(runtime: LocalRuntime, template: Template, name: str, region: str | None) -> None:
    """Create a stack the runtime starts with (in `region`; None: the runtime's); restored from a state
    directory, update it in place if its template changed since (as `cdk deploy` would), or refuse to
    start if that cannot be done."""
    running = runtime.stacks.get(stack_key(name, region))
    if running is None:
        definition = StackDefinition(
            name,
            template,
            parameter_values=runtime.options.parameter_values,
            code_root=runtime.options.code_root,
            region=region,
        )
        runtime.create_stack(definition)
    elif dict(running.definition.template.body) != dict(template.body):
        try:
            runtime.cloudformation.redeploy(name, template, runtime.options.parameter_values, region=region)
        except CloudFormationError as error:
            raise StateDirError(
                f"{template.path} changed since stack {name}'s state was saved, and the runtime cannot "
                f"apply the change in place: {error}. Start with --fresh to discard the saved state"
            ) from error
