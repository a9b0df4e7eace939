"""`outbox local env` reads what the runtimes running now announced (outbox_local.state): the one running,
an error naming them when several run, and none left over from a runtime that was killed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from outbox_cli.main import main
from outbox_local import state
from outbox_local.runtime import LocalRuntime
from tests.support.local_templates import options, queue_template, write_template


@pytest.fixture(autouse=True)
def state_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's own directory: other runtimes on the machine announce theirs elsewhere."""
    directory = tmp_path / "state"
    monkeypatch.setenv(state.STATE_DIRECTORY_VARIABLE, str(directory))
    return directory


def runtime_state(port: int, *, pid: int | None = None, region: str = "us-east-1") -> state.RuntimeState:
    return state.RuntimeState(
        endpoint_url=f"http://127.0.0.1:{port}",
        aws_port=port,
        region=region,
        stack_name=f"Stack{port}",
        template=f"cdk.out/Stack{port}.template.json",
        pid=os.getpid() if pid is None else pid,
        api_url=f"http://127.0.0.1:{port + 1}",
    )


def ended_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_the_running_runtime_is_reported_with_its_ports_region_and_stack(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given one runtime announced on port 45001 in eu-west-1
    state.announce(runtime_state(45001, region="eu-west-1"))

    # When `outbox local env` runs
    assert main(["local", "env"]) == 0

    # Then it exports that endpoint and region, and says on stderr what runs there (eval shows it)
    printed = capsys.readouterr()
    assert "export AWS_ENDPOINT_URL=http://127.0.0.1:45001\n" in printed.out
    assert "export AWS_DEFAULT_REGION=eu-west-1\n" in printed.out
    assert "stack Stack45001, region eu-west-1, AWS endpoint http://127.0.0.1:45001" in printed.err
    assert "HTTP API http://127.0.0.1:45002" in printed.err
    # and a region other than the runtime's is refused rather than exported
    assert main(["local", "env", "--region", "us-east-1"]) == 1
    assert "runs in eu-west-1, not us-east-1" in capsys.readouterr().err


def test_a_runtime_that_was_killed_is_not_reported_and_its_file_is_removed(
    state_directory: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the file of a runtime whose process is gone (killed before it could remove it)
    left = state.announce(runtime_state(45003, pid=ended_pid()))

    # When `outbox local env` runs, Then it says no runtime runs, fails, and removes the file
    assert main(["local", "env"]) == 1
    printed = capsys.readouterr()
    assert printed.out == ""
    assert "no `outbox local up` is running" in printed.err
    assert not left.exists()


def test_several_runtimes_are_an_error_naming_them_unless_one_is_chosen(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given two runtimes running
    first, second = runtime_state(45005), runtime_state(45007)
    state.announce(first)
    state.announce(second)

    # When `outbox local env` runs without --endpoint-url, Then it names both and fails
    assert main(["local", "env"]) == 1
    error = capsys.readouterr().err
    assert "Stack45005 at http://127.0.0.1:45005; Stack45007 at http://127.0.0.1:45007" in error
    assert "pass --endpoint-url" in error
    # When one is chosen by its endpoint, Then that one is exported
    assert main(["local", "env", "--endpoint-url", second.endpoint_url]) == 0
    assert "export AWS_ENDPOINT_URL=http://127.0.0.1:45007\n" in capsys.readouterr().out
    # When a control command runs without --endpoint-url, Then it refuses to pick one (a fault armed on the
    # wrong runtime would go unnoticed) and names both
    assert main(["local", "faults"]) == 1
    error = capsys.readouterr().err
    assert "several local runtimes are running (http://127.0.0.1:45005, http://127.0.0.1:45007)" in error


def test_a_runtime_withdraws_only_its_own_file(state_directory: Path) -> None:
    # Given a port's file rewritten by another runtime since (the first one ended, another took the port)
    mine = runtime_state(45009)
    state.announce(mine)
    theirs = runtime_state(45009, pid=os.getppid())
    state.announce(theirs)

    # When the first one withdraws, Then the other's file stays
    state.withdraw(mine)
    assert state.running() == [theirs]
    state.withdraw(theirs)
    assert state.running() == []


def test_an_unreadable_file_is_ignored_and_removed(state_directory: Path) -> None:
    state_directory.mkdir()
    broken = state_directory / "45011.json"
    broken.write_text("{not json")
    assert state.running() == []
    assert not broken.exists()


def test_the_control_commands_reach_the_running_runtime_without_an_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a runtime running on a port the system picked, announced as `outbox local up` announces it, and a
    # shell that exported nothing
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with LocalRuntime(options(write_template(tmp_path, queue_template()))) as runtime:
        port = int(runtime.endpoint_url.rsplit(":", 1)[1])
        state.announce(replace(runtime_state(port), endpoint_url=runtime.endpoint_url))

        # When `outbox local fault` and `outbox local faults` run without --endpoint-url
        assert main(["local", "fault", "sns", "Publish", "--times", "1"]) == 0
        capsys.readouterr()
        assert main(["local", "faults", "--json"]) == 0

        # Then they armed and listed the fault on that runtime
        assert '"operation": "Publish"' in capsys.readouterr().out
        assert [rule["operation"] for rule in runtime.faults.rules()] == ["Publish"]


def test_a_directory_others_can_write_is_neither_read_nor_written(state_directory: Path) -> None:
    # Given the state directory writable by every user (another user could plant an endpoint of theirs)
    state_directory.mkdir()
    (state_directory / "45013.json").write_text(json.dumps(asdict(runtime_state(45013))))
    state_directory.chmod(0o777)

    # Then nothing there is reported, and a runtime refuses to announce itself there, saying why
    assert state.running() == []
    with pytest.raises(state.StateDirectoryError, match="not this user's own directory"):
        state.announce(runtime_state(45015))
