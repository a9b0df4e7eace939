"""The local runtime provisions what the payload store needs from a template: the bucket (encryption, public
access block, lifecycle as given), its policy, and a topic's MaximumMessageSize, honoured by the corrected
moto (outbox_local.moto_sns_sizes)."""

from __future__ import annotations

import json
from typing import Any

import boto3

from outbox_local.provisioning import Provisioner
from outbox_local.template import Resolver, Template
from tests.support.aws import REGION

TEMPLATE = {
    "Resources": {
        "PayloadsBucket": {
            "Type": "AWS::S3::Bucket",
            "Properties": {
                "BucketEncryption": {
                    "ServerSideEncryptionConfiguration": [
                        {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
                    ]
                },
                "PublicAccessBlockConfiguration": {
                    "BlockPublicAcls": True,
                    "BlockPublicPolicy": True,
                    "IgnorePublicAcls": True,
                    "RestrictPublicBuckets": True,
                },
                "OwnershipControls": {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]},
                "LifecycleConfiguration": {
                    "Rules": [
                        {
                            "Id": "ExpireStoredEnvelopes",
                            "Status": "Enabled",
                            "ExpirationInDays": 45,
                            "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
                        }
                    ]
                },
            },
        },
        "PayloadsPolicy": {
            "Type": "AWS::S3::BucketPolicy",
            "Properties": {
                "Bucket": {"Ref": "PayloadsBucket"},
                "PolicyDocument": {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Deny",
                            "Principal": {"AWS": "*"},
                            "Action": "s3:*",
                            "Resource": [{"Fn::GetAtt": ["PayloadsBucket", "Arn"]}],
                            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                        }
                    ],
                },
            },
        },
        "Topic": {"Type": "AWS::SNS::Topic", "Properties": {"MaximumMessageSize": 1048576}},
    }
}


def test_the_bucket_its_policy_and_a_large_topic_are_provisioned_as_the_template_says(
    corrected_moto: None,
) -> None:
    # Given the template's bucket, policy and 1 MiB topic
    template = Template.from_body(TEMPLATE)
    resolver = Resolver(template, region=REGION, stack_name="PaymentsStack")

    def clients(service: str) -> Any:
        return boto3.client(service, region_name=REGION)

    # When the runtime provisions them
    stack = Provisioner(template, resolver, clients).provision()

    # Then the bucket exists under a lowercase generated name, as configured
    _, bucket = stack.resources["PayloadsBucket"]
    name = bucket.ref
    assert name == name.lower()
    assert bucket.attributes["Arn"] == f"arn:aws:s3:::{name}"
    s3 = clients("s3")
    [rule] = s3.get_bucket_lifecycle_configuration(Bucket=name)["Rules"]
    assert rule["Expiration"] == {"Days": 45}
    assert s3.get_public_access_block(Bucket=name)["PublicAccessBlockConfiguration"]["BlockPublicAcls"]
    encryption = s3.get_bucket_encryption(Bucket=name)["ServerSideEncryptionConfiguration"]["Rules"]
    assert encryption[0]["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    # and its TLS-only policy is kept, not applied: the runtime's endpoint is plain HTTP
    _, policy = stack.resources["PayloadsPolicy"]
    assert json.loads(policy.attributes["Policy"])["Statement"][0]["Effect"] == "Deny"
    s3.put_object(Bucket=name, Key="envelopes/e.json", Body=b"{}")
    # and the topic takes a 900 KB message
    _, topic = stack.resources["Topic"]
    clients("sns").publish(TopicArn=topic.ref, Message="x" * 900_000)
