"""What one invocation of a hosted function returned: its payload, or the error Lambda would report, and what
it printed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class InvocationResult:
    """What the function returned (`payload`) or that it raised (`error_type` and `error_message`)."""

    payload: Any = None
    error_type: str | None = None
    error_message: str | None = None

    @property
    def failed(self) -> bool:
        return self.error_type is not None

    @property
    def throttled(self) -> bool:
        """Lambda refused the invocation (the function never ran): not a function error."""
        return self.error_type == THROTTLED_ERROR


THROTTLED_ERROR = "TooManyRequestsException"
THROTTLED = InvocationResult(
    error_type=THROTTLED_ERROR,
    error_message="Rate Exceeded. (ReservedFunctionConcurrentInvocationLimitExceeded)",
)
"""What Lambda answers an invocation of a function whose ReservedConcurrentExecutions is 0."""

REGION_CUT_ERROR = "RegionCutOff"
"""A local fault, no AWS error: the function's region is cut off (`LocalRuntime.cut_region`), so nothing of it
runs; what invokes it from another region gets this error."""


@dataclass(frozen=True)
class Outcome:
    """An invocation's result, and what the function printed meanwhile (its log: CloudWatch Logs' part)."""

    result: InvocationResult
    output: str = ""
