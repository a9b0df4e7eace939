"""Consumers on moto in process: a table holding the inbox and the read model, and a dead-letter queue."""

import boto3
import pytest

from tests.support.inbox import Consumer, create_inbox_table


@pytest.fixture
def consumer(aws: None) -> Consumer:
    dynamodb = boto3.client("dynamodb", region_name="us-east-1")
    sqs = boto3.client("sqs", region_name="us-east-1")
    table = create_inbox_table(dynamodb, "consumer")
    dead_letter_url = sqs.create_queue(QueueName="consumer-dlq")["QueueUrl"]
    return Consumer(dynamodb, sqs, table, dead_letter_url)
