"""How `outbox local up` sets itself up: which template it runs and under which stack name, and what it says
when it cannot (no template, several, a name that is no stack's, a port already taken): the local cause, never
AWS's."""

from __future__ import annotations

import json
import os
import re
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from outbox_cli.local import launcher, options
from outbox_cli.main import build_parser, main
from outbox_local.endpoint import LOCAL_CREDENTIALS
from outbox_local.errors import EndpointUnavailableError, TemplateError
from outbox_local.runtime import LocalRuntime
from tests.support.local_templates import options as runtime_options
from tests.support.local_templates import queue_template, running_local_up, template, write_template


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's project directory, the current one, with an empty cdk.out."""
    (tmp_path / "cdk.out").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def synthesized(project: Path, *stacks: str) -> None:
    for stack in stacks:
        (project / "cdk.out" / f"{stack}.template.json").write_text(json.dumps(queue_template()))


def up_options(*arguments: str) -> tuple[Path | None, str]:
    chosen = options(build_parser().parse_args(["local", "up", *arguments]), background=False)
    return chosen.template_path, chosen.stack_name


def test_without_template_the_only_one_in_cdk_out_runs_under_its_file_name(project: Path) -> None:
    # Given cdk.out with one stack's template (and cdk's other files)
    synthesized(project, "PaymentsStack")
    (project / "cdk.out" / "manifest.json").write_text("{}")

    # When `local up` is given no template, Then it runs that one, named as its file says
    assert up_options() == (Path("cdk.out/PaymentsStack.template.json"), "PaymentsStack")


def test_stack_name_overrides_the_template_files_name(project: Path) -> None:
    synthesized(project, "PaymentsStack")
    assert up_options("--stack-name", "Payments-Dev")[1] == "Payments-Dev"


def test_a_template_given_is_named_after_its_file(project: Path) -> None:
    given = project / "elsewhere" / "ShipmentsStack.template.json"
    assert up_options("--template", str(given)) == (given, "ShipmentsStack")


def test_with_several_templates_the_samples_runs(project: Path) -> None:
    # Given cdk.out holding the sample's stack and another (an app with two stacks)
    synthesized(project, "PaymentsStack", "OutboxStack")
    # Then `local up` without --template runs the sample's, under its name
    assert up_options() == (Path("cdk.out/OutboxStack.template.json"), "OutboxStack")


