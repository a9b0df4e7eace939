"""Removing a stack's resources from the moto server: what `cdk destroy` (DeleteStack), a resource dropped
from the template on an update, and the rollback of a failed create do.

One remover per resource type, as CloudFormation deletes it; the types with nothing in moto (functions,
mappings, routes: the runtime runs them, `StackSet.detach` stops them; IAM, permissions; schema
registries, which the runtime keeps itself) have an explicit reason instead. A resource whose
`DeletionPolicy` is `Retain` stays, as on AWS (the CDK bootstrap's staging bucket is one). A bucket that
still holds objects is not deleted and its error is reported, as CloudFormation's DELETE_FAILED does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from botocore.exceptions import ClientError

from outbox_local.provisioning.context import Clients
from outbox_local.template import ResolvedResource

Remover = Callable[[Clients, ResolvedResource], None]

_GONE = {
    "ResourceNotFoundException",
    "NotFoundException",
    "NoSuchBucket",
    "NotFound",
    "ParameterNotFound",
    "AWS.SimpleQueueService.NonExistentQueue",
    "QueueDoesNotExist",
    "RepositoryNotFoundException",
}
"""Already gone: the removal's goal is reached (a retried delete, or a user who deleted it by hand)."""


def _rule(clients: Clients, resolved: ResolvedResource) -> None:
    bus, _, name = resolved.ref.rpartition("|")
    events = clients("events")
    bus = bus or "default"
    targets = [target["Id"] for target in events.list_targets_by_rule(Rule=name, EventBusName=bus)["Targets"]]
    if targets:
        events.remove_targets(Rule=name, EventBusName=bus, Ids=targets)
    events.delete_rule(Name=name, EventBusName=bus)


REMOVERS: dict[str, Remover] = {
    "AWS::DynamoDB::Table": lambda c, r: c("dynamodb").delete_table(TableName=r.ref),
    "AWS::SQS::Queue": lambda c, r: c("sqs").delete_queue(QueueUrl=r.ref),
    "AWS::SNS::Topic": lambda c, r: c("sns").delete_topic(TopicArn=r.ref),
    "AWS::SNS::Subscription": lambda c, r: c("sns").unsubscribe(SubscriptionArn=r.ref),
    "AWS::Events::EventBus": lambda c, r: c("events").delete_event_bus(Name=r.ref),
    "AWS::Events::Archive": lambda c, r: c("events").delete_archive(ArchiveName=r.ref),
    "AWS::Events::Rule": _rule,
    "AWS::KMS::Key": lambda c, r: c("kms").schedule_key_deletion(KeyId=r.ref, PendingWindowInDays=7),
    "AWS::KMS::Alias": lambda c, r: c("kms").delete_alias(AliasName=r.ref),
    "AWS::Logs::LogGroup": lambda c, r: c("logs").delete_log_group(logGroupName=r.ref),
    "AWS::SSM::Parameter": lambda c, r: c("ssm").delete_parameter(Name=r.ref),
    "AWS::CloudWatch::Alarm": lambda c, r: c("cloudwatch").delete_alarms(AlarmNames=[r.ref]),
    "AWS::CloudWatch::Dashboard": lambda c, r: c("cloudwatch").delete_dashboards(DashboardNames=[r.ref]),
    "AWS::S3::Bucket": lambda c, r: c("s3").delete_bucket(Bucket=r.ref),
    "AWS::ECR::Repository": lambda c, r: c("ecr").delete_repository(repositoryName=r.ref),
}

NOTHING_TO_REMOVE: dict[str, str] = {
    "AWS::SQS::QueuePolicy": "a queue's policy goes with its queue",
    "AWS::SNS::TopicPolicy": "a topic's policy goes with its topic",
    "AWS::S3::BucketPolicy": "bucket policies are kept, not applied, locally",
    "AWS::EventSchemas::Registry": "schema registries live in the template only, locally",
    "AWS::EventSchemas::Schema": "schemas live in the template only, locally",
    "AWS::Lambda::Function": "the runtime hosts functions itself (detach_stack stops them)",
    "AWS::Lambda::EventSourceMapping": "the runtime runs mappings itself (detach_stack stops them)",
    "AWS::Lambda::EventInvokeConfig": "kept with the function by the runtime",
    "AWS::ApiGatewayV2::Api": "the runtime serves HTTP APIs itself (detach_stack stops them)",
    "AWS::ApiGatewayV2::Route": "served by the runtime's HTTP API",
    "Custom::AWS": "its call was made at deploy time; an onDelete call is refused at deploy",
}


def remove_global_table(
    regional_clients: Callable[[str, str], Any], regions: Sequence[str], resolved: ResolvedResource
) -> None:
    """A global table: its replica in each of `regions` (the caller stopped replicating it first)."""
    for region in regions:
        try:
            regional_clients("dynamodb", region).delete_table(TableName=resolved.ref)
        except ClientError as error:
            if error.response["Error"]["Code"] not in _GONE:
                raise


def remove(clients: Clients, resource_type: str, resolved: ResolvedResource) -> None:
    """Delete one resource from moto; nothing for a type that has nothing there. Errors other than "it is
    already gone" are raised (ClientError), for the caller to report as DELETE_FAILED."""
    remover = REMOVERS.get(resource_type)
    if remover is None:
        return
    try:
        remover(clients, resolved)
    except ClientError as error:
        if error.response["Error"]["Code"] not in _GONE:
            raise


def retained(template_body: Any, logical_id: str) -> bool:
    """Whether the template keeps the resource when its stack deletes it (`DeletionPolicy: Retain`)."""
    raw = (template_body.get("Resources") or {}).get(logical_id) or {}
    return raw.get("DeletionPolicy") in {"Retain", "RetainExceptOnCreate"}
