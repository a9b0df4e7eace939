"""The correction of moto's SNS sizes (outbox_local.moto_sns_sizes): each topic takes messages up to its
MaximumMessageSize, in UTF-8 bytes of body and attributes, as AWS does; and fails if moto's shape changes."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from outbox_local.moto_sns_sizes import topic_message_sizes
from tests.support.aws import REGION

ATTRIBUTES = {"event_type": {"DataType": "String", "StringValue": "OrderPlaced"}}


def publish(sns: Any, topic_arn: str, message: str) -> str:
    entry = {"Id": "m0", "Message": message, "MessageAttributes": ATTRIBUTES}
    answer = sns.publish_batch(TopicArn=topic_arn, PublishBatchRequestEntries=[entry])
    return "ok" if answer["Successful"] else str(answer["Failed"][0]["Code"])


def test_moto_alone_refuses_any_message_over_256_kib() -> None:
    # Given moto as it is, and a topic raised to 1 MiB
    with mock_aws():
        sns = boto3.client("sns", region_name=REGION)
        arn = sns.create_topic(Name="t", Attributes={"MaximumMessageSize": "1048576"})["TopicArn"]
        # When a 300 KB message is published, Then moto refuses it (the difference corrected here)
        with pytest.raises(ClientError, match="too long"):
            sns.publish(TopicArn=arn, Message="x" * 300_000)


def test_each_topic_takes_what_its_maximum_message_size_allows_counted_in_bytes() -> None:
    with mock_aws(), topic_message_sizes():
        sns = boto3.client("sns", region_name=REGION)
        # Given a topic left at the default size and one raised to 1 MiB (at creation, and later)
        default = sns.create_topic(Name="default")["TopicArn"]
        raised = sns.create_topic(Name="raised", Attributes={"MaximumMessageSize": "1048576"})["TopicArn"]
        later = sns.create_topic(Name="later")["TopicArn"]
        sns.set_topic_attributes(TopicArn=later, AttributeName="MaximumMessageSize", AttributeValue="1048576")

        # Then 131,072 characters of two UTF-8 bytes each, with attributes, are over the default: bytes count
        assert publish(sns, default, "é" * 131_072) == "InvalidParameter"
        assert publish(sns, default, "x" * 200_000) == "ok"
        # and the raised topics take up to 1 MiB, body and attributes together, and no more
        assert publish(sns, raised, "x" * 900_000) == "ok"
        assert publish(sns, later, "x" * 900_000) == "ok"
        assert publish(sns, raised, "x" * 1_048_576) == "InvalidParameter"
