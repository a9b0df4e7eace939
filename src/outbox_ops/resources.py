"""Where the outbox lives: its table, queues and functions, from the stack's outputs or explicit names.

A deployed stack names them in its outputs (outbox.outputs); the local runtime registers the same outputs.
An explicit name (a flag) wins over the stack's, so the commands also work for an outbox deployed by a
stack of your own with other output names: name what it cannot find.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from botocore.exceptions import ClientError

from outbox import outputs
from outbox.aws_errors import error_code
from outbox_ops.errors import ResourceNotFoundError

DEFAULT_STACK = "OutboxStack"


@dataclass(frozen=True)
class OutboxResources:
    table: str
    poison_queue_url: str | None = None
    on_failure_queue_url: str | None = None
    publisher_function: str | None = None
    sweeper_function: str | None = None
    outbox_name: str | None = None
    """Its functions report metrics under `outbox.metrics.service_name(outbox_name, ...)`: its dashboard's
    name."""

    @classmethod
    def find(
        cls, cloudformation: Any, stack: str | None, explicit: Mapping[str, str | None]
    ) -> OutboxResources:
        """The stack's outputs (when `stack` is given), overridden by the `explicit` names that are set."""
        found: dict[str, str | None] = dict.fromkeys(_OUTPUTS)
        if stack:
            try:
                stack_outputs = _stack_outputs(cloudformation, stack)
            except ResourceNotFoundError:
                if not explicit.get("table"):
                    raise
                stack_outputs = {}  # everything it needs is named explicitly
            found = {name: stack_outputs.get(output) for name, output in _OUTPUTS.items()}
        found.update({name: value for name, value in explicit.items() if value})
        table = found.pop("table")
        if not table:
            where = f"stack {stack} has no {outputs.OUTBOX_TABLE_NAME} output" if stack else "no stack given"
            raise ResourceNotFoundError(f"cannot find the outbox table: {where}; pass --table")
        return cls(table=table, **found)

    def require(self, name: str, flag: str) -> str:
        value = getattr(self, name)
        if not value:
            raise ResourceNotFoundError(f"this needs the {name.replace('_', ' ')}: pass {flag}")
        return str(value)


_OUTPUTS = {
    "table": outputs.OUTBOX_TABLE_NAME,
    "poison_queue_url": outputs.POISON_QUEUE_URL,
    "on_failure_queue_url": outputs.ON_FAILURE_QUEUE_URL,
    "publisher_function": outputs.PUBLISHER_FUNCTION_NAME,
    "sweeper_function": outputs.SWEEPER_FUNCTION_NAME,
    "outbox_name": outputs.DASHBOARD_NAME,
}
assert set(_OUTPUTS) == {field.name for field in fields(OutboxResources)}  # noqa: S101 - a wiring check


def _stack_outputs(cloudformation: Any, stack: str) -> dict[str, str]:
    try:
        stacks = cloudformation.describe_stacks(StackName=stack)["Stacks"]
    except ClientError as error:
        if error_code(error) == "ValidationError":
            raise ResourceNotFoundError(
                f"stack {stack} not found in this account and region: pass --stack, or name the table with "
                "--table"
            ) from None
        raise
    return {output["OutputKey"]: output["OutputValue"] for output in stacks[0].get("Outputs", [])}
