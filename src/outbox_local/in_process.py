"""Functions run in the runtime's own process, one invocation at a time for all of them: what handlers given
as plain callables (`FunctionSpec.handler_override`), module inspection (`FunctionHost.modules_of`), fake
clocks and a debugger's breakpoints need. Everything else runs in worker processes (`execution_environments`).

Handlers read configuration from `os.environ`, so invocations are serialized by one lock and the environment
is swapped around each call, with every other `AWS_*` variable of the host hidden: a developer's real profile
or credentials never reach a handler.

Each function runs its own code, as Lambda runs each function's own asset: during its invocation its code
root comes first on `sys.path` and `sys.modules` holds its own copies of the packages the functions ship (kept
between its invocations, as a warm environment keeps them); the host's and the other functions' copies are
put back afterwards, so two functions that ship different subsets of one package each see their own.
What a function prints reaches stdout as printed; asked to, the runner also keeps a copy of what the invoking
thread printed and hands it over with the result.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from types import ModuleType
from typing import Any, TextIO, cast

from outbox_local.function_spec import (
    TRACE_VARIABLE,
    FunctionSpec,
    Handler,
    LambdaContext,
    function_variables,
)
from outbox_local.invocation import InvocationResult, Outcome

logger = logging.getLogger("outbox_local.functions")


class InProcessFunctions:
    """One execution environment per function, in this process: each function's modules are its own,
    imported fresh from its code root on its first invocation (so its cached clients point at THIS runtime's
    endpoint) and kept for the next; the process's own modules are untouched."""

    def __init__(
        self,
        functions: Callable[[], Iterable[FunctionSpec]],
        base_environment: Mapping[str, str],
        overrides: Mapping[str, str],
        clock: Callable[[], float],
        *,
        keep_output: bool,
    ) -> None:
        self._functions = functions
        self._base_environment = dict(base_environment)
        self._overrides = dict(overrides)
        self._clock = clock
        self._keep_output = keep_output
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

    def modules_of(self, spec: FunctionSpec) -> dict[str, str | None]:
        with self._lock:
            return {
                name: getattr(module, "__file__", None)
                for name, module in self._modules.get(spec.logical_id, {}).items()
            }

    def invoke(self, spec: FunctionSpec, event: Any, trace_header: str = "") -> Outcome:
        with self._lock:
            if not self._keep_output:
                return Outcome(self._run(spec, event, trace_header))
            tee = _shared_tee(sys.stdout)
            installed = sys.stdout = cast(TextIO, tee)
            try:
                result = self._run(spec, event, trace_header)
            finally:
                if sys.stdout is installed:  # not if something else replaced it meanwhile: theirs stays
                    sys.stdout = tee.target
            return Outcome(result, tee.release())

    def _packages(self) -> set[str]:
        """Top-level modules of the functions' code: handler modules and what their code roots hold."""
        functions = list(self._functions())
        names = {_top(spec.handler) for spec in functions if spec.handler_override is None}
        for root in {spec.code_root for spec in functions if spec.code_root is not None}:
            if root.is_dir():
                names.update(
                    entry.stem for entry in root.iterdir() if entry.suffix == ".py" or entry.is_dir()
                )
        return {name for name in names if name and not name.startswith((".", "_"))}

    def _run(self, spec: FunctionSpec, event: Any, trace_header: str = "") -> InvocationResult:
        with self._environment(spec, trace_header), self._own_modules(spec):
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
    def _environment(self, spec: FunctionSpec, trace_header: str = "") -> Iterator[None]:
        wanted = function_variables(spec, self._base_environment, self._overrides)
        if trace_header:
            wanted[TRACE_VARIABLE] = trace_header
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
    """Stands in for `sys.stdout` during each invocation: every write goes through to the stream it
    replaced; what the invoking thread writes is also kept, until `release()`. One for the whole process
    (`_shared_tee`): a handler may keep a reference (a logger created during an invocation keeps the stream it
    was created with, as Powertools' Logger does, for the life of the process), and what later invocations
    write through it is theirs, kept too; between invocations such writes still reach the stream."""

    def __init__(self, target: TextIO) -> None:
        self.target = target
        self._owner: int | None = None
        self._kept: list[str] = []

    def arm(self, target: TextIO) -> _StdoutTee:
        """Keep what this thread writes from now on, passing it to `target` (the stream it replaces)."""
        if target is not cast(TextIO, self):
            self.target = target
        self._owner = threading.get_ident()
        self._kept = []
        return self

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


_TEE: _StdoutTee | None = None


def _shared_tee(target: TextIO) -> _StdoutTee:
    global _TEE  # noqa: PLW0603 - one per process: see _StdoutTee
    if _TEE is None:
        _TEE = _StdoutTee(target)
    return _TEE.arm(target)


def _top(module_name: str) -> str:
    return module_name.split(".", 1)[0]


def _take_modules(packages: set[str]) -> dict[str, ModuleType]:
    """Remove and return every loaded module of `packages`."""
    taken = {name: module for name, module in sys.modules.items() if _top(name) in packages}
    for name in taken:
        del sys.modules[name]
    return taken
