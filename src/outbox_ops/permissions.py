"""The IAM actions the operations commands call, by what they let an operator do.

The operator policy (outbox_cdk.OutboxOperatorPolicy, and its JSON form in docs/operations.md) is built from
these; a test runs every command and fails on an action it calls that is not here.
"""

from __future__ import annotations

from typing import Final

FIND_STACK: Final = ("cloudformation:DescribeStacks",)
READ_ROWS: Final = ("dynamodb:Query", "dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Scan")
"""`status` and `audit` read the table with a scan: it holds only what is not out yet."""
READ_STREAM: Final = ("dynamodb:GetShardIterator", "dynamodb:GetRecords")
"""Mapping on-failure records back to rows."""
READ_QUEUES: Final = ("sqs:GetQueueAttributes", "sqs:ReceiveMessage", "sqs:ChangeMessageVisibility")
"""A dry run hands back the messages it looked at: ChangeMessageVisibility is a read here."""
COUNT_QUEUE: Final = ("sqs:GetQueueAttributes",)
"""`status` counts a consumer's dead letters (its queue's approximate depth), nothing more."""
ACCOUNT_WIDE: Final = ("lambda:ListEventSourceMappings", "cloudwatch:GetMetricData")
"""Actions that take no resource-level restriction."""
RELEASE_ROWS: Final = ("dynamodb:UpdateItem", "dynamodb:DeleteItem")
"""A redrive updates the row, a skip deletes it, each with its audit record (an update), in one transaction:
IAM authorizes each action of TransactWriteItems as the single-item call it is."""
SETTLE_QUEUES: Final = ("sqs:DeleteMessage",)

READ_ONLY: Final = frozenset(FIND_STACK + READ_ROWS + READ_STREAM + READ_QUEUES + ACCOUNT_WIDE)
"""`status`, `failed list|show`, `audit`, and every `--dry-run`."""
OPERATOR: Final = READ_ONLY | frozenset(RELEASE_ROWS + SETTLE_QUEUES)
"""... and `redrive`, `skip`."""
