"""Outbox tables as a user of the constructs defines their own."""

from __future__ import annotations

from typing import Any

from aws_cdk import Stack


def own_table(stack: Stack, stream: Any = None, *, sort_key: str = "seq", name: str = "MyOutbox") -> Any:
    """A table of the user's, defined as they would: the outbox keys, PITR, a stream."""
    from aws_cdk import aws_dynamodb as dynamodb

    return dynamodb.Table(
        stack,
        name,
        partition_key=dynamodb.Attribute(name="aggregate_key", type=dynamodb.AttributeType.STRING),
        sort_key=dynamodb.Attribute(name=sort_key, type=dynamodb.AttributeType.NUMBER),
        stream=stream if stream is not None else dynamodb.StreamViewType.NEW_AND_OLD_IMAGES,
        billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
        point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=True
        ),
    )
