"""Provisioning every resource of the template into the moto server, one explicit handler per type.

Why not moto's own CloudFormation: it would create the Lambda event source mapping (and moto would then
drain the stream itself through a Docker Lambda), it silently skips `AWS::SNS::Subscription` and
`AWS::CloudWatch::Alarm`, and it crashes on an `AWS::Events::Rule` whose `EventBusName` is a `Ref`
(GUIDE §4). So the runtime reads the same template and calls the service APIs itself. A resource type
without a handler here, or a property a handler does not know, stops start-up with a clear error: the
runtime never silently runs something different from what the template describes.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from outbox_local.errors import ProvisioningError, UnsupportedResourceError
from outbox_local.filtering import FilterCriteria
from outbox_local.functions import FunctionSpec
from outbox_local.stream_mapping import NO_LIMIT, MappingSettings
from outbox_local.template import ACCOUNT_ID, ResolvedResource, Resolver, Resource, Template, physical_name

logger = logging.getLogger("outbox_local.provisioner")

Clients = Callable[[str], Any]


@dataclass(frozen=True)
class MappingSpec:
    logical_id: str
    function_arn: str
    settings: MappingSettings
    starting_position: str
    enabled: bool


@dataclass(frozen=True)
class RouteSpec:
    api_logical_id: str
    route_key: str
    function_arn: str


@dataclass(frozen=True)
class ScheduleSpec:
    rule_name: str
    rule_arn: str
    expression: str
    function_arn: str
    target_input: Any


@dataclass
class ProvisionedStack:
    """What the template became locally: physical resources plus what the runtime itself must run."""

    resources: dict[str, tuple[str, ResolvedResource]] = field(default_factory=dict)
    functions: list[FunctionSpec] = field(default_factory=list)
    mappings: list[MappingSpec] = field(default_factory=list)
    routes: list[RouteSpec] = field(default_factory=list)
    schedules: list[ScheduleSpec] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    """Logical id -> why the resource needs nothing locally."""


# Resource types that need nothing locally, and why. Listing them is a decision, not an oversight.
NO_OP_TYPES: dict[str, str] = {
    "AWS::CDK::Metadata": "CDK usage metadata, no runtime behaviour",
    "AWS::IAM::Role": "moto does not enforce IAM; functions run with the runtime's local credentials",
    "AWS::IAM::Policy": "moto does not enforce IAM",
    "AWS::IAM::ManagedPolicy": "moto does not enforce IAM",
    "AWS::Lambda::Permission": "in-process invocations are not subject to resource policies",
    "AWS::ApiGatewayV2::Stage": "the local HTTP API serves its routes directly (stage handled by the API)",
    "AWS::ApiGatewayV2::Integration": "resolved through the routes that target it",
}


class Provisioner:
    def __init__(
        self,
        template: Template,
        resolver: Resolver,
        clients: Clients,
        *,
        code_root_override: Path | None = None,
        api_endpoint: Callable[[str], str] | None = None,
        retry_delay_s: float = 0.0,
    ) -> None:
        self._template = template
        self._resolver = resolver
        self._clients = clients
        self._code_root_override = code_root_override
        self._api_endpoint = api_endpoint or (lambda api_id: f"http://127.0.0.1/{api_id}")
        self._retry_delay_s = retry_delay_s
        self._region = resolver.region
        self._stack = resolver.stack_name
        self.stack = ProvisionedStack()
        self._handlers: dict[str, Callable[[Resource, dict[str, Any]], ResolvedResource]] = {
            "AWS::DynamoDB::Table": self._table,
            "AWS::SQS::Queue": self._queue,
            "AWS::SQS::QueuePolicy": self._queue_policy,
            "AWS::SNS::Topic": self._topic,
            "AWS::SNS::Subscription": self._subscription,
            "AWS::SNS::TopicPolicy": self._topic_policy,
            "AWS::Events::EventBus": self._event_bus,
            "AWS::Events::Archive": self._archive,
            "AWS::Events::Rule": self._rule,
            "AWS::KMS::Key": self._kms_key,
            "AWS::KMS::Alias": self._kms_alias,
            "AWS::Logs::LogGroup": self._log_group,
            "AWS::SSM::Parameter": self._ssm_parameter,
            "AWS::CloudWatch::Alarm": self._alarm,
            "AWS::CloudWatch::Dashboard": self._dashboard,
            "AWS::Lambda::Function": self._function,
            "AWS::Lambda::EventSourceMapping": self._event_source_mapping,
            "AWS::ApiGatewayV2::Api": self._http_api,
            "AWS::ApiGatewayV2::Route": self._route,
        }

    def provision(self) -> ProvisionedStack:
        ordered = self._template.in_dependency_order()
        unknown = sorted(
            {r.type for r in ordered if r.type not in self._handlers and r.type not in NO_OP_TYPES}
        )
        if unknown:
            raise UnsupportedResourceError(
                f"the local runtime does not know these resource types: {', '.join(unknown)}"
            )
        for resource in ordered:
            if resource.condition and not self._resolver.condition(resource.condition):
                self.stack.skipped[resource.logical_id] = f"condition {resource.condition} is false"
                continue
            properties = self._resolver.resolve(dict(resource.properties)) or {}
            if resource.type in NO_OP_TYPES:
                resolved = self._no_op(resource, properties)
                self.stack.skipped[resource.logical_id] = NO_OP_TYPES[resource.type]
            else:
                try:
                    resolved = self._handlers[resource.type](resource, properties)
                except (UnsupportedResourceError, ProvisioningError):
                    raise
                except Exception as error:
                    raise ProvisioningError(f"{resource.logical_id} ({resource.type}): {error}") from error
            self._resolver.resources[resource.logical_id] = resolved
            self.stack.resources[resource.logical_id] = (resource.type, resolved)
        return self.stack

    # --- helpers -------------------------------------------------------------------------------------

    def _name(
        self, resource: Resource, properties: Mapping[str, Any], key: str, max_length: int = 255
    ) -> str:
        given = properties.get(key)
        return str(given) if given else physical_name(self._stack, resource.logical_id, max_length)

    def _arn(self, service: str, resource_path: str) -> str:
        return f"arn:aws:{service}:{self._region}:{ACCOUNT_ID}:{resource_path}"

    @staticmethod
    def _check(
        resource: Resource, properties: Mapping[str, Any], handled: set[str], ignored: set[str]
    ) -> None:
        unknown = set(properties) - handled - ignored
        if unknown:
            raise UnsupportedResourceError(
                f"{resource.logical_id} ({resource.type}): properties not supported locally: "
                f"{', '.join(sorted(unknown))}"
            )

    def _no_op(self, resource: Resource, properties: Mapping[str, Any]) -> ResolvedResource:
        name = str(properties.get("RoleName") or properties.get("PolicyName") or "") or physical_name(
            self._stack, resource.logical_id, 64
        )
        if resource.type.startswith("AWS::IAM::"):
            arn = self._arn("iam", f"role/{name}").replace(f":{self._region}:", "::")
            return ResolvedResource(ref=name, attributes={"Arn": arn, "RoleId": name, "Id": name})
        return ResolvedResource(ref=name, attributes={})

    # --- DynamoDB ------------------------------------------------------------------------------------

    def _table(self, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
        self._check(
            resource,
            p,
            {
                "TableName",
                "KeySchema",
                "AttributeDefinitions",
                "BillingMode",
                "ProvisionedThroughput",
                "GlobalSecondaryIndexes",
                "LocalSecondaryIndexes",
                "StreamSpecification",
                "TimeToLiveSpecification",
                "Tags",
                "SSESpecification",
                "DeletionProtectionEnabled",
                "TableClass",
            },
            # Backups and insights have no local behaviour worth emulating.
            {"PointInTimeRecoverySpecification", "ContributorInsightsSpecification", "WarmThroughput"},
        )
        name = self._name(resource, p, "TableName")
        request: dict[str, Any] = {
            "TableName": name,
            "KeySchema": p["KeySchema"],
            "AttributeDefinitions": p["AttributeDefinitions"],
            "BillingMode": p.get("BillingMode", "PROVISIONED"),
        }
        if request["BillingMode"] == "PROVISIONED":
            request["ProvisionedThroughput"] = p.get(
                "ProvisionedThroughput", {"ReadCapacityUnits": 5, "WriteCapacityUnits": 5}
            )
        for key in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes", "Tags", "TableClass"):
            if p.get(key):
                request[key] = p[key]
        if "DeletionProtectionEnabled" in p:
            request["DeletionProtectionEnabled"] = bool(p["DeletionProtectionEnabled"])
        stream = p.get("StreamSpecification")
        if stream:
            request["StreamSpecification"] = {
                "StreamEnabled": True,
                "StreamViewType": stream["StreamViewType"],
            }
        dynamodb = self._clients("dynamodb")
        description = dynamodb.create_table(**request)["TableDescription"]
        ttl = p.get("TimeToLiveSpecification")
        if ttl and ttl.get("Enabled"):
            dynamodb.update_time_to_live(
                TableName=name,
                TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl["AttributeName"]},
            )
        attributes = {"Arn": description["TableArn"]}
        if "LatestStreamArn" in description:
            attributes["StreamArn"] = description["LatestStreamArn"]
        return ResolvedResource(ref=name, attributes=attributes)

    # --- SQS -----------------------------------------------------------------------------------------

    _QUEUE_ATTRIBUTES = (
        "DelaySeconds",
        "MaximumMessageSize",
        "MessageRetentionPeriod",
        "ReceiveMessageWaitTimeSeconds",
        "VisibilityTimeout",
        "FifoQueue",
        "ContentBasedDeduplication",
        "KmsMasterKeyId",
        "KmsDataKeyReusePeriodSeconds",
        "SqsManagedSseEnabled",
        "DeduplicationScope",
        "FifoThroughputLimit",
    )

    def _queue(self, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
        self._check(
            resource,
            p,
            {*self._QUEUE_ATTRIBUTES, "QueueName", "RedrivePolicy", "RedriveAllowPolicy", "Tags"},
            set(),
        )
        fifo = bool(p.get("FifoQueue"))
        name = self._name(resource, p, "QueueName", 80)
        if fifo and not name.endswith(".fifo"):
            name = physical_name(self._stack, resource.logical_id, 80, suffix=".fifo")
        attributes = {key: _attribute_text(p[key]) for key in self._QUEUE_ATTRIBUTES if key in p}
        for key in ("RedrivePolicy", "RedriveAllowPolicy"):
            if key in p:
                attributes[key] = json.dumps(p[key]) if isinstance(p[key], dict) else str(p[key])
        sqs = self._clients("sqs")
        request: dict[str, Any] = {"QueueName": name, "Attributes": attributes}
        if p.get("Tags"):
            request["tags"] = {tag["Key"]: tag["Value"] for tag in p["Tags"]}
        url = sqs.create_queue(**request)["QueueUrl"]
        arn = self._arn("sqs", name)
        return ResolvedResource(ref=url, attributes={"Arn": arn, "QueueName": name, "QueueUrl": url})

    def _queue_policy(self, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
        self._check(resource, p, {"Queues", "PolicyDocument"}, set())
        sqs = self._clients("sqs")
        for url in p["Queues"]:
            sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": json.dumps(p["PolicyDocument"])})
        return ResolvedResource(ref=physical_name(self._stack, resource.logical_id, 64))

    # --- SNS -----------------------------------------------------------------------------------------

    def _topic(self, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
        self._check(
            resource,
            p,
            {
                "TopicName",
                "DisplayName",
                "FifoTopic",
                "ContentBasedDeduplication",
                "KmsMasterKeyId",
                "Subscription",
                "Tags",
                "TracingConfig",
                "SignatureVersion",
                "ArchivePolicy",
            },
            {"DeliveryStatusLogging", "DataProtectionPolicy"},  # logging/redaction: no local behaviour
        )
        fifo = bool(p.get("FifoTopic"))
        name = self._name(resource, p, "TopicName", 256)
        if fifo and not name.endswith(".fifo"):
            name = physical_name(self._stack, resource.logical_id, 256, suffix=".fifo")
        attributes: dict[str, str] = {
            key: _attribute_text(p[key])
            for key in (
                "DisplayName",
                "FifoTopic",
                "ContentBasedDeduplication",
                "KmsMasterKeyId",
                "TracingConfig",
                "SignatureVersion",
            )
            if key in p
        }
        if "ArchivePolicy" in p:
            attributes["ArchivePolicy"] = json.dumps(p["ArchivePolicy"])
        sns = self._clients("sns")
        request: dict[str, Any] = {"Name": name, "Attributes": attributes}
        if p.get("Tags"):
            request["Tags"] = p["Tags"]
        arn = sns.create_topic(**request)["TopicArn"]
        for inline in p.get("Subscription", []):
            sns.subscribe(TopicArn=arn, Protocol=inline["Protocol"], Endpoint=inline["Endpoint"])
        return ResolvedResource(ref=arn, attributes={"TopicArn": arn, "TopicName": name})

    def _subscription(self, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
        self._check(
            resource,
            p,
            {
                "TopicArn",
                "Protocol",
                "Endpoint",
                "RawMessageDelivery",
                "FilterPolicy",
                "FilterPolicyScope",
                "RedrivePolicy",
            },
            {"Region", "DeliveryPolicy", "SubscriptionRoleArn", "ReplayPolicy"},
        )
        if p["Protocol"] in {
            "lambda",
            "http",
            "https",
            "email",
            "email-json",
            "sms",
            "application",
            "firehose",
        }:
            raise UnsupportedResourceError(
                f"{resource.logical_id}: SNS {p['Protocol']} subscriptions are not delivered locally"
            )
        attributes: dict[str, str] = {}
        if "RawMessageDelivery" in p:
            attributes["RawMessageDelivery"] = _attribute_text(p["RawMessageDelivery"])
        for key in ("FilterPolicy", "RedrivePolicy"):
            if key in p:
                attributes[key] = json.dumps(p[key]) if isinstance(p[key], dict) else str(p[key])
        if "FilterPolicyScope" in p:
            attributes["FilterPolicyScope"] = p["FilterPolicyScope"]
        arn = self._clients("sns").subscribe(
            TopicArn=p["TopicArn"],
            Protocol=p["Protocol"],
            Endpoint=p["Endpoint"],
            Attributes=attributes,
            ReturnSubscriptionArn=True,
        )["SubscriptionArn"]
        return ResolvedResource(ref=arn, attributes={"Arn": arn})

    def _topic_policy(self, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
        self._check(resource, p, {"Topics", "PolicyDocument"}, set())
        sns = self._clients("sns")
        for arn in p["Topics"]:
            sns.set_topic_attributes(
                TopicArn=arn, AttributeName="Policy", AttributeValue=json.dumps(p["PolicyDocument"])
            )
        return ResolvedResource(ref=physical_name(self._stack, resource.logical_id, 64))

    # --- EventBridge ---------------------------------------------------------------------------------

    def _event_bus(self, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
        self._check(
            resource, p, {"Name", "Tags", "Description"}, {"DeadLetterConfig", "KmsKeyIdentifier", "Policy"}
        )
        name = str(p["Name"])
        request: dict[str, Any] = {"Name": name}
        if p.get("Description"):
            request["Description"] = p["Description"]
        arn = self._clients("events").create_event_bus(**request)["EventBusArn"]
        return ResolvedResource(ref=name, attributes={"Arn": arn, "Name": name})

    def _archive(self, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
        self._check(
            resource,
            p,
            {"SourceArn", "EventPattern", "RetentionDays", "Description", "ArchiveName"},
            {"KmsKeyIdentifier"},  # encryption at rest has no local effect
        )
        name = self._name(resource, p, "ArchiveName", 48)
        request: dict[str, Any] = {"ArchiveName": name, "EventSourceArn": p["SourceArn"]}
        if "EventPattern" in p:
            request["EventPattern"] = _json_text(p["EventPattern"])
        if "RetentionDays" in p:
            request["RetentionDays"] = int(p["RetentionDays"])
        arn = self._clients("events").create_archive(**request)["ArchiveArn"]
        return ResolvedResource(ref=name, attributes={"Arn": arn, "ArchiveName": name})

    def _rule(self, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
        self._check(
            resource,
            p,
            {"Name", "EventBusName", "EventPattern", "ScheduleExpression", "State", "Description", "Targets"},
            {"RoleArn"},
        )
        name = self._name(resource, p, "Name", 64)
        bus = str(p.get("EventBusName", "default")).rsplit("/", 1)[-1]
        request: dict[str, Any] = {"Name": name, "EventBusName": bus, "State": p.get("State", "ENABLED")}
        for key in ("ScheduleExpression", "Description"):
            if key in p:
                request[key] = p[key]
        if "EventPattern" in p:
            request["EventPattern"] = _json_text(p["EventPattern"])
        events = self._clients("events")
        arn = events.put_rule(**request)["RuleArn"]
        queue_targets = []
        for target in p.get("Targets", []):
            service = str(target["Arn"]).split(":")[2]
            if service == "lambda" and "ScheduleExpression" in p:
                self.stack.schedules.append(
                    ScheduleSpec(name, arn, p["ScheduleExpression"], target["Arn"], _target_input(target))
                )
            elif service == "sqs":
                queue_targets.append(_rule_target(target))
            else:
                # moto raises NotImplementedError when a rule delivers to SNS or Lambda (GUIDE §4).
                raise UnsupportedResourceError(
                    f"{resource.logical_id}: rule targets on {service} are not delivered locally"
                )
        if queue_targets:
            events.put_targets(Rule=name, EventBusName=bus, Targets=queue_targets)
        ref = name if bus == "default" else f"{bus}|{name}"
        return ResolvedResource(ref=ref, attributes={"Arn": arn})

    # --- KMS, logs, SSM, CloudWatch ------------------------------------------------------------------

    def _kms_key(self, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
        self._check(
            resource,
            p,
            {"Description", "KeyPolicy", "KeyUsage", "KeySpec", "Tags"},
            # Rotation and deletion windows have no observable local effect.
            {"EnableKeyRotation", "PendingWindowInDays", "Enabled", "RotationPeriodInDays", "MultiRegion"},
        )
        request: dict[str, Any] = {}
        if "Description" in p:
            request["Description"] = p["Description"]
        if "KeyPolicy" in p:
            request["Policy"] = _json_text(p["KeyPolicy"])
        metadata = self._clients("kms").create_key(**request)["KeyMetadata"]
        return ResolvedResource(
            ref=metadata["KeyId"], attributes={"Arn": metadata["Arn"], "KeyId": metadata["KeyId"]}
        )

    def _kms_alias(self, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
        self._check(resource, p, {"AliasName", "TargetKeyId"}, set())
        self._clients("kms").create_alias(AliasName=p["AliasName"], TargetKeyId=p["TargetKeyId"])
        return ResolvedResource(ref=p["AliasName"])

    def _log_group(self, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
        self._check(resource, p, {"LogGroupName", "RetentionInDays", "Tags"}, {"KmsKeyId", "LogGroupClass"})
        name = self._name(resource, p, "LogGroupName", 512)
        logs = self._clients("logs")
        logs.create_log_group(logGroupName=name)
        if "RetentionInDays" in p:
            logs.put_retention_policy(logGroupName=name, retentionInDays=int(p["RetentionInDays"]))
        return ResolvedResource(ref=name, attributes={"Arn": self._arn("logs", f"log-group:{name}:*")})

    def _ssm_parameter(self, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
        self._check(resource, p, {"Name", "Type", "Value", "Description", "Tags"}, {"Tier", "DataType"})
        name = self._name(resource, p, "Name", 1011)
        self._clients("ssm").put_parameter(Name=name, Type=p.get("Type", "String"), Value=str(p["Value"]))
        return ResolvedResource(ref=name, attributes={"Type": p.get("Type", "String"), "Value": p["Value"]})

    _ALARM_FIELDS = (
        "AlarmDescription",
        "ActionsEnabled",
        "OKActions",
        "AlarmActions",
        "InsufficientDataActions",
        "MetricName",
        "Namespace",
        "Statistic",
        "ExtendedStatistic",
        "Dimensions",
        "Period",
        "Unit",
        "EvaluationPeriods",
        "DatapointsToAlarm",
        "Threshold",
        "ComparisonOperator",
        "TreatMissingData",
        "EvaluateLowSampleCountPercentile",
        "Metrics",
        "ThresholdMetricId",
    )

    def _alarm(self, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
        self._check(resource, p, {*self._ALARM_FIELDS, "AlarmName", "Tags"}, set())
        name = self._name(resource, p, "AlarmName", 255)
        request = {key: p[key] for key in self._ALARM_FIELDS if key in p}
        for key in ("Period", "EvaluationPeriods", "DatapointsToAlarm"):
            if key in request:
                request[key] = int(request[key])
        if "Threshold" in request:
            request["Threshold"] = float(request["Threshold"])
        # moto stores alarms but never evaluates them (GUIDE §4): they exist so dashboards and CLIs list them.
        self._clients("cloudwatch").put_metric_alarm(AlarmName=name, **request)
        return ResolvedResource(ref=name, attributes={"Arn": self._arn("cloudwatch", f"alarm:{name}")})

    def _dashboard(self, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
        self._check(resource, p, {"DashboardName", "DashboardBody"}, set())
        name = self._name(resource, p, "DashboardName", 255)
        self._clients("cloudwatch").put_dashboard(
            DashboardName=name, DashboardBody=_json_text(p["DashboardBody"])
        )
        return ResolvedResource(ref=name)

    # --- Lambda --------------------------------------------------------------------------------------

    def _function(self, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
        self._check(
            resource,
            p,
            {"Handler", "Runtime", "Code", "Environment", "Timeout", "MemorySize", "FunctionName"},
            # Deployment and platform settings with no in-process equivalent: the function runs on this
            # interpreter with the project's installed dependencies (Powertools included, for layers).
            {
                "Role",
                "Layers",
                "Architectures",
                "TracingConfig",
                "LoggingConfig",
                "Description",
                "Tags",
                "ReservedConcurrentExecutions",
                "DeadLetterConfig",
                "EphemeralStorage",
                "KmsKeyArn",
                "RecursiveLoop",
            },
        )
        runtime = str(p.get("Runtime", ""))
        if not runtime.startswith("python"):
            raise UnsupportedResourceError(
                f"{resource.logical_id}: runtime {runtime or '(container image)'} cannot run in process"
            )
        name = self._name(resource, p, "FunctionName", 64)
        arn = self._arn("lambda", f"function:{name}")
        environment = {
            key: str(value) for key, value in (p.get("Environment") or {}).get("Variables", {}).items()
        }
        spec = FunctionSpec(
            logical_id=resource.logical_id,
            name=name,
            arn=arn,
            handler=p["Handler"],
            code_root=self._code_root(resource),
            timeout_s=float(p.get("Timeout", 3)),
            memory_mb=int(p.get("MemorySize", 128)),
            environment=environment,
        )
        self.stack.functions.append(spec)
        return ResolvedResource(ref=name, attributes={"Arn": arn})

    def _code_root(self, resource: Resource) -> Path | None:
        if self._code_root_override is not None:
            return self._code_root_override
        asset = resource.metadata.get("aws:asset:path")
        if not asset:
            return None  # the handler must then be importable as installed (e.g. an editable install)
        return (self._template.path.parent / str(asset)).resolve()

    def _event_source_mapping(self, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
        self._check(
            resource,
            p,
            {
                "FunctionName",
                "EventSourceArn",
                "StartingPosition",
                "BatchSize",
                "MaximumBatchingWindowInSeconds",
                "MaximumRetryAttempts",
                "MaximumRecordAgeInSeconds",
                "BisectBatchOnFunctionError",
                "FunctionResponseTypes",
                "FilterCriteria",
                "DestinationConfig",
                "Enabled",
                # Lambda keeps per-key order whatever the factor; processing a shard serially is one of
                # the orders it may produce.
                "ParallelizationFactor",
            },
            {"Tags", "MetricsConfig"},
        )
        source = str(p["EventSourceArn"])
        if ":dynamodb:" not in source or "/stream/" not in source:
            raise UnsupportedResourceError(
                f"{resource.logical_id}: only DynamoDB stream mappings run locally"
            )
        if "TumblingWindowInSeconds" in p:
            raise UnsupportedResourceError(f"{resource.logical_id}: tumbling windows are not emulated")
        _validate_stream_mapping(resource, p)
        function_arn = self._function_arn(str(p["FunctionName"]))
        destination = ((p.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
        settings = MappingSettings(
            function_arn=function_arn,
            stream_arn=source,
            batch_size=int(p.get("BatchSize", 100)),
            maximum_batching_window_s=float(p.get("MaximumBatchingWindowInSeconds", 0)),
            maximum_retry_attempts=int(p.get("MaximumRetryAttempts", NO_LIMIT)),
            maximum_record_age_s=int(p.get("MaximumRecordAgeInSeconds", NO_LIMIT)),
            bisect_batch_on_function_error=_cfn_bool(p.get("BisectBatchOnFunctionError", False)),
            report_batch_item_failures="ReportBatchItemFailures" in p.get("FunctionResponseTypes", []),
            filters=FilterCriteria.from_template(p.get("FilterCriteria")),
            on_failure_destination_arn=destination,
            retry_delay_s=self._retry_delay_s,
        )
        self.stack.mappings.append(
            MappingSpec(
                logical_id=resource.logical_id,
                function_arn=function_arn,
                settings=settings,
                starting_position=str(p["StartingPosition"]),
                enabled=_cfn_bool(p.get("Enabled", True)),
            )
        )
        uuid = hashlib.sha256(resource.logical_id.encode()).hexdigest()[:32]
        return ResolvedResource(ref=uuid, attributes={"Id": uuid})

    def _function_arn(self, name_or_arn: str) -> str:
        if name_or_arn.startswith("arn:"):
            return name_or_arn
        return self._arn("lambda", f"function:{name_or_arn}")

    # --- API Gateway HTTP API ------------------------------------------------------------------------

    def _http_api(self, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
        self._check(resource, p, {"Name", "ProtocolType", "Description"}, {"Tags", "CorsConfiguration"})
        if p.get("ProtocolType") != "HTTP":
            raise UnsupportedResourceError(f"{resource.logical_id}: only HTTP APIs are served locally")
        api_id = hashlib.sha256(resource.logical_id.encode()).hexdigest()[:10]
        endpoint = self._api_endpoint(api_id)
        return ResolvedResource(ref=api_id, attributes={"ApiId": api_id, "ApiEndpoint": endpoint})

    def _route(self, resource: Resource, p: dict[str, Any]) -> ResolvedResource:
        self._check(resource, p, {"ApiId", "RouteKey", "Target", "AuthorizationType"}, set())
        authorization = p.get("AuthorizationType", "NONE")
        # IAM is not enforced locally (as for moto's services), so an AWS_IAM route takes unsigned requests:
        # that is what lets `curl` call the local API. JWT and Lambda authorizers would need emulating.
        if authorization not in {"NONE", "AWS_IAM"}:
            raise UnsupportedResourceError(
                f"{resource.logical_id}: {authorization} authorizers are not emulated"
            )
        target = str(p.get("Target", ""))
        integration_id = target.removeprefix("integrations/")
        integration = self._integration(integration_id)
        api_logical_id = next(
            (lid for lid, (_, res) in self.stack.resources.items() if res.ref == p["ApiId"]), str(p["ApiId"])
        )
        self.stack.routes.append(RouteSpec(api_logical_id, p["RouteKey"], integration))
        return ResolvedResource(ref=physical_name(self._stack, resource.logical_id, 32))

    def _integration(self, integration_ref: str) -> str:
        """The function ARN behind an integration (routes name it by the Ref CloudFormation gives it)."""
        for logical_id, (kind, resolved) in self.stack.resources.items():
            if kind == "AWS::ApiGatewayV2::Integration" and resolved.ref == integration_ref:
                raw = self._resolver.resolve(dict(self._template.resources[logical_id].properties))
                if raw.get("IntegrationType") != "AWS_PROXY" or str(raw.get("PayloadFormatVersion")) != "2.0":
                    raise UnsupportedResourceError(
                        f"{logical_id}: only AWS_PROXY integrations (payload format 2.0) are served locally"
                    )
                uri = str(raw["IntegrationUri"])
                return (
                    uri.split("/functions/", 1)[1].removesuffix("/invocations")
                    if "/functions/" in uri
                    else uri
                )
        raise UnsupportedResourceError(f"route target integrations/{integration_ref} is not in the template")


# What AWS accepts on a DynamoDB stream mapping
# ("Lambda parameters for Amazon DynamoDB event source mappings"):
# a value outside these ranges would be refused by CloudFormation, so the runtime refuses it too rather than
# run something AWS never would (BatchSize 0, for one, would invoke the function with empty batches forever).
_MAPPING_RANGES: dict[str, tuple[int, int]] = {
    "BatchSize": (1, 10_000),
    "MaximumBatchingWindowInSeconds": (0, 300),
    "MaximumRetryAttempts": (-1, 10_000),
    "MaximumRecordAgeInSeconds": (-1, 604_800),
    "ParallelizationFactor": (1, 10),
}


def _validate_stream_mapping(resource: Resource, p: Mapping[str, Any]) -> None:
    where = f"{resource.logical_id} (AWS::Lambda::EventSourceMapping)"
    # Required for DynamoDB streams, and only these two: no silent default.
    if p.get("StartingPosition") not in {"TRIM_HORIZON", "LATEST"}:
        raise UnsupportedResourceError(
            f"{where}: StartingPosition must be TRIM_HORIZON or LATEST for a DynamoDB stream, "
            f"got {p.get('StartingPosition')!r}"
        )
    for key, (low, high) in _MAPPING_RANGES.items():
        if key not in p:
            continue
        try:
            value = int(p[key])
        except (TypeError, ValueError):
            value = None
        if value is None or not low <= value <= high:
            raise UnsupportedResourceError(f"{where}: {key} {p[key]!r} is outside what AWS accepts")
    for key in ("BisectBatchOnFunctionError", "Enabled"):
        if key in p and (not isinstance(p[key], bool | str) or p[key] not in _CFN_BOOLEANS):
            raise UnsupportedResourceError(f"{where}: {key} {p[key]!r} is not a boolean")
    unknown_types = set(p.get("FunctionResponseTypes", [])) - {"ReportBatchItemFailures"}
    if unknown_types:
        raise UnsupportedResourceError(f"{where}: unknown FunctionResponseTypes {sorted(unknown_types)}")


# CloudFormation takes booleans as JSON booleans or as the strings "true" and "false" (any case).
_CFN_BOOLEANS: dict[object, bool] = {
    True: True,
    False: False,
    "true": True,
    "false": False,
    "True": True,
    "False": False,
    "TRUE": True,
    "FALSE": False,
}


def _cfn_bool(value: object) -> bool:
    """A template boolean; `bool("false")` would be True, which is why this exists."""
    return _CFN_BOOLEANS[value]


def _attribute_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _json_text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _target_input(target: Mapping[str, Any]) -> Any:
    if "Input" in target:
        return json.loads(target["Input"])
    return None


def _rule_target(target: Mapping[str, Any]) -> dict[str, Any]:
    unsupported = set(target) - {
        "Id",
        "Arn",
        "Input",
        "InputPath",
        "InputTransformer",
        "SqsParameters",
        "DeadLetterConfig",
        "RetryPolicy",
    }
    if unsupported:
        raise UnsupportedResourceError(
            f"rule target {target.get('Id')}: unsupported fields {sorted(unsupported)}"
        )
    return {key: value for key, value in target.items() if key not in {"DeadLetterConfig", "RetryPolicy"}}
