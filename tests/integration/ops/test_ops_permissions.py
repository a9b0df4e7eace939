"""The operator policy in docs/operations.md covers every AWS action the commands call, and no command calls
an action it lacks: each command runs against the local runtime while every call its clients make is
recorded and translated into the IAM action AWS checks for it."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from outbox.clock import utc_now
from outbox.marking import DynamoDBRowMarker
from outbox.model import OutboxStatus
from outbox.row_marks import FailedMark
from outbox_ops import permissions
from outbox_ops.clients import OpsClients
from tests.integration.ops.conftest import Ops
from tests.integration.ops.test_ops_redrive_and_skip import fix_payload, poisoned
from tests.integration.ops.test_ops_status_and_failed import new
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


def test_every_command_needs_only_what_the_operator_policy_grants(ops: Ops, called: set[str]) -> None:
    # Given an outbox with a FAILED event holding its aggregate, a gap, an on-failure record whose row the
    # sweeper gave up on, and PUBLISHED rows past retention
    first, _, event_id = poisoned(ops, "perm")
    fix_payload(ops, first)
    _, _, skipped_id = poisoned(ops, "perm-skip")
    ops.put(new("perm-gap", 1, age=timedelta(days=1)))
    ops.put(new("perm-gap", 3, age=timedelta(days=1)))
    ops.publish()
    rule = ops.runtime.faults.arm("sns", "PublishBatch", error_code="AuthorizationError", http_status=403)
    discarded = ops.put(new("perm-discarded", 1, age=timedelta(days=1)))
    ops.publish()
    ops.runtime.faults.disarm(rule)
    DynamoDBRowMarker(ops.dynamodb, ops.table).mark([FailedMark(discarded, "gave_up: x", 5, utc_now())])
    ops.put(
        new("perm-old", 1, age=timedelta(days=40)).with_status(OutboxStatus.PUBLISHED),
        published_at={"S": "2026-10-22T12:00:00.000Z"},
        expires_at={"N": "1"},
    )

    # When every command runs, dry runs included
    commands = [
        ("status",),
        ("failed", "list"),
        ("failed", "show", event_id),
        ("failed", "reindex"),
        ("redrive", "--event-id", event_id, "--reason", "r", "--dry-run"),
        ("redrive", "--event-id", event_id, "--reason", "r"),
        ("skip", skipped_id, "--reason", "r"),
        ("skip", "--missing", "Order#perm-gap", "2", "--reason", "r"),
        ("redrive", "--on-failure-queue", "--reason", "r", "--dry-run"),
        ("redrive", "--on-failure-queue", "--reason", "r"),
        ("purge-published", "--older-than", "1d"),
    ]
    for command in commands:
        result = ops.cli(*command)
        assert result.code in (0, 3, 4), (command, result.err)

    # Then each action they called is in the documented policy
    assert missing(called, policy_actions()) == set()
    # And the check would catch a policy that lacks one (here: reading the stream back)
    assert "dynamodb:GetRecords" in called
    assert missing(called, policy_actions() - {"dynamodb:GetRecords"}) == {"dynamodb:GetRecords"}
    # And the policy grants nothing the commands never call; the construct's (outbox_ops.permissions) neither
    assert policy_actions() == called
    assert called == permissions.MAINTAINER
