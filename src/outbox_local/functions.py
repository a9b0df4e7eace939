"""Hosting the template's Lambda functions: the registry, and the invoker that runs them as Lambda would.

Each invocation runs the real handler with a Lambda-like context and the function's environment: template
variables resolved to the local resources, what the Lambda runtime sets, and what points boto3 at the moto
server, never a developer's own `AWS_*` settings. Two ways to run:

- in worker processes (`max_environments`, what `outbox local up` and the demo use): each function's
  invocations run concurrently in execution environments of their own (`outbox_local.execution_environments`);
- in this process, one invocation at a time for all functions (the constructor's default): what handler
  callables, module inspection and fake clocks need (`outbox_local.in_process`). A callable cannot cross to
  another process, so a function given as one always runs here.

What a function prints reaches the runtime's stdout; with an `on_output` listener the host also hands over
what each invocation printed, as Lambda hands it to CloudWatch Logs (EMF metrics: `outbox_local.emf_metrics`).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from outbox_local.errors import FunctionNotFoundError, RuntimeStateError
from outbox_local.execution_environments import ExecutionEnvironments
from outbox_local.function_spec import (
    FunctionSpec,
    Handler,
    LambdaContext,
    function_variables,
    invocation_trace_header,
)
from outbox_local.in_process import InProcessFunctions
from outbox_local.invocation import REGION_CUT_ERROR, THROTTLED, InvocationResult, Outcome

__all__ = ["FunctionHost", "FunctionSpec", "Handler", "LambdaContext", "OutputListener"]

logger = logging.getLogger("outbox_local.functions")

OutputListener = Callable[[str, str], None]
"""Called after each invocation with the function's name and what it printed on stdout."""
InvocationListener = Callable[[str, str, Any, Outcome], None]
"""Called after each invocation with the function's name, the invocation's X-Ray header, its event and its
outcome (what it returned and printed)."""


