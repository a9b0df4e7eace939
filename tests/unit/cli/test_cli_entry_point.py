"""The `outbox` command's entry point: help without the local runtime, a clear message without the extra."""

from __future__ import annotations

import json
import os
import subprocess
import sys

# Modules an operator running `outbox` against AWS must never load.
LOCAL_ONLY = ("moto", "outbox_local", "werkzeug", "aws_cdk", "aws_lambda_powertools")

_RUN = """
import json, sys
for blocked in sys.argv[2:]:
    sys.modules[blocked] = None  # as if the package were not installed
from outbox_cli.main import main
try:
    status = main(json.loads(sys.argv[1]))
except SystemExit as exit:
    status = exit.code
loaded = sorted({name.partition(".")[0] for name in sys.modules if sys.modules[name] is not None})
print(json.dumps({"status": status, "loaded": loaded}))
"""


def _outbox(
    arguments: list[str], *, uninstalled: tuple[str, ...] = (), env: dict[str, str] | None = None
) -> tuple[dict[str, object], str]:
    result = subprocess.run(  # noqa: S603 - this interpreter, our own entry point
        [sys.executable, "-c", _RUN, json.dumps(arguments), *uninstalled],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    report: dict[str, object] = json.loads(result.stdout.strip().splitlines()[-1])
    return report, result.stderr


def test_help_loads_neither_the_local_runtime_nor_moto() -> None:
    # Given a fresh interpreter, When `outbox --help` runs
    report, _ = _outbox(["--help"])

    # Then it succeeds without importing anything only the local commands need
    assert report["status"] == 0
    loaded = report["loaded"]
    assert isinstance(loaded, list)
    assert not set(LOCAL_ONLY) & set(loaded)


def test_a_local_command_without_the_local_extra_says_how_to_install_it() -> None:
    # Given an install without the `local` extra (moto absent)
    # When `outbox local up` runs
    report, stderr = _outbox(["local", "up"], uninstalled=("moto",))

    # Then it fails with exit status 2 and the command that fixes it
    assert report["status"] == 2
    assert "pip install 'dynamodb-outbox[local]'" in stderr
    assert "moto" in stderr


def test_an_operations_command_runs_without_the_local_runtime_and_fails_in_one_line() -> None:
    # Given an install without the local extra, and no AWS credentials anywhere
    environment = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": "/nonexistent",
        "AWS_EC2_METADATA_DISABLED": "true",
    }

    # When an operations command runs
    report, stderr = _outbox(
        ["status", "--table", "outbox", "--region", "us-east-1"], uninstalled=LOCAL_ONLY, env=environment
    )

    # Then it loaded nothing of the local runtime, and failed with one line saying why (exit 1)
    assert report["status"] == 1
    assert stderr == (
        "outbox: no AWS credentials found (AWS was not called): configure them (aws configure, AWS_PROFILE), "
        "or pass --profile\n"
    )
    assert stderr.count("\n") == 1
    loaded = report["loaded"]
    assert isinstance(loaded, list)
    assert not set(LOCAL_ONLY) & set(loaded)
