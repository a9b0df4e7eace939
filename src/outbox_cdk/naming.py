"""An outbox's name: what keeps two outboxes in one account and region apart (metrics, alarms, dashboard).

The functions report metrics under `outbox.metrics.service_name(name, ...)`, the alarms are named
`<name>-<AlarmShortName>`, and the dashboard is `<name>`. By default the name is the stack's name and the path
of the construct that holds the outbox's parts inside the stack (`PaymentsStack-Outbox`): two stacks, or two
outboxes in one stack, never share it.
"""

from __future__ import annotations

import re
from typing import Final

from aws_cdk import Stack, Token
from constructs import Construct

from outbox_cdk.errors import OutboxConstructError

# CloudWatch dashboard names take letters, digits, '-' and '_' only (up to 255); alarm names and the
# `service` dimension take more, so the dashboard's rule holds for all three. The margin leaves room for the
# longest alarm suffix ("-WriterContractViolations") and the function suffix.
MAX_OUTBOX_NAME_LENGTH: Final = 200
_VALID = re.compile(r"^[A-Za-z0-9_-]+$")
_INVALID_CHARACTERS = re.compile(r"[^A-Za-z0-9_-]+")


def default_outbox_name(scope: Construct) -> str:
    """`<stack name>-<path of scope inside its stack>` (just the stack's name for the stack itself), with
    what a dashboard name cannot hold replaced by '-'."""
    stack = Stack.of(scope)
    # A nested stack's name is a token until deployment: its path in the app is concrete and unique.
    stack_name = stack.node.path if Token.is_unresolved(stack.stack_name) else stack.stack_name
    inner = scope.node.path[len(stack.node.path) :].strip("/") if scope is not stack else ""
    name = "-".join(part for part in (stack_name, inner) if part)
    name = _INVALID_CHARACTERS.sub("-", name).strip("-")
    if len(name) > MAX_OUTBOX_NAME_LENGTH:
        raise OutboxConstructError(
            f"the outbox's default name {name!r} is longer than {MAX_OUTBOX_NAME_LENGTH} characters: "
            "give the outbox a shorter one (outbox_name)"
        )
    return name


def checked_outbox_name(name: str) -> str:
    """`name` if it can name a dashboard, alarms and a metric dimension; otherwise OutboxConstructError."""
    if not _VALID.match(name) or len(name) > MAX_OUTBOX_NAME_LENGTH:
        raise OutboxConstructError(
            f"outbox_name {name!r} must be 1 to {MAX_OUTBOX_NAME_LENGTH} letters, digits, '-' or '_': it "
            "names the dashboard, the alarms and the functions' metrics"
        )
    return name


def outbox_name_for(scope: Construct, name: str | None) -> str:
    """`name`, checked, or the default for the construct whose parts live in `scope`."""
    return default_outbox_name(scope) if name is None else checked_outbox_name(name)
