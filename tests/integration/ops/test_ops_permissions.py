"""The operator access levels (outbox_ops.permissions: READ_ONLY, OPERATOR, which outbox_cdk's operator policy
is built from) are exactly what the commands call, and the policy in docs/operations.md is the OPERATOR one:
each command runs against the local runtime while every call its clients make is recorded and translated into
the IAM action AWS checks for it."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from outbox_ops import permissions
from outbox_ops.clients import OpsClients
from tests.integration.ops.conftest import Ops
from tests.integration.ops.test_ops_redrive_and_skip import discarded, fix_payload, poisoned
from tests.support.iam import iam_actions

POLICY_DOC = Path(__file__).parents[3] / "docs" / "operations.md"


def policy_actions() -> set[str]:
    text = POLICY_DOC.read_text()
    section = text.split("## Operator permissions", 1)[1]
    (document,) = re.findall(r"```json\n(.*?)```", section, flags=re.DOTALL)[:1]
    return {action for statement in json.loads(document)["Statement"] for action in statement["Action"]}


def missing(called: set[str], allowed: set[str]) -> set[str]:
    return called - allowed


@pytest.fixture
def called(monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """Every IAM action the operations' clients need for the calls they make."""
    actions: set[str] = set()
    original = OpsClients.client

    def recording(self: OpsClients, service: str) -> Any:
        client = original(self, service)
        name = client.meta.service_model.service_name

        def record(params: Mapping[str, Any], model: Any, **_: Any) -> None:
            actions.update(iam_actions(name, model.name, params))

        client.meta.events.register("before-parameter-build", record)
        return client

    monkeypatch.setattr(OpsClients, "client", recording)
    return actions


READ_ONLY_COMMANDS = [
    ("status",),
    ("failed", "list"),
    ("failed", "show", "{redriven}"),
    ("audit",),
    ("audit", "--aggregate", "Order#perm"),
    ("redrive", "--event-id", "{redriven}", "--reason", "r", "--dry-run"),
    ("skip", "{skipped}", "--reason", "r", "--dry-run"),
    ("redrive", "--on-failure-queue", "--reason", "r", "--dry-run"),
]
"""`status`, `failed list|show`, `audit`, and every `--dry-run`: what OperatorAccess.READ_ONLY grants."""
OPERATOR_COMMANDS = [
    ("redrive", "--event-id", "{redriven}", "--reason", "r"),
    ("skip", "{skipped}", "--reason", "r"),
    ("redrive", "--on-failure-queue", "--reason", "r"),
]
"""... and `redrive`, `skip`: what OperatorAccess.OPERATOR adds."""


def run_all(ops: Ops, commands: list[tuple[str, ...]], event_ids: dict[str, str]) -> None:
    for command in commands:
        result = ops.cli(*[word.format(**event_ids) for word in command])
        assert result.code in (0, 3, 4), (command, result.err)


def test_read_only_and_operator_access_are_exactly_what_the_commands_call(ops: Ops, called: set[str]) -> None:
    # Given an outbox with a FAILED event holding its aggregate (its payload since repaired), another to skip,
    # and an on-failure record whose row the sweeper gave up on
    first, _, redriven = poisoned(ops, "perm")
    fix_payload(ops, first)
    _, _, skipped = poisoned(ops, "perm-skip")
    key, _ = discarded(ops, "perm-discarded")
    ops.mark_failed(key)
    event_ids = {"redriven": redriven, "skipped": skipped}

    # When every read-only command runs (dry runs included)
    run_all(ops, READ_ONLY_COMMANDS, event_ids)

    # Then they call exactly what READ_ONLY grants: nothing more, and nothing in it goes unused
    read_only = set(called)
    assert read_only == permissions.READ_ONLY
    # And the comparison catches an access level that lacks one (here: reading the stream back)
    assert "dynamodb:GetRecords" in read_only
    assert missing(read_only, set(permissions.READ_ONLY) - {"dynamodb:GetRecords"}) == {"dynamodb:GetRecords"}

    # When the commands that act run too
    run_all(ops, OPERATOR_COMMANDS, event_ids)

    # Then together they call exactly what OPERATOR grants, and each acted (the calls were not refusals)
    assert called == permissions.OPERATOR
    assert ops.status_of(first) == "PENDING"
    assert ops.status_of(key) == "PENDING"
    assert [entry["action"]["S"] for entry in ops.audit(first)] == ["redrive"]
    assert ops.cli("failed", "list", "--json").json["failed"] == []


def test_the_documented_operator_policy_grants_the_operator_access() -> None:
    # Given the policy docs/operations.md gives for a stack built otherwise
    documented = policy_actions()

    # Then it is the OPERATOR access level: every action the commands call, nothing more
    assert documented == permissions.OPERATOR