def test_several_templates_without_the_samples_is_an_error_listing_them(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    synthesized(project, "PaymentsStack", "RefundsStack")
    listed = re.escape("PaymentsStack.template.json, RefundsStack.template.json")
    with pytest.raises(TemplateError, match=listed):
        up_options()
    # and the command says so and fails, before starting anything
    assert main(["local", "up"]) == 2
    error = capsys.readouterr().err
    assert "several templates (PaymentsStack.template.json, RefundsStack.template.json)" in error
    assert "pass --template" in error


def test_no_template_starts_with_no_stack_ready_for_cdk_deploy(project: Path) -> None:
    # Given an empty cdk.out: `local up` starts with no stack (to `cdk deploy` into)
    assert up_options()[0] is None
    # and so does --no-stack, whatever cdk.out holds
    synthesized(project, "PaymentsStack")
    assert up_options("--no-stack")[0] is None


def test_no_stack_and_a_template_are_one_too_many(project: Path) -> None:
    with pytest.raises(TemplateError, match="--no-stack starts with no stack, --template with one"):
        up_options("--no-stack", "--template", "PaymentsStack.template.json")


def test_the_demo_without_a_template_says_to_synthesize(project: Path) -> None:
    arguments = build_parser().parse_args(["demo"])
    with pytest.raises(TemplateError, match=r"no \*\.template\.json in cdk\.out: run `cdk synth`"):
        options(arguments, background=True)


def test_a_file_name_that_is_no_stack_name_asks_for_one(project: Path) -> None:
    with pytest.raises(TemplateError, match=r"'my_stack' is not a stack name.*pass --stack-name"):
        up_options("--template", "my_stack.json")


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A loopback port something else listens on."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield int(listener.getsockname()[1])


def test_an_aws_port_already_taken_says_so_and_starts_nothing(tmp_path: Path, taken_port: int) -> None:
    # Given a port another program listens on
    runtime = LocalRuntime(runtime_options(write_template(tmp_path, queue_template()), aws_port=taken_port))

    # When the runtime is asked to serve its AWS endpoint there, Then it refuses at once, naming the port
    with pytest.raises(EndpointUnavailableError, match=f"127.0.0.1:{taken_port}: Address already in use"):
        runtime.start()
    # and it can start on a free port afterwards: the failed start left nothing behind
    with LocalRuntime(runtime_options(write_template(tmp_path, queue_template()))) as started:
        assert started.outputs["WorkUrl"]


def test_an_api_port_already_taken_says_so_through_the_command(
    tmp_path: Path, taken_port: int, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a template with an HTTP API, and its port taken
    path = write_template(tmp_path, template())

    # When `outbox local up` starts on it, Then it fails with the local cause, not AWS's
    status = main(
        [
            "local",
            "up",
            "--template",
            str(path),
            "--no-state",
            "--aws-port",
            "0",
            "--api-port",
            str(taken_port),
        ]
    )
    assert status == 2
    error = capsys.readouterr().err
    assert "cannot serve the HTTP API" in error
    assert f"127.0.0.1:{taken_port}: Address already in use" in error
    assert "AWS" not in error.replace("AWS endpoint", "")


def test_printed_commands_name_the_venvs_script_by_a_path_a_fresh_shell_runs(tmp_path: Path) -> None:
    # Given `outbox` started as this venv's script, Then commands name it by its path: relative to the
    # directory it ran in when under it (as the README shows it), else whole
    venv_script = Path(sys.executable).parent / "outbox"
    project = venv_script.parents[2]
    assert launcher(str(venv_script), project) == f"{venv_script.parents[1].name}/bin/outbox"
    assert launcher(str(venv_script), tmp_path) == str(venv_script)
    # Given `outbox` started as a script of some other install (not this venv's), Then commands say `outbox`
    script = tmp_path / "bin" / "outbox"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\n")
    assert launcher(str(script), tmp_path) == "outbox"
    # Given it started as `python -m outbox_cli.main`, Then commands run this interpreter the same way
    assert launcher("/somewhere/outbox_cli/main.py", tmp_path) == f"{sys.executable} -m outbox_cli.main"


def state_options(*arguments: str) -> tuple[Path | None, bool]:
    chosen = options(build_parser().parse_args(["local", "up", *arguments]), background=False)
    return chosen.state_dir, chosen.fresh_state


def test_local_up_keeps_its_state_in_the_project_unless_told_otherwise(project: Path) -> None:
    # Given a project with a synthesized stack
    synthesized(project, "PaymentsStack")

    # When `local up` is given no state flag, another directory, --fresh, or --no-state
    # Then its state goes to .outbox/local, to that directory, is discarded first, or is not kept at all
    assert state_options() == (Path(".outbox/local"), False)
    assert state_options("--state-dir", "states/dev") == (Path("states/dev"), False)
    assert state_options("--fresh") == (Path(".outbox/local"), True)
    assert state_options("--no-state") == (None, False)


def test_fresh_without_state_is_a_usage_error(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Given a project with a synthesized stack
    synthesized(project, "PaymentsStack")

    # When `local up` is told to discard a state it is told not to keep, Then it refuses before starting
    assert main(["local", "up", "--no-state", "--fresh"]) == 2
    assert "--fresh discards a state directory's state; --no-state keeps none" in capsys.readouterr().err
    assert not (project / ".outbox").exists()
    # and a state directory together with --no-state is refused by the parser
    with pytest.raises(SystemExit):
        build_parser().parse_args(["local", "up", "--no-state", "--state-dir", "x"])


def test_local_up_with_no_stack_says_how_to_deploy_into_it(tmp_path: Path) -> None:
    # Given `outbox local up --no-stack` running in its own process
    environment = {**os.environ, "OUTBOX_LOCAL_STATE_DIR": str(tmp_path / "announced")}
    with running_local_up(["--no-stack"], environment=environment, cwd=tmp_path) as up:
        # Then it says it holds no stack and how to deploy one, and its CloudFormation holds none
        assert "no stack yet" in up.printed
        assert "cdk bootstrap aws://123456789012/us-east-1" in up.printed
        cloudformation = boto3.client(
            "cloudformation", endpoint_url=up.endpoint, region_name="us-east-1", **LOCAL_CREDENTIALS
        )
        assert cloudformation.describe_stacks()["Stacks"] == []
