"""The operator policy: exactly the actions of outbox_ops.permissions, on this outbox's own resources, in the
sample stack and for each level of access; and the policy documented in docs/operations.md is the same."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from outbox_ops import permissions
from tests.infra.template_queries import only

POLICY_DOC = Path(__file__).parents[2] / "docs" / "operations.md"


def policy_actions() -> set[str]:
    """The actions of the JSON policy docs/operations.md gives under "Operator permissions"."""
    section = POLICY_DOC.read_text().split("## Operator permissions", 1)[1]
    (document,) = re.findall(r"```json\n(.*?)```", section, flags=re.DOTALL)[:1]
    return {action for statement in json.loads(document)["Statement"] for action in statement["Action"]}


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
    _, policy = only(template, "AWS::IAM::ManagedPolicy", "OutboxOperatorPolicy")

    # Then it grants the operator's actions, no more
    assert actions(policy) == permissions.OPERATOR

    # And every resource is the stack's own, but for the two actions IAM cannot scope
    text = json.dumps(statements(policy))
    for resource in ("OutboxTable", "StreamArn", "PoisonQueue", "OnFailureQueue", "AWS::StackId"):
        assert resource in text
    # the failed index is the only one it reads (the table has no other)
    assert "/index/failed" in text
    assert "/index/pending" not in text
    wildcard = [s for s in statements(policy) if s["Resource"] == "*"]
    assert [set(s["Action"]) for s in wildcard] == [set(permissions.ACCOUNT_WIDE)]
    assert "index/*" not in text
    assert template["Outputs"]["OperatorPolicyArn"]["Value"] == {
        "Ref": only(template, "AWS::IAM::ManagedPolicy", "OutboxOperatorPolicy")[0]
    }


@pytest.mark.parametrize(
    ("access", "expected"),
    [
        ("read_only", permissions.READ_ONLY),
        ("operator", permissions.OPERATOR),
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


def test_the_levels_of_access_are_read_only_and_operator_only() -> None:
    from outbox_cdk import OperatorAccess

    # Given the levels a policy can be built at
    # When they are listed
    levels = [access.value for access in OperatorAccess]

    # Then there is none above the operator's: no command scans or deletes beyond redrive and skip any more
    assert levels == ["read_only", "operator"]
    assert permissions.READ_ONLY < permissions.OPERATOR


def test_the_documented_policy_is_the_operators() -> None:
    # Given the JSON policy docs/operations.md gives for a stack built otherwise
    # When its actions are read
    documented = policy_actions()

    # Then they are the highest level's, the operator's: what every command calls, and nothing more
    assert documented == permissions.OPERATOR


def test_a_customer_managed_table_key_is_granted_to_operators(tmp_path: Path) -> None:
    from aws_cdk import App, Stack
    from aws_cdk import aws_kms as kms

    from outbox_cdk import DataTableProps, OutboxOperatorPolicy, OutboxPublisher, OutboxTable, add_nag_checks
    from outbox_cdk.destinations import OutboxDestinations

    # Given an outbox table encrypted with the user's own key
    app = App(outdir=str(tmp_path))
    stack = Stack(app, "UserStack")
    key = kms.Key(stack, "TableKey", enable_key_rotation=True)
    table = OutboxTable(stack, "Outbox", DataTableProps(encryption_key=key, retain_data=False))
    publisher = OutboxPublisher(stack, "Publisher", table=table, topic=OutboxDestinations(stack, "D").topic)
    OutboxOperatorPolicy(stack, "Operators", publisher=publisher)
    add_nag_checks(app)

    # When it is synthesized
    template: dict[str, Any] = app.synth().get_stack_by_name("UserStack").template

    # Then operators may use the key for the table (reading rows and releasing them), on that key only
    _, policy = only(template, "AWS::IAM::ManagedPolicy", "Operators")
    key_id, _ = only(template, "AWS::KMS::Key", "TableKey")
    (statement,) = [s for s in statements(policy) if "kms:Decrypt" in s["Action"]]
    assert statement["Resource"] == {"Fn::GetAtt": [key_id, "Arn"]}
    assert set(statement["Action"]) == {
        "kms:Decrypt",
        "kms:DescribeKey",
        "kms:Encrypt",
        "kms:GenerateDataKey",
    }


def test_the_sample_stacks_operator_policy_lets_status_count_each_consumers_dead_letters_and_no_more(
    template: dict[str, Any],
) -> None:
    # Given the sample stack's operator policy and its consumers' dead-letter queues (each output's value is
    # {"Ref": "<queue's logical id>"}; a policy names the queue by {"Fn::GetAtt": [id, "Arn"]})
    _, policy = only(template, "AWS::IAM::ManagedPolicy", "OutboxOperatorPolicy")
    queues = {
        template["Outputs"][output]["Value"]["Ref"]
        for output in ("OrderSummaryDeadLetterQueueUrl", "CancellationsDeadLetterQueueUrl")
    }

    # When every action is paired with each resource its statement names
    granted: dict[str, set[str]] = {queue: set() for queue in queues}
    for statement in statements(policy):
        resources = (
            statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        )
        named = {queue for queue in queues if any(queue in json.dumps(resource) for resource in resources)}
        for queue in named:
            granted[queue] |= (
                {statement["Action"]} if isinstance(statement["Action"], str) else set(statement["Action"])
            )

    # Then on each of them the policy only counts messages
    assert granted == {queue: {"sqs:GetQueueAttributes"} for queue in queues}
