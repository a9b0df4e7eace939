"""One `outbox local up` for every command of the docs: its own process on the synthesized app, as a reader
starts it, holding what the docs' operations examples act on, and the shell environment `outbox local env`
prints for it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
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
from tests.support.local_templates import local_up
from tests.support.synth import Synthesized

VENV_BIN = Path(sys.executable).parent
"""Where the project's tools are: the `outbox` command, pip, and the AWS CLI v1 (requirements-dev.txt)."""


def pytest_configure(config: pytest.Config) -> None:
    # pytest-xdist registers the marker; this lets the module run without it too (`-p no:xdist`).
    config.addinivalue_line("markers", "xdist_group(name): run the group's tests on one worker")


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
    outputs: dict[str, str]
    environment: dict[str, str]
    """The tests' environment, what `outbox local env` exports, and the project's tools first on PATH."""
    world: World


def exports(printed: str) -> dict[str, str]:
    return dict(re.findall(r"^export (\w+)=(\S*)$", printed, re.MULTILINE))


def local_env(endpoint: str) -> str:
    result = subprocess.run(  # noqa: S603 - our own CLI
        [str(VENV_BIN / "outbox"), "local", "env", "--endpoint-url", endpoint],
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout


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


@pytest.fixture(scope="module")
def docs_runtime(synthesized: Synthesized) -> Iterator[DocsRuntime]:
    assert (VENV_BIN / "aws").exists(), "the AWS CLI v1 comes with requirements-dev.txt: make setup"
    aws_cli = subprocess.run(  # noqa: S603 - the venv's own AWS CLI
        [str(VENV_BIN / "aws"), "--version"], capture_output=True, text=True, check=False
    )
    assert aws_cli.stdout.startswith("aws-cli/1."), aws_cli.stdout
    with local_up(synthesized.template_path) as started:
        for stream in (started.process.stdout, started.process.stderr):
            threading.Thread(target=drain, args=(stream,), daemon=True).start()
        api = re.search(r"HTTP API\s+(http://\S+)", started.printed)
        assert api, started.printed
        found = stack_outputs(started.endpoint)
        environment = {
            **os.environ,
            **exports(local_env(started.endpoint)),
            "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            # AWS CLI v2 would page its output through `less`.
            "AWS_PAGER": "",
        }
        yield DocsRuntime(
            endpoint=started.endpoint,
            api_url=api.group(1),
            printed=started.printed,
            outputs=found,
            environment=environment,
            world=build_world(started.endpoint, found[outputs.OUTBOX_TABLE_NAME]),
        )
        started.process.send_signal(signal.SIGINT)
        started.process.wait(timeout=30)
