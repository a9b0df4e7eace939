"""Functions in worker processes, as Lambda runs them in execution environments: concurrent invocations each
in an environment of their own (its own process, its own module state), cold started once and then warm, up
to the function's limit; a timeout or a crash costs the environment, which is replaced; nothing outlives the
host. Overlap is proven with a rendezvous (`tests.unit.local.rendezvous`), never by timing."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from outbox_local.errors import RuntimeStateError
from outbox_local.functions import FunctionHost, FunctionSpec
from outbox_local.invocation import THROTTLED_ERROR
from tests.unit.local.rendezvous import MEET, Rendezvous

HANDLERS = (
    MEET
    + """
import json
import sys
import time

import outbox

CALLS = 0


def meet_and_count(event, context):
    global CALLS
    CALLS += 1
    if "port" in event:
        meet(event["port"])
    return {"pid": os.getpid(), "calls": CALLS}


def report(event, context):
    print("printed by", context.function_name)
    prefixes = ("AWS_", "TABLE_", "LAMBDA_", "LOG")
    return {
        "environment": {key: value for key, value in os.environ.items() if key.startswith(prefixes)},
        "path0": sys.path[0],
        "no_bytecode": sys.dont_write_bytecode,
        "outbox": outbox.WHERE,
        "remaining_ms": context.get_remaining_time_in_millis(),
        "request_id": context.aws_request_id,
        "pid": os.getpid(),
        "trace_header": os.environ.get("_X_AMZN_TRACE_ID"),
    }


def block(event, context):
    if event.get("block"):
        time.sleep(3600)
    return {"pid": os.getpid()}


def crash(event, context):
    if event.get("crash"):
        os._exit(3)
    return {"pid": os.getpid()}


def fail(event, context):
    raise KeyError("missing")


def unserializable(event, context):
    return {1, 2}
"""
)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A function's asset: the handlers, and a package `outbox` of its own (the project has one too)."""
    code = tmp_path / "asset"
    (code / "outbox").mkdir(parents=True)
    (code / "outbox" / "__init__.py").write_text('WHERE = "the asset\'s"\n')
    (code / "worker_handlers.py").write_text(HANDLERS)
    return code


@pytest.fixture
def outputs() -> list[tuple[str, str]]:
    return []


@pytest.fixture
def host(outputs: list[tuple[str, str]]) -> Iterator[FunctionHost]:
    started = FunctionHost(
        {"AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": "http://127.0.0.1:9"},
        {"LOG_LEVEL": "DEBUG"},
        on_output=lambda name, text: outputs.append((name, text)),
        max_environments=4,
    )
    started.open()
    yield started
    started.close()


def spec(root: Path, handler: str, *, timeout_s: float = 30.0, reserved: int | None = None) -> FunctionSpec:
    return FunctionSpec(
        handler,
        handler,
        f"arn:aws:lambda:us-east-1:123456789012:function:{handler}",
        f"worker_handlers.{handler}",
        root,
        timeout_s,
        environment={"TABLE_NAME": "items"},
        reserved_concurrency=reserved,
    )


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def cold_starts(host: FunctionHost, name: str) -> int:
    assert host.environments is not None
    return host.environments.cold_starts[name]


def test_concurrent_invocations_run_at_once_each_in_an_environment_with_its_own_module_state(
    host: FunctionHost, root: Path
) -> None:
    # Given a function run in worker processes
    host.register(spec(root, "meet_and_count"))
    with Rendezvous() as meeting, ThreadPoolExecutor(4) as pool:
        # When four invocations come at once
        running = [pool.submit(host.invoke, "meet_and_count", {"port": meeting.port}) for _ in range(4)]
        # Then all four are in the handler at the same time, each in a process of its own
        pids = meeting.arrivals(4)
        meeting.release()
        results = [future.result().payload for future in running]
    assert len(set(pids)) == 4
    assert sorted(result["pid"] for result in results) == sorted(pids)
    # and each counted only its own call: its module state is its own
    assert [result["calls"] for result in results] == [1, 1, 1, 1]

    # When it is invoked again, one call at a time
    again = [host.invoke("meet_and_count", {}).payload for _ in range(3)]

    # Then warm environments served them (no new cold start), keeping their state between invocations
    assert {result["pid"] for result in again} <= set(pids)
    assert all(result["calls"] > 1 for result in again)
    assert cold_starts(host, "meet_and_count") == 4
    assert host.environments is not None
    assert host.environments.pids("meet_and_count") == sorted(pids)


def test_beyond_its_reserved_concurrency_an_invocation_waits_for_a_free_environment(
    host: FunctionHost, root: Path
) -> None:
    # Given a function whose ReservedConcurrentExecutions (2) is below the host's cap (4)
    host.register(spec(root, "meet_and_count", reserved=2))
    assert host.environments is not None
    with Rendezvous() as meeting, ThreadPoolExecutor(3) as pool:
        # When three invocations come at once
        running = [pool.submit(host.invoke, "meet_and_count", {"port": meeting.port}) for _ in range(3)]
        # Then two run, in two environments, and the third waits
        first = meeting.arrivals(2)
        assert host.environments.pids("meet_and_count") == sorted(first)
        # until one of them is free: it runs in that one
        meeting.release(1)
        [third] = meeting.arrivals(1)
        meeting.release()
        assert all(not future.result().failed for future in running)
    assert third in first
    assert cold_starts(host, "meet_and_count") == 2


