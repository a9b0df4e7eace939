"""One `outbox local up` for every command of the docs, started as a reader starts it, and the fresh shell the
docs' commands run in.

A reader's shell has no virtual environment on PATH, no AWS variable exported and no AWS configuration: so
has this one (its PATH is the caller's without the project's venv, its HOME a directory of its own). Its
temporary directory is its own too: `outbox local up` announces itself there and `outbox local env` finds it
there, so another runtime running on this machine (another test, another user) is not the one it finds.
"""

from __future__ import annotations

import fcntl
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest

from infra.constants import STACK_ID
from outbox import outputs
from outbox.model import RowKey
from tests.integration.ops.test_ops_status_and_failed import BAD_PAYLOAD, new
from tests.support.aws import endpoint_client
from tests.support.doc_commands import REPOSITORY
from tests.support.local_templates import running_local_up
from tests.support.synth import synthesize

VENV_BIN = Path(sys.executable).parent
"""Where the project's tools are: the `outbox` command, pip, and the AWS CLI v1 (requirements-dev.txt)."""

LOCAL_UP_COMMAND = (".venv/bin/outbox",)
"""As docs/local.md shows it, run from the clone (so it names itself `.venv/bin/outbox` in what it prints)."""


def pytest_configure(config: pytest.Config) -> None:
    # pytest-xdist registers the marker; this lets the module run without it too (`-p no:xdist`).
    config.addinivalue_line("markers", "xdist_group(name): run the group's tests on one worker")


def fresh_environment(home: Path) -> dict[str, str]:
    """A new terminal's environment: the caller's PATH without the project's venv, nothing of AWS's or the
    project's, a home (and a temporary directory) of its own."""
    venv = VENV_BIN.parent.resolve()
    path = [
        entry
        for entry in os.environ.get("PATH", os.defpath).split(os.pathsep)
        if entry and not Path(entry).resolve().is_relative_to(venv)
    ]
    temporary = home / "tmp"
    temporary.mkdir(parents=True, exist_ok=True)
    return {
        "PATH": os.pathsep.join(path),
        "HOME": str(home),
        "TMPDIR": str(temporary),
        "LANG": "C.UTF-8",
        # The AWS CLI would page its output through `less`; a terminal that is no terminal has no pager.
        "PAGER": "cat",
    }


@dataclass(frozen=True)
class World:
    """What the docs' operations examples act on (docs/operations.md): two FAILED events, one for the redrive
    examples and one for the skip example, and `Order#42` held behind its FAILED seq 4."""

    redrive_event_id: str
    skip_event_id: str


@dataclass(frozen=True)
class DocsRuntime:
    endpoint: str
    api_url: str
    printed: str
    """What `outbox local up` printed up to `ready`."""
    template: Path
    outputs: dict[str, str]
    environment: dict[str, str]
    """The fresh shell's environment (fresh_environment), the runtime's own."""
    world: World


def drain(stream: IO[str] | None) -> None:
    """Read what the runtime prints (its functions' logs) so that a full pipe never blocks it."""
    if stream is not None:
        for _line in stream:
            pass


def stack_outputs(endpoint: str) -> dict[str, str]:
    stack = endpoint_client(endpoint, "cloudformation").describe_stacks(StackName=STACK_ID)["Stacks"][0]
    return {output["OutputKey"]: output["OutputValue"] for output in stack["Outputs"]}


def build_world(endpoint: str, table: str) -> World:
    """Rows written as another writer would; the runtime's own stream mapping publishes them."""
    dynamodb = endpoint_client(endpoint, "dynamodb")
    redrive, skip = new("docs-redrive", 1), new("docs-skip", 1)
    for poison in (redrive, skip):
        dynamodb.put_item(TableName=table, Item={**poison.to_item(), **BAD_PAYLOAD})
    for seq in range(1, 6):
        bad = BAD_PAYLOAD if seq == 4 else {}
        dynamodb.put_item(TableName=table, Item={**new("42", seq).to_item(), **bad})
    # Published rows leave the table: seq 1-3 are gone, seq 4 is FAILED and holds seq 5.
    expected = {
        RowKey(redrive.aggregate_key, 1): "FAILED",
        RowKey(skip.aggregate_key, 1): "FAILED",
        RowKey("Order#42", 4): "FAILED",
        RowKey("Order#42", 5): "PENDING",
    }
    keys = [*expected, *(RowKey("Order#42", seq) for seq in range(1, 4))]
    deadline = time.monotonic() + 60
    while (found := statuses(dynamodb, table, keys)) != expected:
        assert time.monotonic() < deadline, f"the runtime did not publish the docs' rows: {found}"
        time.sleep(0.5)
    return World(redrive_event_id=redrive.event_id, skip_event_id=skip.event_id)


def statuses(dynamodb: Any, table: str, keys: list[RowKey]) -> dict[RowKey, str]:
    items = [
        dynamodb.get_item(TableName=table, Key=key.item(), ConsistentRead=True).get("Item") for key in keys
    ]
    return {key: item["status"]["S"] for key, item in zip(keys, items, strict=True) if item}


def shared_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample app's template, synthesized once for every worker of this run (pytest-xdist): the first to
    come synthesizes it into a directory the run's workers share, under a lock; the others read it there.
    Without xdist, in a directory of this session's own."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    base = tmp_path_factory.getbasetemp()
    directory = base.parent / f"docs-sample-{run}" if run else base / "docs-sample"
    directory.mkdir(exist_ok=True)
    template = directory / "cdk.out" / f"{STACK_ID}.template.json"
    with (directory / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not template.exists():
            synthesize(template.parent)
    return template


@pytest.fixture(scope="module")
def docs_runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DocsRuntime]:
    assert (VENV_BIN / "aws").exists(), "the AWS CLI v1 comes with requirements-dev.txt: make setup"
    template = shared_template(tmp_path_factory)
    environment = fresh_environment(tmp_path_factory.mktemp("home"))
    # As docs/local.md runs it, from the clone, in a fresh shell; only the template (this run's synthesized
    # one, not whatever cdk.out holds) and the ports (free ones, not the defaults the docs show) differ.
    with running_local_up(
        ["--template", str(template)], environment=environment, cwd=REPOSITORY, command=LOCAL_UP_COMMAND
    ) as started:
        for stream in (started.process.stdout, started.process.stderr):
            threading.Thread(target=drain, args=(stream,), daemon=True).start()
        api = re.search(r"HTTP API\s+(http://\S+)", started.printed)
        assert api, started.printed
        found = stack_outputs(started.endpoint)
        yield DocsRuntime(
            endpoint=started.endpoint,
            api_url=api.group(1),
            printed=started.printed,
            template=template,
            outputs=found,
            environment=environment,
            world=build_world(started.endpoint, found[outputs.OUTBOX_TABLE_NAME]),
        )
        started.process.send_signal(signal.SIGINT)
        started.process.wait(timeout=30)
