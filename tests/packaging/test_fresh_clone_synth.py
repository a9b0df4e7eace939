"""A fresh clone synthesizes the way a CDK user does it (issue 31, Build item 1):

    python -m venv .venv && .venv/bin/pip install -r requirements.txt && cdk synth

The repository's tracked files (what `git clone` gives) are copied to a directory of their own; a new venv
there gets `requirements.txt` and nothing else; then the real CDK CLI (`node_modules/.bin/cdk`, the version
package.json pins) runs `cdk synth` in it with the venv's bin first on PATH, as an activated venv has it. It
must succeed, write the sample's template, and print nothing but the template: a warning (the CLI's
`warn`, Node's end-of-life banner, a deprecation) is a failure.

The synth runs offline: no version check (CDK_DISABLE_VERSION_CHECK, docs/deploy.md "Synthesizing
offline"), and a proxy that refuses every connection, so a call to the network fails instead of passing by
chance. Its environment is the machine's less what the Makefile and the test suite set (fake AWS
credentials, the silenced end-of-life banner): a newcomer's shell has none of them.

The install resolves requirements.txt from the package index as a user's pip does (pinned by
constraints.txt); the slowest test of the suite after the docs' runtime, so it is scheduled first
(tests/conftest.py) and overlaps the rest.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
CDK = REPO_ROOT / "node_modules" / ".bin" / "cdk"
TEMPLATE = Path("cdk.out") / "OutboxStack.template.json"

SET_BY_THE_BUILD = (
    # The Makefile's exports and tests/support/synth.py's default: a user's shell does not have them.
    "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION",
    "CDK_DISABLE_CLI_TELEMETRY",
    "AWS_ACCOUNT_ID_ENDPOINT_MODE",
    "PIP_DISABLE_PIP_VERSION_CHECK",
    # tests/conftest.py's fake credentials and region: synth needs no account.
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SECURITY_TOKEN",
    "AWS_SESSION_TOKEN",
    "AWS_DEFAULT_REGION",
    "POWERTOOLS_TRACE_DISABLED",
    "POWERTOOLS_METRICS_NAMESPACE",
    "POWERTOOLS_DEV",
    # The test runner's own.
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "PYTEST_CURRENT_TEST",
    "PYTEST_XDIST_WORKER",
    "PYTEST_XDIST_WORKER_COUNT",
    "PYTEST_XDIST_TESTRUNUID",
)
REFUSING_PROXY = "http://127.0.0.1:9"
"""The discard port on loopback: nothing listens there, so any connection through it is refused."""


def _users_shell() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if name not in SET_BY_THE_BUILD}


def _run(command: list[str | Path], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - fixed commands on a copy this test made
        [str(part) for part in command], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )


def _fresh_clone(destination: Path) -> Path:
    """The tracked files as a clone has them (a work tree's changes included, so a change is tested before
    it is committed; untracked files, node_modules and .venv left out)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"],  # noqa: S607 - git from PATH, as a developer runs it
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    for relative in filter(None, listed.stdout.split("\0")):
        source = REPO_ROOT / relative
        if source.is_file():  # a tracked file deleted in the work tree is not in a clone of it either
            target = destination / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return destination


def test_a_fresh_clone_synthesizes_with_requirements_txt_and_the_cdk_cli_without_a_warning(
    tmp_path: Path,
) -> None:
    assert CDK.exists(), "the CDK CLI comes with package.json: make setup"
    clone = _fresh_clone(tmp_path / "clone")
    shell = _users_shell()

    # Given a new venv in the clone with requirements.txt installed, and nothing else
    created = _run([sys.executable, "-m", "venv", ".venv"], clone, shell)
    assert created.returncode == 0, created.stderr
    bin_dir = clone / ".venv" / "bin"
    # (--no-compile: the same packages, without writing their bytecode, which is 3/4 of the install's CPU
    # time, ~30 s, and no part of what is tested: Python compiles what it imports either way.)
    installed = _run(
        [bin_dir / "pip", "install", "--quiet", "--no-compile", "-r", "requirements.txt"], clone, shell
    )
    assert installed.returncode == 0, installed.stderr

    # When the CDK CLI synthesizes there, offline, with the venv activated
    activated = shell | {
        "PATH": f"{bin_dir}{os.pathsep}{shell.get('PATH', '')}",
        "VIRTUAL_ENV": str(clone / ".venv"),
        "CDK_DISABLE_VERSION_CHECK": "1",
        **dict.fromkeys(("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"), REFUSING_PROXY),
        "NO_PROXY": "",
        "no_proxy": "",
    }
    synth = _run([CDK, "synth"], clone, activated)

    # Then it succeeds and writes the sample's template: the stack's tables, functions and outputs
    assert synth.returncode == 0, synth.stderr
    template = json.loads((clone / TEMPLATE).read_text())
    types = {resource["Type"] for resource in template["Resources"].values()}
    assert {"AWS::DynamoDB::Table", "AWS::Lambda::Function", "AWS::SNS::Topic"} <= types
    assert "OutboxTableName" in template["Outputs"]
    # And it prints the template (YAML on stdout) and nothing else: no warning, no notice, no stray line
    assert "\nResources:\n" in synth.stdout, synth.stdout[:300]
    assert synth.stderr.strip() == "", synth.stderr