def test_an_invocation_past_its_timeout_kills_its_environment_and_a_new_one_replaces_it(
    host: FunctionHost, root: Path
) -> None:
    # Given a function with a one-second timeout, warm in one environment
    host.register(spec(root, "block", timeout_s=1))
    before = host.invoke("block", {}).payload["pid"]

    # When an invocation runs past the timeout
    result = host.invoke("block", {"block": True})

    # Then it failed as Lambda reports it, and its environment (process) is gone
    assert (result.error_type, result.error_message) == (
        "Sandbox.Timedout",
        "Task timed out after 1.00 seconds",
    )
    assert not alive(before)
    assert host.errors["block"] == 1
    # and the next invocation runs in a new environment
    after = host.invoke("block", {}).payload["pid"]
    assert after != before
    assert cold_starts(host, "block") == 2


def test_an_environment_whose_process_exits_fails_the_invocation_and_is_replaced(
    host: FunctionHost, root: Path
) -> None:
    # Given a warm environment
    host.register(spec(root, "crash"))
    before = host.invoke("crash", {}).payload["pid"]

    # When the handler ends its process (a crash, sys.exit, os._exit)
    result = host.invoke("crash", {"crash": True})

    # Then the invocation failed with Lambda's Runtime.ExitError, and a new environment serves the next one
    assert (result.error_type, result.error_message) == (
        "Runtime.ExitError",
        "Runtime exited with error: exit status 3",
    )
    assert not alive(before)
    assert host.invoke("crash", {}).payload["pid"] != before
    assert host.errors["crash"] == 1


def test_errors_and_results_come_back_as_lambda_reports_them(host: FunctionHost, root: Path) -> None:
    # Given functions that raise, return what JSON cannot carry, or cannot be imported
    host.register(spec(root, "fail"))
    host.register(spec(root, "unserializable"))
    host.register(FunctionSpec("Missing", "missing", "arn:missing", "no_such_module_here.h", root))

    # When each is invoked, Then each error is Lambda's, and the one that could not start left no process
    assert host.invoke("fail", {}).error_type == "KeyError"
    assert host.invoke("unserializable", {}).error_type == "Runtime.MarshalError"
    assert host.invoke("missing", {}).error_type == "Runtime.ImportModuleError"
    assert host.environments is not None
    assert host.environments.pids("missing") == []
    assert host.errors == {"fail": 1, "unserializable": 1, "missing": 1}


