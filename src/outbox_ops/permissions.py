"""The IAM actions the operations commands call, by what they let an operator do.

The operator policy (outbox_cdk.OutboxOperatorPolicy, and its JSON form in docs/operations.md) is built from
these; a test runs every command and fails on an action it calls that is not here.
"""

from __future__ import annotations

from typing import Final

FIND_STACK: Final = ("cloudformation:DescribeStacks",)
READ_ROWS: Final = ("dynamodb:Query", "dynamodb:GetItem", "dynamodb:BatchGetItem")
READ_STREAM: Final = ("dynamodb:GetShardIterator", "dynamodb:GetRecords")
"""Mapping on-failure records back to rows."""
READ_QUEUES: Final = ("sqs:GetQueueAttributes", "sqs:ReceiveMessage", "sqs:ChangeMessageVisibility")
"""A dry run hands back the messages it looked at: ChangeMessageVisibility is a read here."""
ACCOUNT_WIDE: Final = ("lambda:ListEventSourceMappings", "cloudwatch:GetMetricData")
"""Actions that take no resource-level restriction."""
RELEASE_ROWS: Final = ("dynamodb:UpdateItem", "dynamodb:ConditionCheckItem")
SETTLE_QUEUES: Final = ("sqs:DeleteMessage",)
SCAN_TABLE: Final = ("dynamodb:Scan", "dynamodb:BatchWriteItem")
"""`purge-published` and `failed reindex` only."""

READ_ONLY: Final = frozenset(FIND_STACK + READ_ROWS + READ_STREAM + READ_QUEUES + ACCOUNT_WIDE)
"""`status`, `failed list|show`, and every `--dry-run`."""
OPERATOR: Final = READ_ONLY | frozenset(RELEASE_ROWS + SETTLE_QUEUES)
"""... and `redrive`, `skip`."""
MAINTAINER: Final = OPERATOR | frozenset(SCAN_TABLE)
"""... and `purge-published`, `failed reindex`."""
