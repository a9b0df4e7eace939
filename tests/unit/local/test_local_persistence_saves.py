"""When the runtime's persistence saves (`outbox_local.persistence.Persistence`): only when something changed
(a request that changes moto, or the runtime's own state), and never waiting on a hung writer."""

from __future__ import annotations

import importlib.metadata
import io
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from outbox_local.persistence import Persistence, StateNotSavedError, moto_state

SCOPE = "Credential=testing/20261204/us-east-1/{}/aws4_request"
QUIET_S = 0.4
"""How long nothing may be saved: eight cut intervals."""


@pytest.fixture
def persistence(tmp_path: Path) -> Iterator[Persistence]:
    started = Persistence(tmp_path / "state", interval_s=0.05)
    started.open()
    yield started
    started.close()


def request(
    app: Callable[..., Any], service: str, *, target: str = "", action: str = "", method: str = "POST"
) -> bytes:
    body = f"Action={action}".encode() if action else b""
    environ = {
        "REQUEST_METHOD": method,
        "HTTP_AUTHORIZATION": SCOPE.format(service),
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body),
    }
    if target:
        environ["HTTP_X_AMZ_TARGET"] = target
    return b"".join(app(environ, lambda *_: None))


def saved_after(persistence: Persistence, saves: int) -> bool:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if persistence.saves > saves:
            return True
        time.sleep(0.01)
    return False


def test_reads_and_empty_receives_save_nothing_a_write_or_a_moved_checkpoint_does(
    persistence: Persistence,
) -> None:
    # Given a runtime's persistence saving every 50 ms whatever changed, over an endpoint answering
    answers = {"AmazonSQS.ReceiveMessage": b'{"Messages": []}'}

    def endpoint(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        start_response("200 OK", [])
        return [answers.get(environ.get("HTTP_X_AMZ_TARGET", ""), b"{}")]

    app = persistence.wrap(endpoint)
    runtime = {"checkpoint": "1"}
    persistence.start(lambda: dict(runtime))
    saves = persistence.saves

    # When the endpoint serves only reads (an alarm loop's, an S3 GET) and receives that found no message
    for _ in range(3):
        request(app, "monitoring", action="DescribeAlarms")
        request(app, "s3", method="GET")
        request(app, "dynamodb", target="DynamoDB_20120810.Query")
        request(app, "sqs", target="AmazonSQS.ReceiveMessage")
        time.sleep(QUIET_S / 3)
    # Then nothing is saved
    assert persistence.saves == saves

    # When a receive answers a message (its receive count and visibility changed), Then that is saved
    answers["AmazonSQS.ReceiveMessage"] = b'{"Messages": [{"ReceiptHandle": "r"}]}'
    request(app, "sqs", target="AmazonSQS.ReceiveMessage")
    assert saved_after(persistence, saves)
    saves = persistence.saves

    # When a write is served, Then it is saved
    request(app, "dynamodb", target="DynamoDB_20120810.PutItem")
    assert saved_after(persistence, saves)
    saves = persistence.saves

    # When only the runtime's own state changes (a checkpoint moved past filtered records), Then it is saved
    runtime["checkpoint"] = "2"
    assert saved_after(persistence, saves)


def test_a_hung_snapshot_writer_is_killed_and_the_save_fails(
    persistence: Persistence, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a snapshot writer that hangs (its process forked, it never ends), telling its pid
    writer_pid = tmp_path / "writer.pid"

    def hang() -> bytes:
        writer_pid.write_text(str(os.getpid()))
        time.sleep(3600)
        return b""

    monkeypatch.setattr(moto_state, "dump", hang)
    persistence.write_timeout_s = 0.5
    outcome: list[BaseException | None] = []

    def start() -> None:
        try:
            persistence.start(lambda: None)
        except BaseException as error:
            outcome.append(error)
        else:
            outcome.append(None)

    # When the runtime saves
    saving = threading.Thread(target=start, daemon=True)
    saving.start()
    saving.join(5)
    pid = int(writer_pid.read_text()) if writer_pid.exists() else 0
    try:
        # Then the save fails with a typed error once the writer's time is up, instead of hanging
        assert not saving.is_alive(), "the save still waits for its hung writer"
        assert len(outcome) == 1
        assert isinstance(outcome[0], StateNotSavedError)
        assert "0.5 s" in str(outcome[0])
        # and the writer is gone, its temporary file with it
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
        assert not list(persistence.directory.path.glob(".*.tmp"))
    finally:
        if saving.is_alive() and pid:
            os.kill(pid, 9)


def test_the_writer_does_not_look_moto_s_version_up(
    persistence: Persistence, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a lookup of installed packages' versions that would hang in a forked writer (it reads package
    # metadata from disk, with whatever locks the parent's threads held at the fork)
    runtime_pid = os.getpid()
    real_version = importlib.metadata.version

    def version(name: str) -> str:
        if os.getpid() != runtime_pid:
            time.sleep(3600)
        return real_version(name)

    monkeypatch.setattr("outbox_local.persistence.snapshots.version", version)
    persistence.write_timeout_s = 3.0

    # When the runtime saves, Then the writer completes: the version was looked up in the runtime
    persistence.start(lambda: None)
    assert persistence.saves == 1
    snapshot = persistence.directory.read()
    assert snapshot is not None
    assert snapshot.moto_version == real_version("moto")
