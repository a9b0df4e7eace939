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


def _key_acknowledgements_under_the_aspect(build: Any) -> dict[str, set[str]]:
    """What the aspect acknowledges on the resources `build(stack)` adds: logical id -> check ids."""
    from aws_cdk import App, Aspects, Stack
    from aws_cdk.assertions import Template

    from outbox_cdk.checkov import ServiceKeyAcknowledgements

    stack = Stack(App(), "S")
    Aspects.of(stack).add(ServiceKeyAcknowledgements())
    build(stack)
    found = Template.from_stack(stack).to_json()["Resources"]
    return {logical_id: set(_skips(resource)) for logical_id, resource in found.items()}


def test_the_aspect_acknowledges_only_where_its_reason_is_true() -> None:
    from aws_cdk import CfnResource
    from aws_cdk import aws_dynamodb as dynamodb
    from aws_cdk import aws_kms as kms
    from aws_cdk import aws_logs as logs
    from aws_cdk import aws_sqs as sqs

    def build(stack: Any) -> None:
        key = kms.Key(stack, "Key")
        partition = dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING)
        managed, owned = dynamodb.TableEncryption.AWS_MANAGED, dynamodb.TableEncryption.DEFAULT
        yours = dynamodb.TableEncryption.CUSTOMER_MANAGED
        dynamodb.Table(stack, "TableAwsManaged", partition_key=partition, encryption=managed)
        dynamodb.Table(stack, "TableAwsOwned", partition_key=partition, encryption=owned)
        dynamodb.Table(stack, "TableYours", partition_key=partition, encryption=yours, encryption_key=key)
        sqs.Queue(stack, "QueueSqsManaged", encryption=sqs.QueueEncryption.SQS_MANAGED)
        sqs.Queue(stack, "QueueUnencrypted", encryption=sqs.QueueEncryption.UNENCRYPTED)
        sqs.Queue(stack, "QueueYours", encryption=sqs.QueueEncryption.KMS, encryption_master_key=key)
        logs.LogGroup(stack, "LogsServiceKey")
        logs.LogGroup(stack, "LogsYours", encryption_key=key)
        CfnResource(stack, "RawQueue", type="AWS::SQS::Queue", properties={"SqsManagedSseEnabled": True})

    # Given a stack with the aspect and resources of each kind, encrypted each way (and one raw L1 resource)
    # When it is synthesized (the raw resource does not stop it)
    acknowledged = _key_acknowledgements_under_the_aspect(build)

    # Then only a table on the AWS-managed key, a queue with SQS-managed SSE and a log group on CloudWatch
    # Logs' keys say why the check does not apply; an unencrypted queue and a table on AWS's owned key are
    # left to it, like what is under a key of yours and what the aspect does not know
    by_name = {
        name: checks
        for name in (
            "TableAwsManaged",
            "TableAwsOwned",
            "TableYours",
            "QueueSqsManaged",
            "QueueUnencrypted",
            "QueueYours",
            "LogsServiceKey",
            "LogsYours",
            "RawQueue",
        )
        for logical_id, checks in acknowledged.items()
        if logical_id.startswith(name)
    }
    assert by_name == {
        "TableAwsManaged": {"CKV_AWS_119"},
        "TableAwsOwned": set(),
        "TableYours": set(),
        "QueueSqsManaged": {"CKV_AWS_27"},
        "QueueUnencrypted": set(),
        "QueueYours": set(),
        "LogsServiceKey": {"CKV_AWS_158"},
        "LogsYours": set(),
        "RawQueue": set(),
    }


def test_an_inbox_consumer_acknowledges_its_key_findings_but_leaves_the_vpc_to_you() -> None:
    from aws_cdk import App, Stack
    from aws_cdk.assertions import Template

    from outbox_cdk.consumers import InboxConsumer

    # Given a user's inbox consumer in a stack of its own, on AWS's keys
    stack = Stack(App(), "S")
    InboxConsumer(
        stack,
        "Consumer",
        consumer_name="c",
        handler="order_consumers.summary_handler.handler",
        vendored=("outbox", "outbox_inbox", "order_consumers"),
        description="a consumer",
    )
    template = dict(Template.from_stack(stack).to_json())

    # Then its table, queues and log group say which key keeps them, its function why it needs no DLQ, no
    # reserved concurrency and no key for its environment; not why it needs no VPC: its handler is yours
    acknowledged = {r["Type"]: set(_skips(r)) for r in template["Resources"].values() if _skips(r)}
    assert acknowledged == {
        "AWS::DynamoDB::Table": {"CKV_AWS_119"},
        "AWS::SQS::Queue": {"CKV_AWS_27"},
        "AWS::Logs::LogGroup": {"CKV_AWS_158"},
        "AWS::Lambda::Function": {"CKV_AWS_116", "CKV_AWS_115", "CKV_AWS_173"},
    }
