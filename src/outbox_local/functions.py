"""Hosting the template's Lambda functions in this process.

Each invocation runs the real handler with the function's environment (template variables resolved to the
local resources, plus what the Lambda runtime sets and what points boto3 at the moto server) and a
Lambda-like context. Handlers read configuration from `os.environ`, so invocations are serialized by one lock
and the environment is swapped around each call; every other `AWS_*` variable of the host process is hidden
meanwhile, so a developer's real profile or credentials can never reach a handler.

Each function runs its own code, as Lambda runs each function's own asset: during its invocation, its code
root comes first on `sys.path` and `sys.modules` holds its own copies of the packages the functions ship
(kept between its invocations, as a warm execution environment keeps them); the host's copies and the other
functions' are put back afterwards. Two functions that ship different subsets of one package each see their
own.

What a function prints still reaches the process's stdout as before; with an `on_output` listener the host
also keeps a copy of what the invoking thread printed during the invocation and hands it over afterwards, as
Lambda hands a function's output to CloudWatch Logs (the runtime turns its EMF metric documents into
CloudWatch metrics: `outbox_local.emf_metrics`).
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, TextIO, cast

from outbox_local.errors import FunctionNotFoundError
from outbox_local.invocation import InvocationResult

logger = logging.getLogger("outbox_local.functions")

Handler = Callable[[Any, Any], Any]
OutputListener = Callable[[str, str], None]
"""Called after each invocation with the function's name and what it printed on stdout."""


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


