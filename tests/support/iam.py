"""The IAM actions AWS checks for an API call (the call's own, and on a customer-managed key the KMS actions
it implies): tests compare what code calls with what a policy grants."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
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


@dataclass(frozen=True)
class CustomerKeyed:
    """The resources under a customer-managed KMS key, by each name a call may give them: tables by name
    and ARN, streams by ARN, queues by URL and ARN, topics by ARN."""

    tables: frozenset[str] = frozenset()
    streams: frozenset[str] = frozenset()
    queues: frozenset[str] = frozenset()
    topics: frozenset[str] = frozenset()


def customer_keyed(client: Callable[[str], Any]) -> CustomerKeyed:
    """What is under a customer-managed key, read from the provisioned resources (`client(service)`: a boto3
    client): DescribeTable's SSEDescription.KMSMasterKeyArn, GetQueueAttributes' KmsMasterKeyId,
    GetTopicAttributes' KmsMasterKeyId."""
    dynamodb, sqs, sns, kms = (client(service) for service in ("dynamodb", "sqs", "sns", "kms"))
    tables: set[str] = set()
    streams: set[str] = set()
    for page in dynamodb.get_paginator("list_tables").paginate():
        for name in page["TableNames"]:
            table = dynamodb.describe_table(TableName=name)["Table"]
            if _customer_managed(kms, table.get("SSEDescription", {}).get("KMSMasterKeyArn")):
                tables.update({name, table["TableArn"]})
                streams.update([table["LatestStreamArn"]] if "LatestStreamArn" in table else [])
    queues: set[str] = set()
    for url in sqs.list_queues().get("QueueUrls", []):
        names = ["KmsMasterKeyId", "QueueArn"]
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
        if _customer_managed(kms, attributes.get("KmsMasterKeyId")):
            queues.update({url, attributes["QueueArn"]})
    topics = {
        topic["TopicArn"]
        for page in sns.get_paginator("list_topics").paginate()
        for topic in page["Topics"]
        if _customer_managed(
            kms, sns.get_topic_attributes(TopicArn=topic["TopicArn"])["Attributes"].get("KmsMasterKeyId")
        )
    }
    return CustomerKeyed(frozenset(tables), frozenset(streams), frozenset(queues), frozenset(topics))


def _customer_managed(kms: Any, key: str | None) -> bool:
    """No key named is an AWS owned key; an `alias/aws/<service>` key is AWS managed. Neither asks anything
    of the caller: AWS owned keys are outside the account, and an AWS managed key's own policy lets every
    principal of the account use it through its service (AWS KMS developer guide, "AWS managed keys")."""
    if not key or ":alias/aws/" in key or key.startswith("alias/aws/"):
        return False
    metadata = kms.describe_key(KeyId=key)["KeyMetadata"]
    aliases = kms.list_aliases(KeyId=metadata["KeyId"])["Aliases"]
    # moto makes AWS's default keys (alias/aws/dynamodb, for a table with SSEEnabled alone) as customer keys
    # under their reserved alias: the alias tells them apart there, KeyManager on AWS.
    aws_alias = any(str(alias["AliasName"]).startswith("alias/aws/") for alias in aliases)
    return metadata["KeyManager"] == "CUSTOMER" and not aws_alias


_SINGLE_TABLE_CALLS = {"GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan"}
_BATCH_TABLE_CALLS = {"BatchGetItem", "BatchWriteItem"}
_TRANSACT_TABLE_CALLS = {"TransactWriteItems", "TransactGetItems"}


def key_actions(service: str, operation: str, params: Mapping[str, Any], keyed: CustomerKeyed) -> set[str]:
    """The KMS actions AWS also checks against the caller's credentials when `operation` touches a resource
    under a customer-managed key (`keyed`), as the project's constants name them (outbox_cdk.constants):

    - a DynamoDB data-plane call on a table: TABLE_KEY_ACTIONS (DynamoDB encrypts and decrypts the items
      with the table's key on the caller's behalf: DynamoDB developer guide, "Encryption at rest: how it
      works", customer managed keys);
    - SendMessage(Batch) to a queue: QUEUE_KEY_ACTIONS, ReceiveMessage from one: kms:Decrypt (SQS developer
      guide, "Key management": producers need kms:GenerateDataKey and kms:Decrypt, consumers kms:Decrypt);
    - Publish(Batch) to a topic: TOPIC_KEY_ACTIONS (SNS developer guide, "Encryption at rest": the
      publisher needs kms:GenerateDataKey and kms:Decrypt);
    - PutEvents to a bus under a key: none; EventBridge uses the key with its own permission from the key
      policy (EventBridge user guide, "Authorizing EventBridge to use a customer managed key").

    Control-plane calls (DescribeTable, GetQueueAttributes, ...) read no data under the key: none. PartiQL
    names its table inside the statement: not read here (no function uses it), so a key it needs would show
    as an unused key grant, not pass unseen."""
    from outbox_cdk import constants as c

    if service == "dynamodb" and _tables_of(operation, params) & keyed.tables:
        return set(c.TABLE_KEY_ACTIONS)
    if service == "sqs" and params.get("QueueUrl") in keyed.queues:
        if operation in ("SendMessage", "SendMessageBatch"):
            return set(c.QUEUE_KEY_ACTIONS)
        if operation == "ReceiveMessage":
            return {"kms:Decrypt"}
    topic = params.get("TopicArn") or params.get("TargetArn")
    if service == "sns" and operation in ("Publish", "PublishBatch") and topic in keyed.topics:
        return set(c.TOPIC_KEY_ACTIONS)
    return set()


def _tables_of(operation: str, params: Mapping[str, Any]) -> set[str]:
    if operation in _SINGLE_TABLE_CALLS:
        return {params["TableName"]}
    if operation in _BATCH_TABLE_CALLS:
        return set(params["RequestItems"])
    if operation in _TRANSACT_TABLE_CALLS:
        return {entry["TableName"] for item in params["TransactItems"] for entry in item.values()}
    return set()


def mapping_key_actions(source_arn: str, keyed: CustomerKeyed) -> set[str]:
    """What an event source mapping on `source_arn` (a queue's or a DynamoDB stream's ARN) needs on a
    customer-managed key, called by the Lambda service with the function's role: kms:Decrypt to read what it
    polls (Lambda developer guide, "Using Lambda with Amazon SQS", execution role permissions: kms:Decrypt
    for a queue under a customer managed key; the same for a stream, whose records the table's key
    encrypts)."""
    return {"kms:Decrypt"} if source_arn in keyed.queues | keyed.streams else set()
