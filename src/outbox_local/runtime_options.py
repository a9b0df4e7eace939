"""What a local runtime is started with, and the clock a caller driving it step by step moves forward."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class StartStack:
    """One more stack the runtime starts with (`RuntimeOptions.more_stacks`)."""

    template_path: Path
    name: str
    region: str | None = None
    """Where it lives; None: the runtime's region."""


@dataclass(frozen=True)
class RuntimeOptions:
    template_path: Path | None
    """The stack created at start-up; None: none (stacks come later, e.g. from `cdk deploy`)."""
    region: str = "us-east-1"
    stack_name: str = "OutboxStack"
    more_stacks: tuple[StartStack, ...] = ()
    """Stacks started after the first (`outbox local up --all-stacks`: the rest of cdk.out), each in its
    region."""
    host: str = "127.0.0.1"
    aws_port: int = 0
    api_port: int = 0
    background: bool = True
    """Poll streams and queues and fire schedules on a thread. Tests set False and drive `drain_streams()`
    instead."""
    poll_interval_s: float = 0.05
    retry_delay_s: float = 0.2
    schedule_speedup: float = 1.0
    function_environment: Mapping[str, str] = field(default_factory=dict)
    """Variables set in every function on top of the template's (e.g. a log level for the demo)."""
    code_root: Path | None = None
    parameter_values: Mapping[str, str] = field(default_factory=dict)
    timeout_scale: int = 5
    """The hosted functions' AWS clients wait this many times longer than on AWS for the endpoint to connect
    and answer (OUTBOX_LOCAL_TIMEOUT_SCALE, read by outbox.aws; 1 to 10): the endpoint is a moto server that
    shares this machine's CPUs, and under load answers a call AWS answers at once only after the 2 s an
    invocation's call waits on AWS. The time the engines reserve per call stays AWS's."""
    state_dir: Path | None = None
    """Where the runtime keeps what must survive a stop or a crash (docs/local.md, "State that survives"):
    restored from at start, saved to while it runs. None: nothing is kept (files the runtime needs go to a
    temporary directory, removed at stop)."""
    fresh_state: bool = False
    """Discard what `state_dir` holds and start empty (`--fresh`)."""
    replication_lag_s: float = 1.0
    """How long after it was made a write to a global table reaches its other replicas (AWS: typically about
    a second; `outbox_local.replication`)."""
    max_environments: int | None = None
    """Run functions in worker processes, concurrently, up to this many per function (fewer when its
    ReservedConcurrentExecutions says so); None: in this process, one invocation at a time (docs/local.md,
    "Execution environments")."""


class VirtualClock:
    """Wall-clock time that a caller driving the runtime step by step may move forward instead of sleeping."""

    def __init__(self) -> None:
        self._offset = 0.0

    def __call__(self) -> float:
        return time.time() + self._offset

    def advance(self, seconds: float) -> None:
        self._offset += seconds
