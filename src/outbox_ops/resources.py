"""Where the outbox lives: its table, queues and functions, from the stack's outputs or explicit names.

A stack built with `outbox_cdk.Outbox` names them in its outputs (outbox.outputs), each key prefixed by the
construct's `outputs_prefix` (default ""): a stack may hold several outboxes, told apart by that prefix. The
local runtime registers the same outputs. Without a stack name, the one stack of the account and region whose
outputs name an outbox is used. Every output whose key ends in `DeadLetterQueueUrl` is a consumer's
dead-letter queue. An explicit name (a flag) wins over the stack's, so the commands also work for an outbox
deployed by a stack of your own with other output names: name what it cannot find.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from botocore.exceptions import ClientError

from outbox import outputs
from outbox.aws_errors import error_code
from outbox_ops.errors import ResourceNotFoundError

_DENIED = frozenset({"AccessDenied", "AccessDeniedException", "UnauthorizedOperation"})
_LISTED = 10
"""The most stacks an error names (the rest are counted)."""


@dataclass(frozen=True)
class DeadLetterQueue:
    output: str
    """The stack output that names it, e.g. OrderSummaryDeadLetterQueueUrl."""
    url: str

    @property
    def consumer(self) -> str:
        return self.output.removesuffix(outputs.DEAD_LETTER_QUEUE_URL_SUFFIX) or self.output


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
    dead_letter_queues: tuple[DeadLetterQueue, ...] = ()
    """The consumers' dead-letter queues the stack names (none without a stack)."""
    regions: str | None = None
    """With regions (outbox_cdk.regions): every region, comma-separated, home first."""
    takeover_after_seconds: str | None = None

    @classmethod
    def find(
        cls,
        cloudformation: Any,
        stack: str | None,
        explicit: Mapping[str, str | None],
        *,
        outbox: str | None = None,
    ) -> OutboxResources:
        """The outputs of `stack` for the outbox whose outputs carry the prefix `outbox` (default: the only
        one it names), overridden by the `explicit` names that are set."""
        found: dict[str, str | None] = dict.fromkeys(_OUTPUTS)
        dead_letters: tuple[DeadLetterQueue, ...] = ()
        if stack:
            try:
                stack_outputs = _stack_outputs(cloudformation, stack)
                dead_letters = dead_letter_queues(stack_outputs)
                prefix = choose_outbox(stack, stack_outputs, outbox)
            except ResourceNotFoundError:
                if not explicit.get("table"):
                    raise
                prefix, stack_outputs = "", {}  # everything it needs is named explicitly
            found = {name: stack_outputs.get(prefix + output) for name, output in _OUTPUTS.items()}
        found.update({name: value for name, value in explicit.items() if value})
        table = found.pop("table")
        if not table:
            raise ResourceNotFoundError(
                "cannot find the outbox table: no stack given; pass --stack or --table"
            )
        return cls(table=table, dead_letter_queues=dead_letters, **found)

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
    "regions": outputs.OUTBOX_REGIONS,
    "takeover_after_seconds": outputs.TAKEOVER_AFTER_SECONDS,
}
assert set(_OUTPUTS) | {"dead_letter_queues"} == {  # noqa: S101 - a wiring check
    field.name for field in fields(OutboxResources)
}


def outbox_prefixes(stack_outputs: Iterable[str]) -> list[str]:
    """The outboxes a stack's output keys name, by their prefix: one per `<prefix>OutboxTableName`."""
    return sorted(
        key.removesuffix(outputs.OUTBOX_TABLE_NAME)
        for key in stack_outputs
        if key.endswith(outputs.OUTBOX_TABLE_NAME)
    )


def choose_outbox(stack: str, stack_outputs: Mapping[str, str], outbox: str | None) -> str:
    """The prefix of the outbox to operate: `outbox` if the stack names it, else the only one it names."""
    prefixes = outbox_prefixes(stack_outputs)
    if outbox is not None:
        if outbox in prefixes:
            return outbox
        names = f"it names {_prefixes(prefixes)}" if prefixes else "it names none"
        raise ResourceNotFoundError(
            f"stack {stack} has no outbox with output prefix {_quoted(outbox)} (no "
            f"{outbox}{outputs.OUTBOX_TABLE_NAME} output; {names}): pass --outbox with one it names"
        )
    if len(prefixes) == 1:
        return prefixes[0]
    if not prefixes:
        raise ResourceNotFoundError(
            f"stack {stack} names no outbox (no output ending in {outputs.OUTBOX_TABLE_NAME}; "
            "outbox_cdk.Outbox writes them): pass --stack with the stack that has one, or name the table "
            "with --table"
        )
    raise ResourceNotFoundError(
        f"stack {stack} names {len(prefixes)} outboxes, by output prefix {_prefixes(prefixes)}: "
        "pass --outbox PREFIX"
    )


def dead_letter_queues(stack_outputs: Mapping[str, str]) -> tuple[DeadLetterQueue, ...]:
    return tuple(
        DeadLetterQueue(key, value)
        for key, value in sorted(stack_outputs.items())
        if key.endswith(outputs.DEAD_LETTER_QUEUE_URL_SUFFIX) and value
    )


def discover_stack(cloudformation: Any, outbox: str | None = None) -> str:
    """The one stack of the account and region whose outputs name an outbox (with the prefix `outbox`, when
    given). None or several is an error naming what was found and `--stack`."""
    region = cloudformation.meta.region_name
    found: list[str] = []
    try:
        for page in cloudformation.get_paginator("describe_stacks").paginate():
            for stack in page.get("Stacks", []):
                prefixes = outbox_prefixes(output["OutputKey"] for output in stack.get("Outputs", []))
                if prefixes and (outbox is None or outbox in prefixes):
                    found.append(str(stack["StackName"]))
    except ClientError as error:
        if error_code(error) not in _DENIED:
            raise
        raise ResourceNotFoundError(
            f"cannot look for the outbox's stack: this role may not list the stacks of {region} "
            f"(cloudformation:DescribeStacks without a stack name: {error_code(error)}): pass --stack NAME"
        ) from None
    which = "an outbox" if outbox is None else f"an outbox with output prefix {_quoted(outbox)}"
    if len(found) == 1:
        return found[0]
    if not found:
        raise ResourceNotFoundError(
            f"no stack in {region} has outputs naming {which} (an output ending in "
            f"{outputs.OUTBOX_TABLE_NAME}): pass --stack NAME (or --region), or name the table with --table"
        )
    listed = ", ".join(sorted(found)[:_LISTED]) + (
        f" and {len(found) - _LISTED} more" if len(found) > _LISTED else ""
    )
    raise ResourceNotFoundError(f"{len(found)} stacks in {region} name {which}: {listed}: pass --stack NAME")


def _quoted(prefix: str) -> str:
    return f'"{prefix}"'


def _prefixes(prefixes: Iterable[str]) -> str:
    return ", ".join(_quoted(prefix) for prefix in prefixes)


def _stack_outputs(cloudformation: Any, stack: str) -> dict[str, str]:
    try:
        stacks = cloudformation.describe_stacks(StackName=stack)["Stacks"]
    except ClientError as error:
        if error_code(error) == "ValidationError":
            raise ResourceNotFoundError(
                f"stack {stack} not found in {cloudformation.meta.region_name}: pass --stack with one that "
                "exists (or --region), or name the table with --table"
            ) from None
        raise
    return {output["OutputKey"]: output["OutputValue"] for output in stacks[0].get("Outputs", [])}
