"""The `outbox` command: `local up` in a subprocess (ready line, Ctrl-C) and the demo on the real stack."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
from pathlib import Path

import boto3
import pytest

from outbox_cli.demo import run_demo
from outbox_cli.main import main
from outbox_local.runtime import RuntimeOptions
from tests.support.aws import moto_server
from tests.support.local_templates import local_up, template, write_template
from tests.support.synth import Synthesized

REPOSITORY = Path(__file__).resolve().parents[3]


def test_local_up_prints_what_to_use_and_stops_cleanly_on_ctrl_c(tmp_path: Path) -> None:
    # Given `outbox local up` started on free ports in its own process
    with local_up(write_template(tmp_path, template())) as started:
        # When it reports ready
        text = started.printed

        # Then it printed the stack (named as its template's file), the endpoint, the API URL, what the stack
        # holds, how to operate it and the resources' names
        assert "outbox local runtime (moto, no AWS account): stack template\n" in text
        assert "AWS endpoint  http://127.0.0.1:" in text
        assert "HTTP API      http://127.0.0.1:" in text
        holds = "1 table, 3 functions, 1 topic, 1 event bus, 4 queues, 1 HTTP API, 1 alarm"
        assert f"Resources     {holds}\n" in text
        assert "export AWS_ENDPOINT_URL=http://127.0.0.1:" in text
        assert ".venv/bin/outbox status --stack template --endpoint-url http://127.0.0.1:" in text
        assert "TableName" in text
        assert "route     POST /items" in text

        # When it gets SIGINT (Ctrl-C), Then it stops by itself with exit status 0
        started.process.send_signal(signal.SIGINT)
        assert started.process.wait(timeout=30) == 0
        assert started.process.stdout is not None
        assert "stopped" in started.process.stdout.read()


def test_a_template_that_cannot_run_makes_the_command_fail_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a template path that does not exist, When `outbox demo` runs, Then it exits 2 and says why
    assert main(["demo", "--template", str(tmp_path / "missing.json")]) == 2
    error = capsys.readouterr().err
    assert error.startswith("outbox: ")
    assert "missing.json" in error
    assert "TemplateError" not in error  # the cause, not a class name


def test_the_demo_passes_on_the_synthesized_stack_with_the_real_functions(synthesized: Synthesized) -> None:
    # Given the sample app synthesized as `cdk synth` writes it, each function with its own asset
    out = io.StringIO()

    # When the narrated scenario runs
    status = run_demo(RuntimeOptions(template_path=synthesized.template_path, background=True), out)

    # Then every invariant held and the summary was printed
    printed = out.getvalue()
    assert status == 0, printed
    # and running the functions left nothing in their assets that `cdk deploy` would ship
    assert not list(synthesized.outdir.glob("asset.*/**/__pycache__"))
    assert "PASSED" in printed
    assert "duplicates seen on the queues" in printed


def test_outbox_local_env_prints_exports_that_point_a_shell_at_the_endpoint() -> None:
    # Given an AWS endpoint (moto's server, as `outbox local up` serves one)
    with moto_server() as endpoint:
        boto3.client("sqs", endpoint_url=endpoint, region_name="eu-west-1").create_queue(QueueName="seen")
        # When a shell evals `outbox local env` for it, then runs a plain boto3 script without any setting
        script = (
            f'eval "$({sys.executable} -m outbox_cli.main local env --endpoint-url {endpoint} '
            f'--region eu-west-1)"'
            f" && {sys.executable} -c \"import boto3; print(boto3.client('sqs').list_queues()['QueueUrls'])\""
        )
        result = subprocess.run(  # noqa: S603 - our own CLI and interpreter
            ["/bin/sh", "-c", script],
            capture_output=True,
            text=True,
            check=False,
            env={"PATH": os.environ.get("PATH", "")},
        )
    # Then the script found the endpoint's queue: the exports are all it needed
    assert result.returncode == 0, result.stderr
    assert "/seen" in result.stdout
