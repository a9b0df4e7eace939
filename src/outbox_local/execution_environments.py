"""Lambda execution environments as worker processes: each function's invocations run concurrently, each in
an environment of its own, as Lambda runs them.

Per function, a small pool of Python processes (`outbox_local.environment_worker`), each started with the
function's own environment and importing its handler once (the cold start), then serving invocations one at
a time (warm), each with its own module state. A new environment starts when all of the function's are busy,
up to its `ReservedConcurrentExecutions` or the runtime's cap (`outbox local up --max-environments`): the
machine is a laptop, not a fleet. Beyond that an invocation waits until one is free (where Lambda would
throttle it): the cap is the machine's, not the account's, so nothing is refused for it.

As in Lambda: an invocation still running at its timeout kills its environment and fails with
`Sandbox.Timedout`; an environment whose process exits during an invocation fails it with
`Runtime.ExitError`; either is replaced by a fresh one (a cold start) when next needed. Waiting for a free
environment does not count towards the function's timeout, and a cold start has Lambda's init limit (10 s) on
top of it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from outbox_local.function_spec import FunctionSpec, LambdaContext
from outbox_local.invocation import InvocationResult, Outcome

logger = logging.getLogger("outbox_local.environments")

WORKER_SCRIPT = Path(__file__).with_name("environment_worker.py")
INIT_LIMIT_S = 10.0
"""Lambda's limit on the init phase (importing the handler), counted apart from the function's timeout."""
_STOP_GRACE_S = 2.0


class Environment:
    """One worker process and its two private pipes. Used by one thread at a time: the pool's while idle,
    the invoking thread while busy."""

    def __init__(self, spec: FunctionSpec, environment: Mapping[str, str], sys_path: list[str]) -> None:
        self.spec = spec
        to_worker_read, to_worker = os.pipe()
        from_worker, from_worker_write = os.pipe()
        # Never written: the worker ends when it reads end-of-file on it, which happens once this process
        # closes it or dies (killed, crashed), so a worker under way never outlives the runtime.
        lifeline_read, self._lifeline = os.pipe()
        theirs = (to_worker_read, from_worker_write, lifeline_read)
        try:
            # -P: nothing (no script directory, no working directory) goes in front of the code root.
            self.process = subprocess.Popen(  # noqa: S603 - this interpreter, our own script
                # The function's name last: unused by the worker, it tells `ps` whose environment this is.
                [sys.executable, "-B", "-P", str(WORKER_SCRIPT), *map(str, theirs), spec.name],
                env=dict(environment),
                stdin=subprocess.DEVNULL,
                pass_fds=theirs,
            )
        except BaseException:
            for ours in (to_worker, from_worker, self._lifeline):
                os.close(ours)
            raise
        finally:
            for fd in theirs:
                os.close(fd)
        self._requests: IO[bytes] = os.fdopen(to_worker, "wb")
        self._answers: IO[bytes] = os.fdopen(from_worker, "rb", buffering=0)
        # poll, not select: a runtime with many sockets open may hand out descriptors past select's 1024.
        self._answer_ready = select.poll()
        self._answer_ready.register(from_worker, select.POLLIN)
        self._received = bytearray()
        self._init = {
            "code_root": str(spec.code_root) if spec.code_root is not None else None,
            "sys_path": sys_path,
            "handler": spec.handler,
        }

    @property
    def pid(self) -> int:
        return self.process.pid

    def initialize(self) -> str:
        """The cold start: the handler imported. Returns what the import printed."""
        answer = self._exchange(json.dumps(self._init), INIT_LIMIT_S + self.spec.timeout_s)
        if answer.get("ready") is not True:
            raise EnvironmentLostError(_failure(answer))
        return str(answer.get("output") or "")

    def invoke(self, event_json: str, context: LambdaContext, trace_header: str = "") -> Outcome:
        """One invocation of the event (already JSON: what cannot be serialized never reaches a worker),
        killed at the context's deadline, with the invocation's X-Ray header (`_X_AMZN_TRACE_ID`)."""
        remaining_s = context.get_remaining_time_in_millis() / 1000
        # The deadline as Lambda's runtime API gives it (epoch milliseconds): the worker's context counts
        # down from what the host's clock says is left.
        fields = {**context.fields(), "deadline_ms": time.time() * 1000 + remaining_s * 1000}
        header = json.dumps(trace_header)
        request = f'{{"event": {event_json}, "context": {json.dumps(fields)}, "trace_header": {header}}}'
        answer = self._exchange(request, remaining_s)
        output = str(answer.get("output") or "")
        if "error_type" in answer:
            logger.warning(
                "%s raised %s: %s\n%s",
                self.spec.name,
                answer["error_type"],
                answer.get("error_message"),
                answer.get("trace", ""),
            )
            return Outcome(_failure(answer), output)
        return Outcome(InvocationResult(payload=answer.get("payload")), output)

    def close_requests(self) -> None:
        """The worker's loop ends when its request pipe closes: a graceful stop."""
        with contextlib.suppress(OSError):  # the worker is gone: nothing to flush to
            self._requests.close()

    def stop(self) -> None:
        """Close the pipes, and make sure the process is gone (killed if it does not end by itself)."""
        self.close_requests()
        try:
            self.process.wait(timeout=_STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._close_pipes()

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()
        self.close_requests()
        self._close_pipes()

    def _close_pipes(self) -> None:
        self._answers.close()
        if self._lifeline >= 0:
            os.close(self._lifeline)
            self._lifeline = -1

    def _exchange(self, message: str, timeout_s: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        try:
            self._requests.write(message.encode() + b"\n")
            self._requests.flush()
        except (OSError, ValueError):  # the worker is gone
            raise EnvironmentLostError(self._exit_error()) from None
        line = self._read_line(deadline)
        if line is None:
            self.kill()  # as Lambda does at the timeout: the environment is discarded
            message_text = f"Task timed out after {self.spec.timeout_s:.2f} seconds"
            raise EnvironmentLostError(
                InvocationResult(error_type="Sandbox.Timedout", error_message=message_text)
            )
        answer: dict[str, Any] = json.loads(line)
        return answer

    def _read_line(self, deadline: float) -> bytes | None:
        """The worker's next answer, or None at the deadline; raises when the worker is gone."""
        scanned = 0
        while (end := self._received.find(b"\n", scanned)) < 0:
            scanned = len(self._received)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            if not self._answer_ready.poll(remaining * 1000):
                continue
            chunk = self._answers.read(1 << 16)
            if not chunk:
                raise EnvironmentLostError(self._exit_error())
            self._received.extend(chunk)
        line = bytes(self._received[:end])
        del self._received[: end + 1]
        return line

    def _exit_error(self) -> InvocationResult:
        try:
            code = self.process.wait(timeout=_STOP_GRACE_S)
        except subprocess.TimeoutExpired:  # its pipe closed but it lingers: it cannot serve either way
            self.process.kill()
            code = self.process.wait()
        reason = f"signal {-code}" if code < 0 else f"exit status {code}"
        return InvocationResult(
            error_type="Runtime.ExitError", error_message=f"Runtime exited with error: {reason}"
        )


class EnvironmentLostError(Exception):
    """The environment cannot serve (its process exited, was killed at its timeout, or the runtime stops)."""

    def __init__(self, result: InvocationResult) -> None:
        super().__init__(result.error_message)
        self.result = result


_STOPPED = InvocationResult(error_type="Runtime.ExitError", error_message="the local runtime is stopping")


@dataclass
class _Pool:
    """One function's environments, guarded by `ExecutionEnvironments`' lock. Its own condition: a freed
    environment (or slot) wakes one waiter of this function, not every waiting request of every function
    (under load, dozens: each woken for nothing would take the runtime's interpreter lock in turn)."""

    limit: int
    freed: threading.Condition
    idle: list[Environment] = field(default_factory=list)
    count: int = 0
    """Environments that exist or are starting, busy ones included."""


class ExecutionEnvironments:
    """Every function's pool of worker processes."""

    def __init__(
        self,
        environment_of: Callable[[FunctionSpec], dict[str, str]],
        *,
        max_per_function: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_per_function < 1:
            raise ValueError("max_per_function must be at least 1")
        self._environment_of = environment_of
        self._max_per_function = max_per_function
        self._clock = clock
        self._lock = threading.Lock()
        self._pools: dict[str, _Pool] = {}
        self._live: set[Environment] = set()
        self._closed = False
        self.cold_starts: Counter[str] = Counter()
        """Environments started, by function name: each one was a cold start."""

    def invoke(self, spec: FunctionSpec, event: Any, trace_header: str = "") -> Outcome:
        try:
            event_json = json.dumps(event)
        except (TypeError, ValueError) as error:  # as in process: the invocation fails, nothing is started
            return Outcome(InvocationResult(error_type=type(error).__name__, error_message=str(error)))
        try:
            environment, cold_output = self._acquire(spec)
        except EnvironmentLostError as failed:
            return Outcome(_STOPPED if self._closed else failed.result)
        try:
            outcome = environment.invoke(event_json, LambdaContext(spec, self._clock), trace_header)
        except EnvironmentLostError as lost:
            self._discard(spec, environment)
            return Outcome(_STOPPED if self._closed else lost.result, cold_output)
        except Exception as error:
            # Whatever else went wrong (an answer that is not JSON, for one), the environment's exchange is in
            # an unknown state: it is discarded, never put back, and its slot is freed for a fresh one.
            logger.exception("%s: the invocation's exchange with its environment failed", spec.name)
            self._discard(spec, environment)
            return Outcome(_lost(f"the environment failed: {error}"), cold_output)
        self._release(spec, environment)
        return Outcome(outcome.result, cold_output + outcome.output)

    def pids(self, name: str) -> list[int]:
        """The worker processes of a function, busy or idle."""
        with self._lock:
            return sorted(environment.pid for environment in self._live if environment.spec.name == name)

    def close(self) -> None:
        """Stop every environment, busy ones too (their invocation fails): no process outlives the runtime."""
        with self._lock:
            self._closed = True
            live, self._live = self._live, set()
            idle = [environment for pool in self._pools.values() for environment in pool.idle]
            for pool in self._pools.values():
                pool.idle.clear()
                pool.freed.notify_all()
        busy = [environment for environment in live if environment not in idle]
        for environment in idle:
            environment.close_requests()  # every idle worker sees its pipe close at once
        for environment in busy:
            environment.process.kill()  # its invoking thread sees it gone and discards it
        for environment in idle:
            environment.stop()
        for environment in busy:
            environment.process.wait()

    def _acquire(self, spec: FunctionSpec) -> tuple[Environment, str]:
        """An idle environment of the function, or a new one (its cold start's output with it)."""
        retired: list[Environment] = []
        try:
            return self._acquire_with(spec, retired)
        finally:
            for environment in retired:
                environment.stop()

    def retire(self, name: str) -> None:
        """Stop the function's idle environments (it is hosted no more); a busy one ends its invocation."""
        with self._lock:
            pool = self._pools.get(name)
            idle = list(pool.idle) if pool is not None else []
            if pool is not None:
                pool.idle.clear()
                pool.count -= len(idle)
            self._live.difference_update(idle)
        for environment in idle:
            environment.stop()

    def _acquire_with(self, spec: FunctionSpec, retired: list[Environment]) -> tuple[Environment, str]:
        with self._lock:
            pool = self._pool(spec)
            while True:
                if self._closed:
                    raise EnvironmentLostError(_STOPPED)
                if pool.idle:
                    warm = pool.idle.pop()  # the most recently used: warm, as Lambda prefers
                    if warm.spec == spec:
                        return warm, ""
                    # An environment of the function's earlier spec (new code or settings since): as Lambda,
                    # a new version runs in new environments only.
                    self._live.discard(warm)
                    pool.count -= 1
                    retired.append(warm)
                    continue
                if pool.count < pool.limit:
                    pool.count += 1
                    break
                pool.freed.wait()
        try:
            environment = Environment(spec, self._environment_of(spec), list(sys.path))
        except Exception as error:  # the slot taken above is given back whatever failed
            self._forget(spec, None)
            raise EnvironmentLostError(_lost(f"cannot start: {error}")) from error
        with self._lock:
            stopping = self._closed
            if not stopping:
                self._live.add(environment)
                self.cold_starts[spec.name] += 1
        if stopping:  # close() ran meanwhile and could not see it
            self._discard(spec, environment)
            raise EnvironmentLostError(_STOPPED)
        try:
            return environment, environment.initialize()
        except EnvironmentLostError:
            self._discard(spec, environment)
            raise
        except Exception as error:
            self._discard(spec, environment)
            raise EnvironmentLostError(_lost(f"the environment failed to start: {error}")) from error

    def _release(self, spec: FunctionSpec, environment: Environment) -> None:
        with self._lock:
            if not self._closed:
                pool = self._pools[spec.name]
                pool.idle.append(environment)
                pool.freed.notify()
                return
        self._discard(spec, environment)  # close() took it for busy and killed it

    def _discard(self, spec: FunctionSpec, environment: Environment) -> None:
        environment.kill()
        self._forget(spec, environment)

    def _forget(self, spec: FunctionSpec, environment: Environment | None) -> None:
        with self._lock:
            if environment is not None:
                self._live.discard(environment)
            pool = self._pools[spec.name]
            pool.count -= 1
            pool.freed.notify()  # a slot is free: one waiter may start an environment

    def limit(self, spec: FunctionSpec) -> int:
        """How many environments the function may have at once."""
        limit = self._max_per_function
        if spec.reserved_concurrency is not None:
            # 0 never comes here: the host throttles every invocation of such a function.
            limit = max(1, min(limit, spec.reserved_concurrency))
        return limit

    def _pool(self, spec: FunctionSpec) -> _Pool:
        if spec.name not in self._pools:
            self._pools[spec.name] = _Pool(self.limit(spec), threading.Condition(self._lock))
        return self._pools[spec.name]


def _lost(message: str) -> InvocationResult:
    return InvocationResult(error_type="Runtime.ExitError", error_message=message)


def _failure(answer: Mapping[str, Any]) -> InvocationResult:
    return InvocationResult(
        error_type=str(answer["error_type"]), error_message=str(answer.get("error_message"))
    )
