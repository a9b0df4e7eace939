"""Large payloads in the constructs: the bucket, its lifecycle, the topic's size, the publisher's limits and
exactly the grants each function needs; under AWS keys and under the customer-managed key, cdk-nag on.

One app for the module: stack `LargeStack` (a payload store, a 1 MiB topic, a writer, a consumer granted
reads) and stack `KeyedStack` (the same under `customer_managed_key=True`).
"""

from __future__ import annotations

from typing import Any

import pytest

from outbox.s3_payloads import ENV_OFFLOAD_ABOVE_BYTES, ENV_PAYLOAD_BUCKET, ENV_PAYLOAD_PREFIX
from outbox_cdk import constants as c
from outbox_publisher.config import ENV_EVENTBRIDGE_MAX_ENTRY_BYTES, ENV_TOPIC_MAX_MESSAGE_BYTES
from tests.infra.template_queries import (
    actions_by_resource,
    function_by_handler,
    only,
    role_of,
    statements_of_role,
)

PUBLISHER = "outbox_publisher.handler.handler"
SWEEPER = "outbox_sweeper.handler.handler"
CONSUMER = "order_consumers.summary_handler.handler"
ONE_MIB = 1_048_576


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    from aws_cdk import App, Stack
    from aws_cdk import aws_iam as iam

    from outbox_cdk import Outbox, OutboxProps, add_nag_checks
    from outbox_cdk.consumers import InboxConsumer
    from outbox_cdk.payloads import PayloadStoreProps

    app = App(outdir=str(tmp_path_factory.mktemp("cdk.out.payloads")))
    for name, keyed in (("LargeStack", False), ("KeyedStack", True)):
        stack = Stack(app, name)
        outbox = Outbox(
            stack,
            "Outbox",
            OutboxProps(
                payloads=PayloadStoreProps(),
                topic_max_message_bytes=ONE_MIB,
                eventbridge_max_entry_bytes=ONE_MIB,
                customer_managed_key=keyed,
            ),
        )
        outbox.grant_write(
            iam.Role(stack, "WriterRole", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
        )
        consumer = InboxConsumer(
            stack,
            "Invoices",
            consumer_name="invoices",
            handler=CONSUMER,
            vendored=("outbox", "outbox_inbox", "order_consumers"),
            description="Test consumer: only its grants are looked at",
        )
        assert outbox.topic is not None
        consumer.subscribe(outbox.topic)
        outbox.grant_read_payloads(consumer.role)
    add_nag_checks(app)  # an unacknowledged finding fails the synth
    assembly = app.synth()
    return {name: assembly.get_stack_by_name(name).template for name in ("LargeStack", "KeyedStack")}


def granted(template: dict[str, Any], role: str) -> dict[str, set[str]]:
    return actions_by_resource(statements_of_role(template, role))


def bucket_grants(template: dict[str, Any], role: str, bucket: str) -> dict[str, set[str]]:
    """The role's grants on the bucket and its objects, keyed as `bucket` or `objects:<pattern>`."""
    found: dict[str, set[str]] = {}
    for resource, actions in granted(template, role).items():
        if resource == f"GetAtt:{bucket}.Arn":
            found["bucket"] = actions
        elif resource.startswith(f"Join:GetAtt:{bucket}.Arn/"):
            found["objects:" + resource.removeprefix(f"Join:GetAtt:{bucket}.Arn/")] = actions
    return found


def test_the_bucket_is_private_tls_only_encrypted_and_expires_what_no_one_reads_any_more(
    templates: dict[str, dict[str, Any]],
) -> None:
    # Given the stack with a payload store under AWS keys
    template = templates["LargeStack"]
    bucket_id, bucket = only(template, "AWS::S3::Bucket")
    properties = bucket["Properties"]

    # Then the bucket blocks public access, is encrypted with S3-managed keys and owned by its owner
    assert properties["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    [encryption] = properties["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert encryption["ServerSideEncryptionByDefault"] == {"SSEAlgorithm": "AES256"}
    # and every object expires 45 days after it was written (archive 30 + queue 14 + 1), orphans included
    [rule] = properties["LifecycleConfiguration"]["Rules"]
    assert rule["ExpirationInDays"] == c.PAYLOAD_RETENTION_DAYS == 45
    assert rule["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 1}
    assert rule["Status"] == "Enabled"
    assert "Prefix" not in rule
    # and its policy refuses any request without TLS, and any delete of a stored envelope (an extended
    # client deletes its message's object by default; the lifecycle rule is not subject to the policy)
    _, policy = only(template, "AWS::S3::BucketPolicy")
    denied = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"]
    [tls] = [s for s in denied if "Condition" in s]
    assert tls["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert tls["Action"] == "s3:*"
    [deletes] = [s for s in denied if s.get("Sid") == "EnvelopesAreDeletedByTheLifecycleRuleOnly"]
    assert deletes["Principal"] == {"AWS": "*"}
    assert sorted(deletes["Action"]) == sorted(c.PAYLOAD_DELETE_ACTIONS)
    assert deletes["Resource"] == {"Fn::Join": ["", [{"Fn::GetAtt": [bucket_id, "Arn"]}, "/envelopes/*"]]}
    assert policy["DeletionPolicy"] == "Retain"
    assert bucket["DeletionPolicy"] == "Retain"
    assert bucket_id.startswith("OutboxPayloads")


def test_the_topic_and_the_publishing_functions_know_each_destination_s_limit(
    templates: dict[str, dict[str, Any]],
) -> None:
    template = templates["LargeStack"]
    # Given the outbox with a 1 MiB topic and a 1 MiB EventBridge limit
    _, topic = only(template, "AWS::SNS::Topic", "OutboxDestinations")
    # Then the topic's MaximumMessageSize is set
    assert topic["Properties"]["MaximumMessageSize"] == ONE_MIB
    # and the publisher and the sweeper are told both limits
    for handler in (PUBLISHER, SWEEPER):
        _, function = function_by_handler(template, handler)
        variables = function["Properties"]["Environment"]["Variables"]
        assert variables[ENV_TOPIC_MAX_MESSAGE_BYTES] == str(ONE_MIB)
        assert variables[ENV_EVENTBRIDGE_MAX_ENTRY_BYTES] == str(ONE_MIB)


@pytest.mark.parametrize("stack", ["LargeStack", "KeyedStack"])
def test_each_function_gets_exactly_what_it_does_with_stored_envelopes(
    templates: dict[str, dict[str, Any]], stack: str
) -> None:
    template = templates[stack]
    bucket_id, _ = only(template, "AWS::S3::Bucket")
    prefix = f"objects:{c.PAYLOAD_PREFIX}*"

    # Then the writer may put envelopes under the prefix, nothing else in the bucket
    assert bucket_grants(template, _role_id(template, "WriterRole"), bucket_id) == {prefix: {"s3:PutObject"}}
    # and the publisher, the sweeper and the consumer may read them, and list the bucket (a missing key then
    # answers 404, which is poison, instead of 403, which is retried)
    for handler in (PUBLISHER, SWEEPER, CONSUMER):
        _, function = function_by_handler(template, handler)
        assert bucket_grants(template, role_of(function), bucket_id) == {
            prefix: {"s3:GetObject"},
            "bucket": {"s3:ListBucket"},
        }, handler


def test_under_the_customer_managed_key_the_bucket_uses_it_and_each_role_its_one_key_action(
    templates: dict[str, dict[str, Any]],
) -> None:
    template = templates["KeyedStack"]
    # Given the stack under the customer-managed key
    key_id, _ = only(template, "AWS::KMS::Key")
    _, bucket = only(template, "AWS::S3::Bucket")

    # Then the bucket encrypts with it, with a bucket key
    [encryption] = bucket["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert encryption["ServerSideEncryptionByDefault"] == {
        "SSEAlgorithm": "aws:kms",
        "KMSMasterKeyID": {"Fn::GetAtt": [key_id, "Arn"]},
    }
    assert encryption["BucketKeyEnabled"] is True
    # and the writer may get a data key from it, the readers decrypt with it
    key = f"GetAtt:{key_id}.Arn"
    assert "kms:GenerateDataKey" in granted(template, _role_id(template, "WriterRole"))[key]
    _, publisher = function_by_handler(template, PUBLISHER)
    assert "kms:Decrypt" in granted(template, role_of(publisher))[key]
    _, consumer = function_by_handler(template, CONSUMER)
    assert "kms:Decrypt" in granted(template, role_of(consumer))[key]


def _role_id(template: dict[str, Any], prefix: str) -> str:
    role_id, _ = only(template, "AWS::IAM::Role", prefix)
    return role_id


def test_the_writer_environment_names_the_bucket_prefix_and_threshold(
    templates: dict[str, dict[str, Any]],
) -> None:
    # The writer's variables are the construct's (checked in process: the test's writer is a bare role)
    from aws_cdk import App, Stack

    from outbox_cdk import Outbox, OutboxProps
    from outbox_cdk.payloads import PayloadStoreProps

    outbox = Outbox(
        Stack(App(), "S"), "Outbox", OutboxProps(payloads=PayloadStoreProps(offload_above_bytes=1000))
    )
    environment = outbox.writer_environment
    assert set(environment) == {
        "OUTBOX_TABLE_NAME",
        ENV_PAYLOAD_BUCKET,
        ENV_PAYLOAD_PREFIX,
        ENV_OFFLOAD_ABOVE_BYTES,
    }
    assert environment[ENV_PAYLOAD_PREFIX] == c.PAYLOAD_PREFIX
    assert environment[ENV_OFFLOAD_ABOVE_BYTES] == "1000"
    assert templates  # the module's app synthesized with cdk-nag on