def test_a_worker_runs_with_the_functions_own_environment_its_code_first_and_hands_its_output_over(
    host: FunctionHost,
    root: Path,
    outputs: list[tuple[str, str]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given a developer's real profile in the host's environment
    monkeypatch.setenv("AWS_PROFILE", "production")
    host.register(spec(root, "report"))

    # When the function reports what it sees
    report = host.invoke("report", {}).payload

    # Then it sees its own variables, the runtime's and the overrides, and no developer setting
    environment = report["environment"]
    assert environment["TABLE_NAME"] == "items"
    assert environment["AWS_ENDPOINT_URL"] == "http://127.0.0.1:9"
    assert environment["AWS_LAMBDA_FUNCTION_NAME"] == "report"
    assert environment["LAMBDA_TASK_ROOT"] == str(root)
    assert environment["LOG_LEVEL"] == "DEBUG"
    assert "AWS_PROFILE" not in environment
    # and its code root comes first: its own `outbox`, not the project's, and no bytecode written there
    assert (report["path0"], report["outbox"], report["no_bytecode"]) == (str(root), "the asset's", True)
    assert not list(root.rglob("__pycache__"))
    # and a Lambda context counting down from its timeout
    assert 0 < report["remaining_ms"] <= 30_000
    assert report["request_id"]
    # and an X-Ray header of its own for each invocation, as the Lambda runtime sets one
    assert re.fullmatch(
        r"Root=1-[0-9a-f]{8}-[0-9a-f]{24};Parent=[0-9a-f]{16};Sampled=0", report["trace_header"]
    )
    assert host.invoke("report", {}).payload["trace_header"] != report["trace_header"]
    outputs.pop()
    # and what it printed reached this process's stdout and the output listener
    assert outputs == [("report", "printed by report\n")]
    assert "printed by report" in capsys.readouterr().out


def test_closing_the_host_stops_every_environment_busy_or_idle(host: FunctionHost, root: Path) -> None:
    # Given one environment idle and one busy with an invocation under way
    host.register(spec(root, "report"))
    host.register(spec(root, "meet_and_count"))
    idle = host.invoke("report", {}).payload["pid"]
    with Rendezvous() as meeting, ThreadPoolExecutor(1) as pool:
        under_way = pool.submit(host.invoke, "meet_and_count", {"port": meeting.port})
        [busy] = meeting.arrivals(1)

        # When the host closes (the runtime stops)
        host.close()
        result = under_way.result()

    # Then both processes are gone; the invocation under way failed, and nothing starts afterwards
    assert not alive(idle)
    assert not alive(busy)
    assert (result.error_type, result.error_message) == ("Runtime.ExitError", "the local runtime is stopping")
    assert host.invoke("report", {}).error_type == "Runtime.ExitError"


def test_callables_still_run_in_process_and_only_they_have_modules_to_inspect(
    host: FunctionHost, root: Path
) -> None:
    # Given a host running functions in workers, with one function given as a Python callable
    seen: list[Any] = []
    host.register(
        FunctionSpec("Fn", "fn", "arn:fn", "m.h", None, handler_override=lambda event, _: seen.append(event))
    )
    host.register(spec(root, "report"))

    # When the callable is invoked, Then it ran here (a callable cannot cross to another process)
    assert not host.invoke("fn", {"n": 1}).failed
    assert seen == [{"n": 1}]
    # and the modules of a function run in workers are theirs, not the host's to show
    with pytest.raises(RuntimeStateError, match="worker processes"):
        host.modules_of("report")


def test_an_event_json_cannot_carry_fails_its_invocation_and_frees_the_environment(
    host: FunctionHost, root: Path
) -> None:
    # Given a function allowed one environment, warm
    host.register(spec(root, "meet_and_count", reserved=1))
    assert not host.invoke("meet_and_count", {}).failed

    # When it is invoked with an event JSON cannot carry (as `runtime.invoke` may be called)
    result = host.invoke("meet_and_count", {"when": {1, 2}})

    # Then the invocation failed, as it does in process, instead of raising
    assert result.error_type == "TypeError"
    # and the function's one environment still serves: nothing was left taken
    again = host.invoke("meet_and_count", {})
    assert not again.failed
    assert again.payload["calls"] == 2


def test_reserved_concurrency_zero_throttles_every_invocation_and_starts_nothing(
    host: FunctionHost, root: Path
) -> None:
    # Given a function whose ReservedConcurrentExecutions is 0 (how AWS turns a function off)
    host.register(spec(root, "meet_and_count", reserved=0))

    # When it is invoked, twice
    results = [host.invoke("meet_and_count", {}) for _ in range(2)]

    # Then each invocation was throttled, as Lambda throttles it, and no environment ever started
    assert all(result.throttled and result.error_type == THROTTLED_ERROR for result in results)
    assert cold_starts(host, "meet_and_count") == 0
    # and a throttle is counted as one (Lambda's `Throttles`), never as a function error
    assert host.throttles["meet_and_count"] == 2
    assert host.errors["meet_and_count"] == 0


_DYING_RUNTIME = """
import sys
from pathlib import Path

from outbox_local.functions import FunctionHost, FunctionSpec

root, port = Path(sys.argv[1]), int(sys.argv[2])
host = FunctionHost({}, max_environments=1)
host.register(FunctionSpec("f", "f", "arn:f", "worker_handlers.meet_and_count", root, timeout_s=3600))
host.invoke("f", {"port": port})
"""


def test_a_worker_under_way_ends_when_its_runtime_process_dies(root: Path) -> None:
    # Given a runtime process whose function is under way in a worker (an hour left before its timeout)
    with Rendezvous() as meeting:
        runtime = subprocess.Popen(  # noqa: S603 - this interpreter, the script above
            [sys.executable, "-c", _DYING_RUNTIME, str(root), str(meeting.port)]
        )
        meeting.arrivals(1)

        # When the runtime process is killed (nothing of it runs to stop its environments)
        runtime.kill()
        runtime.wait()

        # Then the worker ends too, its invocation unfinished: no process outlives the runtime
        meeting.departures()


def test_a_new_spec_runs_in_new_environments_and_an_unregistered_function_keeps_none(
    host: FunctionHost, root: Path
) -> None:
    # Given a function warm in a worker process
    host.register(spec(root, "report"))
    first = host.invoke("report", {}).payload

    # When it is registered again with new settings (a stack update), and invoked
    changed = spec(root, "report", timeout_s=20.0)
    host.register(FunctionSpec(**{**changed.__dict__, "environment": {"TABLE_NAME": "orders"}}))
    second = host.invoke("report", {}).payload

    # Then the new spec ran in a new environment (as a new Lambda version does), and the old one is gone
    assert second["environment"]["TABLE_NAME"] == "orders"
    assert second["pid"] != first["pid"]
    assert not alive(first["pid"])
    assert cold_starts(host, "report") == 2

    # When the function is unregistered (its stack was removed)
    host.unregister(changed.arn)

    # Then its idle environment is stopped, and it can no longer be invoked
    assert host.environments is not None
    assert host.environments.pids("report") == []
    assert not alive(second["pid"])
    with pytest.raises(Exception, match="no function"):
        host.find("report")
