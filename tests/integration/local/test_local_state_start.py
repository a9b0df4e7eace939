"""A runtime with a state directory as it starts and idles: a client served as soon as the AWS endpoint
answers sees the restored state and keeps what it wrote; an idle runtime writes no snapshot; a checkpoint
moved past filtered records, with no request made, is saved."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto.moto_api._internal.models import moto_api_backend

from outbox_local.aws_server import LocalAwsServer
from outbox_local.endpoint import LOCAL_CREDENTIALS
from outbox_local.runtime import LocalRuntime, RuntimeOptions
from tests.support.local_templates import options as template_options
from tests.support.local_templates import template, write_template

IDLE_S = 2.5
"""Two and a half cut intervals (`outbox_local.persistence.CUT_INTERVAL_S`)."""


def options(tmp_path: Path, *, background: bool) -> RuntimeOptions:
    return RuntimeOptions(template_path=None, background=background, state_dir=tmp_path / "state")


def test_a_client_served_as_the_runtime_starts_sees_the_restored_state_and_keeps_its_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a state directory holding a table with one item
    with LocalRuntime(options(tmp_path, background=False)) as first:
        dynamodb = first.client("dynamodb")
        dynamodb.create_table(
            TableName="kept",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        dynamodb.put_item(TableName="kept", Item={"pk": {"S": "saved"}})
    moto_api_backend.reset()  # as in a new process: the runtime starts again from an empty moto

    # When a client is served the moment the endpoint answers (a client retrying on the runtime's fixed port),
    # reading the saved item and writing one of its own, acknowledged
    seen: list[Any] = []
    serve = LocalAwsServer.start

    def start_then_serve_a_client(server: LocalAwsServer) -> None:
        serve(server)
        client = boto3.client(
            "dynamodb", endpoint_url=server.endpoint_url, region_name="us-east-1", **LOCAL_CREDENTIALS
        )
        try:
            seen.append(client.get_item(TableName="kept", Key={"pk": {"S": "saved"}}).get("Item"))
            client.put_item(TableName="kept", Item={"pk": {"S": "written at start"}})
        except Exception as error:
            seen.append(error)

    monkeypatch.setattr(LocalAwsServer, "start", start_then_serve_a_client)
    with LocalRuntime(options(tmp_path, background=False)) as second:
        # Then it was served from the restored state, and its write is kept
        assert seen == [{"pk": {"S": "saved"}}]
        keys = {item["pk"]["S"] for item in second.client("dynamodb").scan(TableName="kept")["Items"]}
        assert keys == {"saved", "written at start"}


def test_an_idle_runtime_writes_no_snapshot(tmp_path: Path) -> None:
    # Given a runtime running in the background (its alarm loop reading CloudWatch each second), settled
    with LocalRuntime(options(tmp_path, background=True)) as runtime:
        assert runtime.persistence is not None
        time.sleep(0.5)
        saves = runtime.persistence.saves

        # When nothing happens for a while
        time.sleep(IDLE_S)

        # Then nothing is saved: reads change nothing
        assert runtime.persistence.saves == saves


def moved_on(stack: Any, checkpoint: str | None) -> str:
    """The stack's one mapping's checkpoint, once it is another than `checkpoint`."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        [runner] = stack.mappings
        [position] = runner.positions()
        if position.checkpoint is not None and position.checkpoint != checkpoint:
            return str(position.checkpoint)
        time.sleep(0.02)
    raise AssertionError(f"the mapping's checkpoint stayed at {checkpoint}")


def test_a_checkpoint_moved_past_filtered_records_is_saved(tmp_path: Path) -> None:
    # Given a runtime in the background whose stream mapping passes only INSERTs, an item inserted (and
    # delivered), the runtime settled
    state_dir = tmp_path / "state"
    path = write_template(tmp_path, template())
    with LocalRuntime(template_options(path, background=True, state_dir=state_dir)) as runtime:
        assert runtime.persistence is not None
        dynamodb = runtime.client("dynamodb")
        [table] = [ref for logical_id, _, ref in runtime.resource_names() if logical_id == "Items"]
        dynamodb.put_item(TableName=table, Item={"pk": {"S": "a"}})
        [stack] = runtime.stacks.values()
        inserted = moved_on(stack, None)

        # When the item is modified: a record the mapping filters out, its checkpoint moved past it with no
        # request made (the write itself was saved by an earlier cut, before the mapping could read it)
        dynamodb.put_item(TableName=table, Item={"pk": {"S": "a"}, "n": {"N": "1"}})
        moved_on(stack, inserted)
        live = {runner.name: tuple(runner.positions()) for runner in stack.mappings}

        # Then a cut saves that checkpoint
        deadline = time.monotonic() + 5
        saved: dict[str, Any] = {}
        while time.monotonic() < deadline:
            snapshot = runtime.persistence.directory.read()
            assert snapshot is not None
            saved = dict(snapshot.runtime.stacks[0].positions)
            if saved == live:
                break
            time.sleep(0.1)
        assert saved == live
