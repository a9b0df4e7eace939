"""checkov's acknowledgements (outbox_cdk.checkov): where each finding arises and only there, each with a
reason, none about encryption once a customer-managed key is chosen, and the security page lists them all.
`make checkov` runs checkov itself on both templates; these tests hold what it reads."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pytest

from outbox_cdk.checkov import (
    AWS_KEY_REASONS,
    BUCKET_CHECKS,
    FUNCTION_CONCURRENCY_LIMIT,
    FUNCTION_DEAD_LETTER_QUEUE,
    FUNCTION_IN_VPC,
)
from outbox_cdk.nag import MIN_REASON_LENGTH
from tests.infra.template_queries import resources
from tests.support.synth import REPO_ROOT, Synthesized

KEY_CHECKS = {check_id for check_id, _ in AWS_KEY_REASONS.values()}
FUNCTION_CHECKS = {FUNCTION_IN_VPC, FUNCTION_DEAD_LETTER_QUEUE}


def _skips(resource: Mapping[str, Any]) -> dict[str, str]:
    skips = resource.get("Metadata", {}).get("checkov", {}).get("skip", [])
    return {skip["id"]: skip["comment"] for skip in skips}


def _acknowledged(template: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {
        logical_id: skips
        for logical_id, resource in template["Resources"].items()
        if (skips := _skips(resource))
    }


@pytest.fixture(params=["aws-keys", "customer-key"])
def variant(
    request: pytest.FixtureRequest, template: dict[str, Any], customer_key: Synthesized
) -> dict[str, Any]:
    return template if request.param == "aws-keys" else customer_key.template


def test_every_acknowledgement_has_a_reason(variant: dict[str, Any]) -> None:
    # Given either variant's acknowledgements
    acknowledged = _acknowledged(variant)
    assert acknowledged

    # Then each has a reason that says something, and no check is acknowledged twice on one resource
    for logical_id, skips in acknowledged.items():
        for check_id, reason in skips.items():
            assert len(reason.strip()) >= MIN_REASON_LENGTH, (logical_id, check_id)
        raw = variant["Resources"][logical_id]["Metadata"]["checkov"]["skip"]
        assert len(raw) == len(skips), logical_id


def test_every_function_acknowledges_no_vpc_and_no_dlq_and_no_limit_only_without_one(
    variant: dict[str, Any],
) -> None:
    functions = resources(variant, "AWS::Lambda::Function")
    assert len(functions) == 5
    for logical_id, function in functions.items():
        skips = _skips(function)
        assert set(skips) >= FUNCTION_CHECKS, logical_id
        limited = "ReservedConcurrentExecutions" in function["Properties"]
        assert (FUNCTION_CONCURRENCY_LIMIT in skips) is not limited, logical_id
    # (the API has a limit; the publisher, the sweeper and the two consumers have none)
    assert sum(FUNCTION_CONCURRENCY_LIMIT in _skips(f) for f in functions.values()) == 4


def test_with_aws_keys_each_table_queue_log_group_and_function_says_which_key_keeps_it(
    template: dict[str, Any],
) -> None:
    for resource_type, (check_id, reason) in AWS_KEY_REASONS.items():
        found = resources(template, resource_type)
        assert found, resource_type
        for logical_id, resource in found.items():
            assert _skips(resource).get(check_id) == reason, logical_id


def test_with_the_customer_key_nothing_about_encryption_is_acknowledged(customer_key: Synthesized) -> None:
    acknowledged = _acknowledged(customer_key.template)
    # (the payload bucket's are about logs, versions and replication)
    assert {check for skips in acknowledged.values() for check in skips} == FUNCTION_CHECKS | {
        FUNCTION_CONCURRENCY_LIMIT
    } | BUCKET_CHECKS


def test_the_security_page_lists_every_acknowledged_check(
    template: dict[str, Any], customer_key: Synthesized
) -> None:
    # Given the checks acknowledged in either variant
    acknowledged = {
        check
        for variant in (template, customer_key.template)
        for skips in _acknowledged(variant).values()
        for check in skips
    }
    # When the security page's table of acknowledgements is read
    page = (REPO_ROOT / "docs" / "security.md").read_text()
    listed = set(re.findall(r"^\| checkov \| `(CKV_AWS_\d+)`", page, flags=re.MULTILINE))

    # Then it lists exactly those
    assert listed == acknowledged


def test_an_acknowledgement_needs_a_reason_and_a_resource() -> None:
    from aws_cdk import App, Stack
    from aws_cdk import aws_sqs as sqs
    from constructs import Construct

    from outbox_cdk.checkov import acknowledge_checkov
    from outbox_cdk.errors import OutboxConstructError

    stack = Stack(App(), "S")
    queue = sqs.Queue(stack, "Queue")
    with pytest.raises(OutboxConstructError, match="needs a real reason"):
        acknowledge_checkov(queue, "CKV_AWS_27", "fine")
    with pytest.raises(OutboxConstructError, match="defines no CloudFormation resource"):
        acknowledge_checkov(
            Construct(stack, "Empty"), "CKV_AWS_27", "a reason long enough to explain something"
        )
    # And a second acknowledgement of the same check on one resource adds nothing
    acknowledge_checkov(queue, "CKV_AWS_27", "the first reason, long enough to explain something")
    acknowledge_checkov(queue, "CKV_AWS_27", "the second reason, long enough to explain something")
    assert stack.resolve(queue.node.default_child.get_metadata("checkov")) == {  # type: ignore[union-attr]
        "skip": [{"id": "CKV_AWS_27", "comment": "the first reason, long enough to explain something"}]
    }


def test_a_resource_under_your_own_key_is_not_acknowledged() -> None:
    from aws_cdk import App, Aspects, Stack
    from aws_cdk import aws_dynamodb as dynamodb
    from aws_cdk import aws_kms as kms
    from aws_cdk.assertions import Template

    from outbox_cdk.checkov import ServiceKeyAcknowledgements

    # Given a stack with the aspect, one table under a key of its own and one under AWS's
    app = App()
    stack = Stack(app, "S")
    Aspects.of(stack).add(ServiceKeyAcknowledgements())
    key = kms.Key(stack, "Key")
    partition = dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING)
    dynamodb.Table(
        stack,
        "Yours",
        partition_key=partition,
        encryption=dynamodb.TableEncryption.CUSTOMER_MANAGED,
        encryption_key=key,
    )
    dynamodb.Table(stack, "Aws", partition_key=partition, encryption=dynamodb.TableEncryption.AWS_MANAGED)

    # When it is synthesized
    tables = Template.from_stack(stack).find_resources("AWS::DynamoDB::Table")

    # Then only the table on AWS's key acknowledges the customer-managed-key check
    acknowledged = {logical_id[:3]: set(_skips(table)) for logical_id, table in tables.items()}
    assert acknowledged == {"You": set(), "Aws": {"CKV_AWS_119"}}
