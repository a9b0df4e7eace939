"""What every function shares: runtime, architecture, packaging without Docker (an asset of the
function's vendored packages), the Powertools layer, tracing, a log group with
retention and a role that can only write to it."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import cast

from aws_cdk import (
    CfnCondition,
    CfnDynamicReference,
    CfnDynamicReferenceService,
    CfnParameter,
    Duration,
    Fn,
    RemovalPolicy,
    Stack,
)
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from outbox_cdk import constants as c
from outbox_cdk.assets import PROJECT_PACKAGES, function_code
from outbox_cdk.checkov import AWS_KEY_REASONS, Invocation, acknowledge_checkov, acknowledge_function_findings
from outbox_cdk.nag import CFN_VALIDATE, acknowledge

RUNTIME = lambda_.Runtime.PYTHON_3_13
ARCHITECTURE = lambda_.Architecture.ARM_64

# AWS's own Powertools accounts only (its install docs list one per partition, two in GovCloud), and the
# python3.13 arm64 build these functions run: a layer runs as the functions' code, with their roles. A layer
# of your own goes in through the constructs' `powertools_layer` argument, reviewed in code.
POWERTOOLS_ACCOUNTS = {
    "aws": ("017000801446",),
    "aws-cn": ("498634801083",),
    "aws-us-gov": ("165087284144", "165093116878"),
}
_LAYER_ARN_PATTERN = "^$|" + "|".join(
    rf"^arn:{partition}:lambda:[a-z0-9-]+:{account}:layer:AWSLambdaPowertoolsPythonV3-python313-arm64:[0-9]+$"
    for partition, accounts in POWERTOOLS_ACCOUNTS.items()
    for account in accounts
)


@dataclass(frozen=True)
class FunctionSettings:
    """Sizing of one function; every field has a safe default."""

    memory_mb: int = c.FUNCTION_MEMORY_MB
    timeout: Duration = field(default_factory=lambda: Duration.seconds(c.FUNCTION_TIMEOUT_SECONDS))
    # None leaves the function on the account's unreserved pool.
    reserved_concurrency: int | None = None
    log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH
    log_removal_policy: RemovalPolicy = RemovalPolicy.DESTROY
    # The key of the function's log group and of its environment variables. None: CloudWatch Logs' and
    # Lambda's own keys. A customer-managed key must let CloudWatch Logs use it (outbox_cdk.encryption's
    # OutboxKey does); the role needs nothing for it: Lambda decrypts the environment through a grant it
    # creates for the role when the function is deployed.
    encryption_key: kms.IKey | None = None


class PowertoolsLayer(Construct):
    """The public Powertools layer, pinned to one release.

    By default the layer version ARN comes from AWS's public SSM parameter for that release,
    resolved by CloudFormation at deploy time (no account needed at synth). The
    ``PowertoolsLayerArn`` stack parameter overrides it with an explicit ARN.
    """

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        # Parameter and condition live on the stack so their logical IDs stay readable and stable.
        override = CfnParameter(
            stack,
            c.POWERTOOLS_LAYER_ARN_PARAMETER,
            type="String",
            default="",
            allowed_pattern=_LAYER_ARN_PATTERN,
            description=(
                "Optional Powertools layer version ARN. Empty: resolve the pinned release from "
                f"the public SSM parameter {c.POWERTOOLS_LAYER_SSM_PARAMETER}"
            ),
        )
        use_pinned = CfnCondition(
            stack,
            "UsePinnedPowertoolsLayer",
            expression=Fn.condition_equals(override.value_as_string, ""),
        )
        pinned = CfnDynamicReference(CfnDynamicReferenceService.SSM, c.POWERTOOLS_LAYER_SSM_PARAMETER)
        arn = Fn.condition_if(use_pinned.logical_id, pinned.to_string(), override.value_as_string)
        self.layer = lambda_.LayerVersion.from_layer_version_arn(self, "Layer", arn.to_string())


def powertools_layer(scope: Construct) -> lambda_.ILayerVersion:
    """The stack's single Powertools layer (created on first use)."""
    stack = Stack.of(scope)
    existing = stack.node.try_find_child("PowertoolsLayer")
    if existing is None:
        existing = PowertoolsLayer(stack, "PowertoolsLayer")
    return cast(PowertoolsLayer, existing).layer


class PythonFunction(Construct):
    """A Python 3.13 arm64 function with tracing, a retained log group and its own minimal role.

    The role gets no managed policy: it may write only to this function's log group, plus the
    X-Ray calls active tracing needs; each capability grants the rest explicitly.

    The code is the asset of the packages in ``vendored`` (`outbox_cdk.assets`), which must hold the
    handler's module. Pass ``code`` to ship something else.

    ``invocation`` (how the function is invoked) acknowledges the checkov findings that do not apply to such a
    function (`outbox_cdk.checkov`); without it they are yours to decide.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        handler: str,
        description: str,
        environment: dict[str, str],
        settings: FunctionSettings,
        layer: lambda_.ILayerVersion | None = None,
        code: lambda_.Code | None = None,
        vendored: Collection[str] = PROJECT_PACKAGES,
        invocation: Invocation | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.log_group = logs.LogGroup(
            self,
            "LogGroup",
            retention=settings.log_retention,
            removal_policy=settings.log_removal_policy,
            encryption_key=settings.encryption_key,
        )
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"Execution role of: {description}",
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=list(c.LOG_WRITE_ACTIONS),
                resources=[self.log_group.log_group_arn],
            )
        )
        layer = layer or powertools_layer(self)
        self.function = lambda_.Function(
            self,
            "Function",
            description=description,
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler=handler,
            code=code or function_code(self, handler, vendored),
            layers=[layer],
            environment=environment,
            memory_size=settings.memory_mb,
            timeout=settings.timeout,
            reserved_concurrent_executions=settings.reserved_concurrency,
            tracing=lambda_.Tracing.ACTIVE,
            log_group=self.log_group,
            role=self.role,
            environment_encryption=settings.encryption_key,
        )
        if environment and settings.encryption_key is None:
            acknowledge_checkov(self.function, *AWS_KEY_REASONS["AWS::Lambda::Function"])
        if invocation is not None:
            acknowledge_function_findings(
                self.function, invocation, reserved_concurrency=settings.reserved_concurrency
            )
        # The log statement uses the log group's GetAtt Arn (it covers the group's streams);
        # X-Ray's two write actions, added by active tracing, have no resource-level permissions.
        acknowledge(
            self.role,
            "AwsSolutions-IAM5[Resource::*]",
            "xray:PutTraceSegments and xray:PutTelemetryRecords support no resource-level "
            "permissions; AWS requires Resource * for active tracing.",
        )
        acknowledge(
            self.function,
            "AwsSolutions-L1",
            "Pinned to python3.13 on purpose: the Powertools layer is built per Python version "
            "(python313 in its name), so runtime and layer move together in one reviewed change "
            "instead of the runtime silently following the newest release.",
        )
        if layer is powertools_layer(self):
            # CDK's template validator checks both branches of the layer's Fn::If with the
            # parameter's empty default; CloudFormation takes the parameter branch only when it is
            # non-empty, and then AllowedPattern has already checked it is a layer version ARN.
            for rule in ("F3031", "F3033"):
                acknowledge(
                    self.function,
                    rule,
                    "False positive: the empty PowertoolsLayerArn default selects the pinned SSM "
                    "branch of Fn::If; the parameter branch only runs with a validated ARN.",
                    plugin=CFN_VALIDATE,
                )
