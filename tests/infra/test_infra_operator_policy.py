"""The operator policy: exactly the actions of outbox_ops.permissions, on this outbox's own resources, in the
sample stack and for each level of access; and the policy documented in docs/operations.md is the same."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from outbox_ops import permissions
from tests.infra.template_queries import only
from tests.integration.ops.test_ops_permissions import policy_actions


def statements(policy: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = policy["Properties"]["PolicyDocument"]["Statement"]
    return found


def actions(policy: dict[str, Any]) -> set[str]:
    return {
        action
        for statement in statements(policy)
        for action in ([statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"])
    }


def test_the_sample_stacks_operator_policy_grants_what_redrive_and_skip_need_on_its_own_resources(
    template: dict[str, Any],
) -> None:
    # Given the sample stack's operator policy
    _, policy = only(template, "AWS::IAM::ManagedPolicy", "OperatorPolicy")

    # Then it grants the operator's actions, no more
    assert actions(policy) == permissions.OPERATOR

    # And every resource is the stack's own, but for the two actions IAM cannot scope
    text = json.dumps(statements(policy))
    for resource in ("TablesOutboxTable", "StreamArn", "PoisonQueue", "OnFailureQueue", "AWS::StackId"):
        assert resource in text
    assert "/index/pending" in text
    assert "/index/failed" in text
    wildcard = [s for s in statements(policy) if s["Resource"] == "*"]
    assert [set(s["Action"]) for s in wildcard] == [set(permissions.ACCOUNT_WIDE)]
    assert "index/*" not in text
    assert template["Outputs"]["OperatorPolicyArn"]["Value"] == {
        "Ref": only(template, "AWS::IAM::ManagedPolicy", "OperatorPolicy")[0]
    }


@pytest.mark.parametrize(
    ("access", "expected"),
    [
        ("read_only", permissions.READ_ONLY),
        ("operator", permissions.OPERATOR),
        ("maintainer", permissions.MAINTAINER),
    ],
)
def test_each_level_of_access_grants_its_actions(
    tmp_path: Path, access: str, expected: frozenset[str]
) -> None:
    from aws_cdk import App, Stack

    from outbox_cdk import OperatorAccess, OutboxOperatorPolicy, OutboxPublisher, add_nag_checks
    from outbox_cdk.destinations import OutboxDestinations

    # Given a publisher of the user's and its operator policy at this level
    app = App(outdir=str(tmp_path))
    stack = Stack(app, "UserStack")
    destinations = OutboxDestinations(stack, "Destinations")
    publisher = OutboxPublisher(stack, "Publisher", topic=destinations.topic)
    OutboxOperatorPolicy(stack, "Operators", publisher=publisher, access=OperatorAccess(access))
    add_nag_checks(app)

    # When it is synthesized (cdk-nag on)
    template: dict[str, Any] = app.synth().get_stack_by_name("UserStack").template

    # Then it grants exactly that level's actions
    _, policy = only(template, "AWS::IAM::ManagedPolicy", "Operators")
    assert actions(policy) == expected


def test_the_documented_policy_is_the_maintainers() -> None:
    assert policy_actions() == permissions.MAINTAINER