class FunctionHost:
    """Registry and invoker of the template's functions; one invocation at a time.

    A host is one execution environment per function, as Lambda gives each new deployment: each function's
    modules are its own, imported fresh from its code root on its first invocation (so its cached clients
    point at THIS runtime's endpoint) and kept for the next; the process's own modules are untouched.
    """

    def __init__(
        self,
        base_environment: Mapping[str, str],
        overrides: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        on_output: OutputListener | None = None,
    ) -> None:
        self._base_environment = dict(base_environment)
        self._overrides = dict(overrides or {})
        self._clock = clock
        self._on_output = on_output
        self._functions: dict[str, FunctionSpec] = {}
        self.errors: Counter[str] = Counter()
        """Failed invocations by function name, as Lambda's `Errors` metric counts them."""
        self._handlers: dict[str, Handler] = {}
        self._modules: dict[str, dict[str, ModuleType]] = {}
        """Logical id -> that function's own imported modules, between its invocations."""
        self._lock = threading.RLock()
        self._wrote_bytecode = not sys.dont_write_bytecode

    def open(self) -> None:
        with self._lock:
            # Handlers import from their assets in cdk.out, which `cdk deploy` zips as they are: compiled
            # bytecode written there would ship to Lambda.
            self._wrote_bytecode = not sys.dont_write_bytecode
            sys.dont_write_bytecode = True

    def close(self) -> None:
        with self._lock:
            sys.dont_write_bytecode = not self._wrote_bytecode
            self._handlers.clear()
            self._modules.clear()

    def modules_of(self, name_or_arn: str) -> dict[str, str | None]:
        """The modules a function imported from the shipped packages, and the files they came from."""
        spec = self.find(name_or_arn)
        with self._lock:
            return {
                name: getattr(module, "__file__", None)
                for name, module in self._modules.get(spec.logical_id, {}).items()
            }

    def _packages(self) -> set[str]:
        """Top-level modules of the functions' code: handler modules and what their code roots hold."""
        names = {_top(spec.handler) for spec in self._functions.values() if spec.handler_override is None}
        for root in {spec.code_root for spec in self._functions.values() if spec.code_root is not None}:
            if root.is_dir():
                names.update(
                    entry.stem for entry in root.iterdir() if entry.suffix == ".py" or entry.is_dir()
                )
        return {name for name in names if name and not name.startswith((".", "_"))}

    def register(self, spec: FunctionSpec) -> None:
        self._functions[spec.logical_id] = spec

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

    def invoke(self, name_or_arn: str, event: Any) -> InvocationResult:
        """Invoke like Lambda's synchronous Invoke: errors come back in the result, never raised."""
        spec = self.find(name_or_arn)
        with self._lock:
            result = self._run_capturing(spec, event)
            if result.failed:
                self.errors[spec.name] += 1
            return result

    def _run_capturing(self, spec: FunctionSpec, event: Any) -> InvocationResult:
        if self._on_output is None:
            return self._run(spec, event)
        tee = _StdoutTee(sys.stdout)
        installed = sys.stdout = cast(TextIO, tee)
        try:
            return self._run(spec, event)
        finally:
            if sys.stdout is installed:  # not if something else replaced it meanwhile: theirs stays
                sys.stdout = tee.target
            self._hand_over_output(spec, tee.release())

    def _hand_over_output(self, spec: FunctionSpec, output: str) -> None:
        if self._on_output is None or not output:
            return
        try:
            self._on_output(spec.name, output)
        except Exception:  # what reads the output must never fail the invocation
            logger.warning("the output of %s could not be handed over", spec.name, exc_info=True)

    def _run(self, spec: FunctionSpec, event: Any) -> InvocationResult:
        with self._environment(spec), self._own_modules(spec):
            context = LambdaContext(spec, self._clock)
            started = self._clock()
            try:
                handler = self._handler(spec)
            except Exception as error:  # Lambda reports import failures as a function error
                logger.warning("%s could not be loaded: %s", spec.name, error)
                return InvocationResult(error_type="Runtime.ImportModuleError", error_message=str(error))
            try:
                payload = handler(json.loads(json.dumps(event)), context)
            except Exception as error:  # a handler's exception is the invocation's result
                logger.warning("%s raised %s: %s", spec.name, type(error).__name__, error, exc_info=True)
                return InvocationResult(error_type=type(error).__name__, error_message=str(error))
            elapsed = self._clock() - started
        if elapsed > spec.timeout_s:
            message = f"Task timed out after {spec.timeout_s:.2f} seconds"
            return InvocationResult(error_type="Sandbox.Timedout", error_message=message)
        try:
            # Lambda serializes the return value to JSON: what cannot be serialized is an error.
            return InvocationResult(payload=json.loads(json.dumps(payload)))
        except (TypeError, ValueError) as error:
            return InvocationResult(error_type="Runtime.MarshalError", error_message=str(error))

    def _handler(self, spec: FunctionSpec) -> Handler:
        if spec.handler_override is not None:
            return spec.handler_override
        if spec.logical_id not in self._handlers:
            module_name, _, function_name = spec.handler.rpartition(".")
            module = importlib.import_module(module_name)
            self._handlers[spec.logical_id] = getattr(module, function_name)
        return self._handlers[spec.logical_id]

    @contextmanager
    def _own_modules(self, spec: FunctionSpec) -> Iterator[None]:
        """During the invocation, `sys.modules` and the front of `sys.path` are the function's own."""
        packages = self._packages()
        host = _take_modules(packages)
        sys.modules.update(self._modules.get(spec.logical_id, {}))
        root = str(spec.code_root) if spec.code_root is not None else None
        if root is not None:
            sys.path.insert(0, root)
        try:
            yield
        finally:
            self._modules[spec.logical_id] = _take_modules(packages)
            if root is not None:
                sys.path.remove(root)
            sys.modules.update(host)

    @contextmanager
    def _environment(self, spec: FunctionSpec) -> Iterator[None]:
        wanted = {
            **self._base_environment,
            "AWS_LAMBDA_FUNCTION_NAME": spec.name,
            "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(spec.memory_mb),
            "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{spec.name}",
            "_HANDLER": spec.handler,
            **({"LAMBDA_TASK_ROOT": str(spec.code_root)} if spec.code_root else {}),
            **spec.environment,
            **self._overrides,
        }
        hidden = {
            key: os.environ[key] for key in list(os.environ) if key.startswith("AWS_") and key not in wanted
        }
        replaced = {key: os.environ.get(key) for key in wanted}
        for key in hidden:
            del os.environ[key]
        os.environ.update(wanted)
        try:
            yield
        finally:
            for key, previous in replaced.items():
                if previous is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = previous
            os.environ.update(hidden)


class _StdoutTee:
    """Stands in for `sys.stdout` during one invocation: every write goes through to the stream it
    replaced; what the invoking thread writes is also kept, until `release()`. A handler may keep a
    reference (a logger created during its first invocation does): writes through it still reach the
    stream afterwards, and are no longer kept."""

    def __init__(self, target: TextIO) -> None:
        self.target = target
        self._owner: int | None = threading.get_ident()
        self._kept: list[str] = []

    def write(self, text: str) -> int:
        if self._owner == threading.get_ident():
            self._kept.append(text)
        return self.target.write(text)

    def flush(self) -> None:
        self.target.flush()

    def release(self) -> str:
        """Stop keeping writes; return what was kept."""
        self._owner = None
        kept, self._kept = "".join(self._kept), []
        return kept

    def __getattr__(self, name: str) -> Any:
        return getattr(self.target, name)  # encoding, isatty, fileno...: the real stream's


def _top(module_name: str) -> str:
    return module_name.split(".", 1)[0]


def _take_modules(packages: set[str]) -> dict[str, ModuleType]:
    """Remove and return every loaded module of `packages`."""
    taken = {name: module for name, module in sys.modules.items() if _top(name) in packages}
    for name in taken:
        del sys.modules[name]
    return taken
