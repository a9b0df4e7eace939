"""CloudFormation's stack operations on the runtime's stacks: change sets (create, describe, execute, delete),
stack deletion, and what describes a stack (status, events, resources, outputs, template).

An operation runs on a thread of its own, as CloudFormation runs it after answering: the caller (the CDK
CLI) polls DescribeStacks and DescribeStackEvents until the stack reaches a final status. A failed create
is rolled back (what it made is deleted: ROLLBACK_COMPLETE), a failed update is rolled back to the previous
template (UPDATE_ROLLBACK_COMPLETE), each with the failing resource and its error in the events. What the
runtime cannot do (a resource type it has no handler for, a change it cannot apply in place) fails the
change set itself, before anything is touched, with the resource and the reason named (`change_sets`).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping

from outbox_local.cloudformation import change_sets
from outbox_local.cloudformation.host import (
    CloudFormationError,
    Progress,
    RunningStack,
    StackHost,
    StackResource,
    validation_error,
)
from outbox_local.cloudformation.operations import Operations
from outbox_local.cloudformation.records import (
    CREATE_COMPLETE,
    DELETE_COMPLETE,
    REVIEW_IN_PROGRESS,
    ChangeSet,
    SavedRecords,
    StackRecord,
    adopted,
    change_set_arn,
    description_of,
    settled,
)
from outbox_local.cloudformation.template_text import parse
from outbox_local.errors import LocalRuntimeError
from outbox_local.provisioning import refuse_unknown_types
from outbox_local.provisioning.cloudformation import StackOutput
from outbox_local.stacks import stack_id, stack_key
from outbox_local.template import Template

logger = logging.getLogger("outbox_local.cloudformation")

ANSWER_WITHIN_S = 10.0
"""ExecuteChangeSet and DeleteStack answer once their operation ended, or after this long. The CDK CLI polls
the stack every 5 s: an operation that is still running when it first looks costs a whole interval, and a
local one usually ends within a second or two. A client cannot tell the difference, except that it waits
less (CloudFormation answers at once and the stack's status moves on afterwards)."""


def region_of(record: StackRecord) -> str:
    """The region a stack lives in: the one its id names."""
    return record.stack_id.split(":")[3]


class CloudFormationService:
    def __init__(
        self,
        host: StackHost,
        clock: Callable[[], float] = time.time,
        answer_within_s: float = ANSWER_WITHIN_S,
    ) -> None:
        self.host = host
        self._answer_within_s = answer_within_s
        self._clock = clock
        self._lock = threading.RLock()
        self._operations = Operations()
        self.records: dict[str, StackRecord] = {}
        """Stacks by key (`key`: every one but the deleted)."""
        self.deleted: list[StackRecord] = []

    def forget(self) -> None:
        """Forget every stack (the runtime starts again, from an empty account)."""
        with self._lock:
            self._operations.reopen()
            self.records.clear()
            self.deleted.clear()

    def saved(self) -> SavedRecords:
        """Every record, copied (what a snapshot keeps). Take the stacks' lock first, never the other way."""
        with self._lock:
            return SavedRecords(self.records, self.deleted).copied()

    def resume(self, saved: SavedRecords) -> None:
        """The records a state directory kept, as the restarted runtime's (`records.settled`)."""
        running = self.host.running()
        with self._lock:
            self.deleted = list(saved.deleted)
            self.records = {}
            for key, record in saved.records.items():
                kept = settled(record, running.get(key), self._clock())
                if kept is not None:
                    self.records[key] = kept

    # --- reading ---------------------------------------------------------------------------------------

    def key(self, record: StackRecord) -> str:
        """Where the host holds the record's stack: by name in the runtime's region, by region and name in
        another (`outbox_local.stacks.stack_key`)."""
        region = region_of(record)
        return stack_key(record.name, None if region == self.host.region else region)

    def stacks(self, region: str | None = None) -> list[StackRecord]:
        """Every live stack (the runtime's start-up stack included) of `region` (None: of every region),
        oldest first."""
        with self._lock:
            for key, running in self.host.running().items():
                if key not in self.records:
                    self.records[key] = adopted(running.deployed.stack_name, running)
            return sorted(
                (record for record in self.records.values() if region in {None, region_of(record)}),
                key=lambda record: record.created_at,
            )

    def deleted_in(self, region: str | None = None) -> list[StackRecord]:
        with self._lock:
            return [record for record in self.deleted if region in {None, region_of(record)}]

    def stack(self, name_or_id: str, *, deleted_too: bool = False, region: str | None = None) -> StackRecord:
        """A stack of `region` (the request's; None: of any region) by name or id."""
        for record in self.stacks(region):
            if name_or_id in {record.name, record.stack_id}:
                return record
        if deleted_too:
            for record in self.deleted_in(region):
                if name_or_id == record.stack_id:
                    return record
        raise validation_error(f"Stack with id {name_or_id} does not exist")

    def outputs(self, record: StackRecord) -> list[StackOutput]:
        running = self.host.running().get(self.key(record))
        return (
            running.outputs if running is not None and running.stack_id == record.stack_id else record.outputs
        )

    def resources(self, record: StackRecord) -> list[StackResource]:
        """Each resource the stack holds, with its last operation's status."""
        running = self.host.running().get(self.key(record))
        if running is None or running.stack_id != record.stack_id:
            return []
        found = []
        for logical_id, (kind, resolved) in running.deployed.resources.items():
            status, at, _ = record.resource_status.get(logical_id, (CREATE_COMPLETE, record.created_at, None))
            found.append(StackResource(logical_id, kind, resolved.ref, status, at))
        return found

    def change_set(
        self, name_or_arn: str, stack_name: str | None, region: str | None = None
    ) -> tuple[StackRecord, ChangeSet]:
        candidates = [self.stack(stack_name, region=region)] if stack_name else self.stacks(region)
        for record in candidates:
            for change_set in record.change_sets.values():
                if name_or_arn in {change_set.name, change_set.arn}:
                    return record, change_set
        raise CloudFormationError("ChangeSetNotFound", f"ChangeSet [{name_or_arn}] does not exist")

    # --- change sets -----------------------------------------------------------------------------------

    def create_change_set(
        self,
        stack_name: str,
        change_set_name: str,
        change_set_type: str,
        *,
        template_text: str | None,
        use_previous_template: bool,
        given: Mapping[str, str],
        use_previous: set[str],
        description: str | None = None,
        capabilities: tuple[str, ...] = (),
        tags: tuple[tuple[str, str], ...] = (),
        region: str | None = None,
    ) -> tuple[ChangeSet, StackRecord]:
        """`region`: the request's; a stack it creates lives there (its id names it). None: the runtime's."""
        with self._lock:
            region = region or self.host.region
            record = next((r for r in self.stacks(region) if stack_name in {r.name, r.stack_id}), None)
            change_sets.refuse_to_create(record, stack_name, change_set_type)
            template_text, template, values, resolved = change_sets.submitted(
                record,
                stack_name,
                template_text=template_text,
                use_previous_template=use_previous_template,
                given=given,
                use_previous=use_previous,
                region=region,
                read_ssm=self.host.read_ssm,
            )
            if record is None:
                record = StackRecord(stack_name, stack_id(region, stack_name), self._clock())
                record.event(REVIEW_IN_PROGRESS, self._clock(), reason="User Initiated")
                self.records[self.key(record)] = record
            change_set = ChangeSet(
                name=change_set_name,
                arn=change_set_arn(region, change_set_name),
                change_set_type=change_set_type,
                template_text=template_text,
                parameters=values,
                resolved_parameters=resolved,
                changes=[],
                created_at=self._clock(),
                description=description,
                capabilities=capabilities,
                tags=tags,
            )
            record.change_sets[change_set_name] = change_set
            running = self.host.running().get(self.key(record))
            deployed = running.deployed if running is not None and change_set_type == "UPDATE" else None
            change_sets.plan(record, change_set, deployed, template, resolved, exports=self.host.exports)
            return change_set, record

    def delete_change_set(self, name_or_arn: str, stack_name: str | None, region: str | None = None) -> None:
        """Delete it; a change set the stack does not hold is already gone (the CDK CLI deletes its change
        set's name before each deploy, whether it exists or not)."""
        with self._lock:
            try:
                record, change_set = self.change_set(name_or_arn, stack_name, region)
            except CloudFormationError as error:
                if error.code == "ChangeSetNotFound" and stack_name:
                    return
                raise
            del record.change_sets[change_set.name]

    def execute_change_set(self, name_or_arn: str, stack_name: str | None, region: str | None = None) -> None:
        with self._lock:
            self._operations.refuse_when_closing()
            record, change_set = self.change_set(name_or_arn, stack_name, region)
            change_sets.refuse_to_execute(record, change_set)
            change_set.execution_status = "EXECUTE_IN_PROGRESS"
            creating = change_set.change_set_type == "CREATE"
            record.event(
                "CREATE_IN_PROGRESS" if creating else "UPDATE_IN_PROGRESS",
                self._clock(),
                reason="User Initiated",
            )
            for other in record.change_sets.values():
                if other is not change_set:
                    other.execution_status = "OBSOLETE"
            operation = self._start(record, lambda: self._deploy(record, change_set))
        operation.join(self._answer_within_s)

    def _deploy(self, record: StackRecord, change_set: ChangeSet) -> None:
        template = parse(change_set.template_text, f"stack {record.name}")
        resolved = change_set.resolved_parameters
        creating = change_set.change_set_type == "CREATE"
        failed: list[str] = []
        progress = self._progress(record, failed)
        # The operation, its rollback and its record: one step to a snapshot.
        with self.host.exclusive():
            previous = self.host.running().get(self.key(record))
            try:
                if creating:
                    self.host.create(record.name, record.stack_id, template, resolved, progress)
                else:
                    self.host.update(self.key(record), template, resolved, progress)
            except Exception as error:  # every failure is the stack's, reported in its events
                logger.info("stack %s: %s failed: %s", record.name, change_set.change_set_type, error)
                self._roll_back(record, creating, previous, failed, str(error))
                with self._lock:
                    record.change_sets.clear()
                return
            with self._lock:
                record.template_text = change_set.template_text
                record.parameters = dict(change_set.parameters)
                record.description = description_of(template)
                record.capabilities, record.tags = change_set.capabilities, change_set.tags
                record.updated_at = None if creating else self._clock()
                # Executed, a change set and the stack's others no longer apply: CloudFormation removes
                # them all.
                record.change_sets.clear()
                record.event(CREATE_COMPLETE if creating else "UPDATE_COMPLETE", self._clock())

    def redeploy(
        self, name: str, template: Template, values: Mapping[str, str], *, region: str | None = None
    ) -> None:
        """The update a `cdk deploy` of `template` would make to stack `name`, made now and recorded in its
        events: what `outbox local up` does when the template its stack started from changed since the state
        was saved. `template` is a file's (its functions' assets are beside it). Raises CloudFormationError
        with the reason when the change cannot be made; the stack then runs its previous template."""
        record = self.stack(name, region=region or self.host.region)  # a stack the runtime starts with
        key = self.key(record)
        failed: list[str] = []
        with self._lock:
            record.event("UPDATE_IN_PROGRESS", self._clock(), reason="the template changed (outbox local up)")
        # The operation, its rollback and its record: one step to a snapshot.
        with self.host.exclusive():
            previous = self.host.running().get(key)
            try:
                refuse_unknown_types(template)
                self.host.update(key, template, values, self._progress(record, failed), code_from_s3=False)
            except Exception as error:  # the stack's, as for a change set: reported in its events, raised
                self._roll_back(record, False, previous, failed, str(error), code_from_s3=False)
                raise CloudFormationError("ValidationError", str(error)) from error
            with self._lock:
                record.template_text = json.dumps(template.body)
                record.parameters = dict(values)
                record.description = description_of(template)
                record.updated_at = self._clock()
                record.event("UPDATE_COMPLETE", self._clock())

    def _roll_back(
        self,
        record: StackRecord,
        creating: bool,
        previous: RunningStack | None,
        failed: list[str],
        error: str,
        *,
        code_from_s3: bool = True,
    ) -> None:
        reason = (
            f"The following resource(s) failed to {'create' if creating else 'update'}: "
            f"[{', '.join(failed)}]. "
            if failed
            else f"{error}. "
        ) + "Rollback requested by user."
        ignore = self._progress(record, [])
        if creating:
            record.event("ROLLBACK_IN_PROGRESS", self._clock(), reason=reason)
            left = self.host.delete(self.key(record), ignore)
            record.event("ROLLBACK_FAILED" if left else "ROLLBACK_COMPLETE", self._clock())
            return
        record.event("UPDATE_ROLLBACK_IN_PROGRESS", self._clock(), reason=reason)
        try:
            if previous is None:
                raise LocalRuntimeError("the stack's previous state is unknown")
            self.host.update(
                self.key(record),
                previous.deployed.template,
                previous.deployed.parameter_values,
                ignore,
                code_from_s3=code_from_s3,
            )
        except Exception as rollback_error:  # reported as the stack's status
            record.event("UPDATE_ROLLBACK_FAILED", self._clock(), reason=str(rollback_error))
            return
        record.event("UPDATE_ROLLBACK_COMPLETE", self._clock())

    def _progress(self, record: StackRecord, failed: list[str]) -> Progress:
        def step(logical_id: str, kind: str, physical: str | None, status: str, reason: str | None) -> None:
            if status.endswith("_FAILED"):
                failed.append(logical_id)
            with self._lock:
                record.event(
                    status,
                    self._clock(),
                    logical_id=logical_id,
                    resource_type=kind,
                    physical_id=physical,
                    reason=reason,
                )

        return step

    # --- deleting --------------------------------------------------------------------------------------

    def delete_stack(self, name_or_id: str, region: str | None = None) -> None:
        with self._lock:
            self._operations.refuse_when_closing()
            record = next((r for r in self.stacks(region) if name_or_id in {r.name, r.stack_id}), None)
            if record is None or record.status == "DELETE_IN_PROGRESS":
                return  # deleting what does not exist succeeds, as on AWS
            if record.status.endswith("_IN_PROGRESS") and record.status != REVIEW_IN_PROGRESS:
                raise validation_error(
                    f"Stack:{record.stack_id} is in {record.status} state and can not be deleted."
                )
            record.event("DELETE_IN_PROGRESS", self._clock(), reason="User Initiated")
            operation = self._start(record, lambda: self._delete(record))
        operation.join(self._answer_within_s)

    def _delete(self, record: StackRecord) -> None:
        with self.host.exclusive():  # the deletion and its record: one step to a snapshot
            # Not only a running stack: a delete that failed left resources, which this one retries.
            left = self.host.delete(self.key(record), self._progress(record, []))
            with self._lock:
                if left:
                    record.event(
                        "DELETE_FAILED",
                        self._clock(),
                        reason=f"The following resource(s) failed to delete: [{', '.join(left)}]. ",
                    )
                    return
                record.event(DELETE_COMPLETE, self._clock())
                record.deleted_at = self._clock()
                record.change_sets.clear()
                self.records.pop(self.key(record), None)
                self.deleted.append(record)

    # --- running -------------------------------------------------------------------------------------

    def _start(self, record: StackRecord, operation: Callable[[], None]) -> threading.Thread:
        def failed(error: Exception) -> None:
            with self._lock:
                record.event(f"{record.status.split('_')[0]}_FAILED", self._clock(), reason=str(error))

        return self._operations.start(self.key(record), operation, failed)

    def wait(self, timeout_s: float = 60.0) -> None:
        """Until every operation started has ended (tests)."""
        self._operations.wait(timeout_s)

    def close(self, timeout_s: float = 60.0) -> None:
        """The runtime stops: refuse new operations, then wait for the running one to end (its stack
        attached or rolled back while the runtime still runs), at most `timeout_s`."""
        with self._lock:  # as a new operation checks and starts: none starts after this
            self._operations.close()
        self._operations.wait(timeout_s)
