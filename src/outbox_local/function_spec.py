"""What a hosted function is (its spec), the context its handler gets, and the environment it runs with:
shared by the two ways the runtime runs functions (`outbox_local.in_process`,
`outbox_local.execution_environments`)."""

from __future__ import annotations

import secrets
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Handler = Callable[[Any, Any], Any]


@dataclass(frozen=True)
class FunctionSpec:
    logical_id: str
    name: str
    arn: str
    handler: str
    code_root: Path | None
    timeout_s: float = 3.0
    memory_mb: int = 128
    environment: Mapping[str, str] = field(default_factory=dict)
    handler_override: Handler | None = None
    """Tests host plain Python callables under a template function's name."""
    reserved_concurrency: int | None = None
    """`ReservedConcurrentExecutions`: at most this many environments run the function at once; 0: every
    invocation is throttled, as AWS does."""
    kms_key_arn: str | None = None
    """`KmsKeyArn`: the key Lambda encrypts the function's environment variables with at rest (checked to
    exist and be enabled at provisioning); the variables reach the handler as they are, as on AWS."""
    region: str | None = None
    """The region of the function's stack (its `AWS_REGION`, as Lambda sets it); None: the runtime's."""


class LambdaContext:
    """The attributes and method of the Python Lambda runtime's context object."""

    def __init__(self, spec: FunctionSpec, clock: Callable[[], float]) -> None:
        self.function_name = spec.name
        self.function_version = "$LATEST"
        self.invoked_function_arn = spec.arn
        self.memory_limit_in_mb = spec.memory_mb
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{spec.name}"
        self.log_stream_name = f"{time.strftime('%Y/%m/%d')}/[$LATEST]{uuid.uuid4().hex}"
        self.identity = None
        self.client_context = None
        self._clock = clock
        self._deadline = clock() + spec.timeout_s

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - self._clock()) * 1000))

    def fields(self) -> dict[str, Any]:
        """The attributes, for a worker process to rebuild the context (the deadline travels apart)."""
        return {
            "function_name": self.function_name,
            "function_version": self.function_version,
            "invoked_function_arn": self.invoked_function_arn,
            "memory_limit_in_mb": self.memory_limit_in_mb,
            "aws_request_id": self.aws_request_id,
            "log_group_name": self.log_group_name,
            "log_stream_name": self.log_stream_name,
        }


TRACE_VARIABLE = "_X_AMZN_TRACE_ID"
"""Where the Lambda runtime puts each invocation's X-Ray header."""


def invocation_trace_header() -> str:
    """A new X-Ray header for one invocation, as Lambda starts a trace for a request that carries none
    (`Sampled=0`: locally no trace is recorded, but its id still ties the invocation's logs and rows
    together)."""
    return f"Root=1-{int(time.time()):08x}-{secrets.token_hex(12)};Parent={secrets.token_hex(8)};Sampled=0"


def function_variables(
    spec: FunctionSpec, base: Mapping[str, str], overrides: Mapping[str, str]
) -> dict[str, str]:
    """The variables a function runs with: the runtime's (local endpoint and credentials), what the Lambda
    runtime sets, the template's, then the runtime's overrides."""
    return {
        **base,
        **({"AWS_REGION": spec.region, "AWS_DEFAULT_REGION": spec.region} if spec.region else {}),
        "AWS_LAMBDA_FUNCTION_NAME": spec.name,
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(spec.memory_mb),
        "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{spec.name}",
        "_HANDLER": spec.handler,
        **({"LAMBDA_TASK_ROOT": str(spec.code_root)} if spec.code_root else {}),
        **spec.environment,
        **overrides,
    }
