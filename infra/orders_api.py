"""The Orders API: an HTTP API (payload v2) in front of one Lambda function."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, cast

from aws_cdk import Duration
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra import constants as c
from orders_api.config import ENV_ORDERS_TABLE_NAME, ENV_OUTBOX_TABLE_NAME
from outbox import metrics
from outbox_cdk import constants as cdk
from outbox_cdk.checkov import Invocation, acknowledge_aws_apis_only
from outbox_cdk.functions import FunctionSettings, PythonFunction
from outbox_cdk.grants import grant_key_use
from outbox_cdk.nag import acknowledge

# One JSON line per request: enough to trace a request to the function's logs by requestId.
_ACCESS_LOG_FORMAT = json.dumps(
    {
        "requestId": "$context.requestId",
        "ip": "$context.identity.sourceIp",
        "requestTime": "$context.requestTime",
        "routeKey": "$context.routeKey",
        "status": "$context.status",
        "responseLength": "$context.responseLength",
        "integrationError": "$context.integrationErrorMessage",
    }
)


def _default_api_function() -> FunctionSettings:
    return FunctionSettings(
        memory_mb=c.ORDERS_API_MEMORY_MB,
        timeout=Duration.seconds(c.ORDERS_API_TIMEOUT_SECONDS),
        reserved_concurrency=c.ORDERS_API_RESERVED_CONCURRENCY,
    )


@dataclass(frozen=True)
class OrdersApiSettings:
    """Tunables of the Orders API. By default every route requires SigV4 (IAM) auth."""

    function: FunctionSettings = field(default_factory=_default_api_function)
    # None: IAM authorization. Pass a JWT/Lambda authorizer to use your identity provider.
    authorizer: apigwv2.IHttpRouteAuthorizer | None = None
    # Explicit opt-out for throwaway demo stacks only: anyone on the internet can then write orders.
    allow_unauthenticated: bool = False
    throttle_rate_limit: int = c.API_THROTTLE_RATE_LIMIT
    throttle_burst_limit: int = c.API_THROTTLE_BURST_LIMIT
    access_log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH


class OrdersApi(Construct):
    """HTTP API routes -> Orders function, which writes an order and its outbox row in one transaction.

    The function may only: GetItem and PutItem on Orders (its TransactWriteItems is authorized per
    item, and it only Puts) and PutItem on Outbox; with customer-managed keys, use each table's key for
    what DynamoDB does with it on the function's behalf.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        orders_table: dynamodb.ITable,
        outbox_table: dynamodb.ITable,
        settings: OrdersApiSettings | None = None,
        powertools_layer: lambda_.ILayerVersion | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        settings = settings or OrdersApiSettings()
        self._fn = PythonFunction(
            self,
            "Handler",
            handler=c.ORDERS_API_HANDLER,
            description="Orders API: writes orders and their outbox events transactionally",
            environment={
                ENV_ORDERS_TABLE_NAME: orders_table.table_name,
                ENV_OUTBOX_TABLE_NAME: outbox_table.table_name,
                cdk.ENV_POWERTOOLS_SERVICE_NAME: c.ORDERS_API_SERVICE,
                cdk.ENV_POWERTOOLS_METRICS_NAMESPACE: metrics.NAMESPACE,
                cdk.ENV_POWERTOOLS_LOG_LEVEL: cdk.LOG_LEVEL,
            },
            settings=settings.function,
            layer=powertools_layer,
            vendored=c.SAMPLE_PACKAGES,
            invocation=Invocation.HTTP_API,
        )
        self.function: lambda_.Function = self._fn.function
        acknowledge_aws_apis_only(self.function)
        self.role: iam.Role = self._fn.role
        # Explicit statements: table.grant_*() would add index ARNs and actions the API never calls.
        # Each statement is held to the partition keys the API writes (dynamodb:LeadingKeys): a compromised
        # API function can forge neither another aggregate type's events nor other items of the Orders table.
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=list(c.ORDERS_API_ORDERS_TABLE_ACTIONS),
                resources=[orders_table.table_arn],
                conditions=_leading_keys(c.ORDERS_TABLE_KEY_PATTERNS),
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=list(c.ORDERS_API_OUTBOX_TABLE_ACTIONS),
                resources=[outbox_table.table_arn],
                conditions=_leading_keys(c.OUTBOX_TABLE_KEY_PATTERNS),
            )
        )
        # Customer-managed keys: DynamoDB encrypts and decrypts the items with each table's key.
        for table in (orders_table, outbox_table):
            grant_key_use(self.role, table.encryption_key, cdk.TABLE_KEY_ACTIONS, via=cdk.VIA_DYNAMODB)

        self.http_api = apigwv2.HttpApi(
            self,
            "HttpApi",
            description="Orders API (transactional outbox sample)",
            create_default_stage=False,
        )
        self.stage = apigwv2.HttpStage(
            self,
            "DefaultStage",
            http_api=self.http_api,
            stage_name="$default",
            auto_deploy=True,
            # Stage throttling bounds the write rate into both tables before Lambda is invoked.
            throttle=apigwv2.ThrottleSettings(
                rate_limit=settings.throttle_rate_limit, burst_limit=settings.throttle_burst_limit
            ),
        )
        # Kept under the function's key, if it has one.
        self.access_log_group = logs.LogGroup(
            self,
            "AccessLogs",
            retention=settings.access_log_retention,
            encryption_key=settings.function.encryption_key,
        )
        # HttpStage takes access log settings only as a jsii interface; the L1 property is plain data.
        cfn_stage = cast(apigwv2.CfnStage, self.stage.node.default_child)
        cfn_stage.access_log_settings = apigwv2.CfnStage.AccessLogSettingsProperty(
            destination_arn=self.access_log_group.log_group_arn, format=_ACCESS_LOG_FORMAT
        )

        authorizer = self._authorizer(settings)
        integration = integrations.HttpLambdaIntegration("OrdersIntegration", self.function)
        for method, path in c.ORDERS_API_ROUTES:
            routes = self.http_api.add_routes(
                path=path,
                methods=[apigwv2.HttpMethod(method)],
                integration=integration,
                authorizer=authorizer,
            )
            if settings.allow_unauthenticated:
                for route in routes:
                    acknowledge(
                        route,
                        "AwsSolutions-APIG4",
                        "The deployer set allow_unauthenticated=True for a throwaway demo stack; "
                        "the default (IAM authorization) applies everywhere else.",
                    )
        self.url: str = self.stage.url

    @staticmethod
    def _authorizer(settings: OrdersApiSettings) -> apigwv2.IHttpRouteAuthorizer:
        if settings.allow_unauthenticated:
            return apigwv2.HttpNoneAuthorizer()
        return settings.authorizer or authorizers.HttpIamAuthorizer()


def _leading_keys(patterns: tuple[str, ...]) -> dict[str, Any]:
    """Every item the request touches has a partition key matching one of `patterns`."""
    return {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": list(patterns)}}
