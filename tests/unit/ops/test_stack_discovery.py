"""Finding the outbox's stack without its name: a role that may not list the stacks is told to name it. A
fake CloudFormation stands in: moto lets every caller list every stack."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from botocore.exceptions import ClientError

from outbox_ops.errors import ResourceNotFoundError
from outbox_ops.resources import dead_letter_queues, discover_stack, outbox_prefixes


class Refusing:
    """CloudFormation for a role allowed DescribeStacks on its own stack only."""

    meta = SimpleNamespace(region_name="eu-west-1")

    def get_paginator(self, _: str) -> Any:
        return self

    def paginate(self) -> Any:
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "not on *"}}, "DescribeStacks")


def test_a_role_that_may_not_list_stacks_is_told_to_name_its_stack() -> None:
    # When the stack is looked for by a role that may not list them
    with pytest.raises(ResourceNotFoundError) as refused:
        discover_stack(Refusing())

    # Then the error says so, with the action and the flag
    assert str(refused.value) == (
        "cannot look for the outbox's stack: this role may not list the stacks of eu-west-1 "
        "(cloudformation:DescribeStacks without a stack name: AccessDenied): pass --stack NAME"
    )


def test_outboxes_and_dead_letter_queues_are_read_from_output_keys() -> None:
    # Given a stack's outputs: two outboxes (prefixes "" and "Refunds"), two consumers' dead-letter queues
    outputs = {
        "OutboxTableName": "t1",
        "RefundsOutboxTableName": "t2",
        "RefundsPoisonQueueUrl": "q",
        "OrderSummaryDeadLetterQueueUrl": "https://sqs/1/summary-dlq",
        "CancellationsDeadLetterQueueUrl": "https://sqs/1/cancellations-dlq",
        "OrdersTableName": "orders",
    }

    # Then each outbox is found by its prefix, and each dead-letter queue by its consumer
    assert outbox_prefixes(outputs) == ["", "Refunds"]
    assert [(queue.consumer, queue.url) for queue in dead_letter_queues(outputs)] == [
        ("Cancellations", "https://sqs/1/cancellations-dlq"),
        ("OrderSummary", "https://sqs/1/summary-dlq"),
    ]