class FunctionHost:
    """Registry and invoker of the template's functions."""

    def __init__(
        self,
        base_environment: Mapping[str, str],
        overrides: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        on_output: OutputListener | None = None,
        *,
        max_environments: int | None = None,
        on_invocation: InvocationListener | None = None,
        region_cut: Callable[[str], bool] | None = None,
    ) -> None:
        """`max_environments`: run functions in worker processes, at most that many at once per function
        (fewer if its ReservedConcurrentExecutions says so); None: in this process, one at a time."""
        self._base_environment = dict(base_environment)
        self._overrides = dict(overrides or {})
        self._on_output = on_output
        self._on_invocation = on_invocation
        self._region_cut = region_cut
        """Whether a region is cut off (`LocalRuntime.cut_region`): its functions are not invoked."""
        self._functions: dict[str, FunctionSpec] = {}
        self.errors: Counter[str] = Counter()
        """Failed invocations by function name, as Lambda's `Errors` metric counts them."""
        self.throttles: Counter[str] = Counter()
        """Invocations Lambda refused, by function name (its `Throttles` metric)."""
        self._errors_lock = threading.Lock()
        self._stdout_lock = threading.Lock()
        self._in_process = InProcessFunctions(
            self._functions.values,
            self._base_environment,
            self._overrides,
            clock,
            keep_output=on_output is not None or on_invocation is not None,
        )
        self.environments = (
            ExecutionEnvironments(self._process_environment, max_per_function=max_environments, clock=clock)
            if max_environments is not None
            else None
        )
        """The worker processes, when functions run in them."""

    def open(self) -> None:
        self._in_process.open()

    def close(self) -> None:
        if self.environments is not None:
            self.environments.close()
        self._in_process.close()

    def register(self, spec: FunctionSpec) -> None:
        """Host the function by ARN (two stacks may share logical ids); a new spec replaces the old one."""
        self._functions[spec.arn] = spec

    def unregister(self, arn: str) -> None:
        """Host the function no more, and stop its idle worker processes."""
        spec = self._functions.pop(arn, None)
        if spec is not None and self.environments is not None:
            self.environments.retire(spec.name)

    @property
    def functions(self) -> list[FunctionSpec]:
        return list(self._functions.values())

    def find(self, name_or_arn: str) -> FunctionSpec:
        for spec in self._functions.values():
            if name_or_arn in {spec.logical_id, spec.name, spec.arn}:
                return spec
            if name_or_arn.startswith(f"{spec.arn}:"):  # a qualified ARN (version or alias)
                return spec
        raise FunctionNotFoundError(f"no function {name_or_arn!r} in the template")

    def modules_of(self, name_or_arn: str) -> dict[str, str | None]:
        """The modules a function run in process imported from the shipped packages, and their files."""
        spec = self.find(name_or_arn)
        if self._in_worker(spec):
            raise RuntimeStateError(f"{spec.name} runs in worker processes: its modules are theirs")
        return self._in_process.modules_of(spec)

    def invoke(self, name_or_arn: str, event: Any) -> InvocationResult:
        """Invoke like Lambda's synchronous Invoke: errors come back in the result, never raised."""
        spec = self.find(name_or_arn)
        if spec.reserved_concurrency == 0:
            # Reserved concurrency 0 is how AWS turns a function off: every invocation is throttled, and a
            # throttle is not one of the function's `Errors` (Lambda counts it in `Throttles`).
            with self._errors_lock:
                self.throttles[spec.name] += 1
            return THROTTLED
        region = spec.region or self._base_environment.get("AWS_REGION", "")
        if self._region_cut is not None and self._region_cut(region):
            return InvocationResult(
                error_type=REGION_CUT_ERROR,
                error_message=f"{spec.name} was not invoked: its region {region} is cut off (a local fault)",
            )
        # Each invocation gets its own X-Ray header, as the Lambda runtime sets one per invocation.
        trace_header = invocation_trace_header()
        if self.environments is not None and self._in_worker(spec):
            outcome = self.environments.invoke(spec, event, trace_header)
            self._echo(outcome.output)
        else:
            # Its output reached stdout as it was printed.
            outcome = self._in_process.invoke(spec, event, trace_header)
        if outcome.result.failed:
            with self._errors_lock:
                self.errors[spec.name] += 1
        self._hand_over_output(spec, outcome)
        if self._on_invocation is not None:
            try:
                self._on_invocation(spec.name, trace_header, event, outcome)
            except Exception:  # what watches invocations must never fail one
                logger.warning("the invocation of %s could not be recorded", spec.name, exc_info=True)
        return outcome.result

    def concurrency(self, name_or_arn: str) -> int:
        """How many invocations of the function can run at once: its environments' limit in worker processes
        (`ReservedConcurrentExecutions` or `max_environments`, the smaller), 1 in process."""
        spec = self.find(name_or_arn)
        if self.environments is None or not self._in_worker(spec):
            return 1
        return self.environments.limit(spec)

    def _in_worker(self, spec: FunctionSpec) -> bool:
        return self.environments is not None and spec.handler_override is None

    def _process_environment(self, spec: FunctionSpec) -> dict[str, str]:
        """A worker's whole environment: this process's without any `AWS_*` variable (a developer's profile
        or credentials), then the function's."""
        inherited = {key: value for key, value in os.environ.items() if not key.startswith("AWS_")}
        return {**inherited, **function_variables(spec, self._base_environment, self._overrides)}

    def _echo(self, output: str) -> None:
        """A worker's output reaches this process's stdout, whole (invocations run concurrently)."""
        if not output:
            return
        with self._stdout_lock:
            try:
                sys.stdout.write(output)
                sys.stdout.flush()
            except (OSError, ValueError):  # stdout closed: the output still reaches the listener
                pass

    def _hand_over_output(self, spec: FunctionSpec, outcome: Outcome) -> None:
        if self._on_output is None or not outcome.output:
            return
        try:
            self._on_output(spec.name, outcome.output)
        except Exception:  # what reads the output must never fail the invocation
            logger.warning("the output of %s could not be handed over", spec.name, exc_info=True)
