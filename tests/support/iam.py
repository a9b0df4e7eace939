"""The IAM action AWS checks for an API call: tests compare what code calls with what a policy grants."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_TRANSACTION_ACTIONS = {
    "ConditionCheck": "ConditionCheckItem",
    "Update": "UpdateItem",
    "Put": "PutItem",
    "Delete": "DeleteItem",
}
# Batch calls are authorized as their single-entry action.
_BATCH_ACTIONS = {
    "DeleteMessageBatch": "DeleteMessage",
    "ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
    "PublishBatch": "Publish",
}
# S3 authorizes a few operations as another's action ("Policy actions for Amazon S3").
_S3_ACTIONS = {"HeadObject": "GetObject", "HeadBucket": "ListBucket"}
_IAM_PREFIX = {"dynamodbstreams": "dynamodb"}
_FREE = {"sts:GetCallerIdentity"}
"""Allowed to every principal: no policy grants or denies it."""


def iam_actions(service: str, operation: str, params: Mapping[str, Any]) -> set[str]:
    """What a call of `operation` on `service` (botocore's names) is authorized as (TransactWriteItems: as
    each item's own action)."""
    prefix = _IAM_PREFIX.get(service, service)
    if operation == "TransactWriteItems":
        return {f"dynamodb:{_TRANSACTION_ACTIONS[kind]}" for item in params["TransactItems"] for kind in item}
    if operation in ("BatchExecuteStatement", "ExecuteStatement", "ExecuteTransaction"):
        return _partiql_actions(params)
    if service == "s3":
        operation = _S3_ACTIONS.get(operation, operation)
    action = f"{prefix}:{_BATCH_ACTIONS.get(operation, operation)}"
    return set() if action in _FREE else {action}


def _partiql_actions(params: Mapping[str, Any]) -> set[str]:
    """PartiQL is authorized per statement, by its verb: dynamodb:PartiQLSelect, PartiQLInsert, PartiQLUpdate,
    PartiQLDelete ("IAM security policies with PartiQL for DynamoDB")."""
    statements = params.get("Statements") or params.get("TransactStatements") or [params]
    verbs = {str(statement["Statement"]).split(None, 1)[0].capitalize() for statement in statements}
    return {f"dynamodb:PartiQL{verb}" for verb in verbs}
