"""The persistence layer's parts without moto: the cut lock, the state directory's file and lock, and the
snapshotter's group commit (`outbox_local.persistence`)."""

from __future__ import annotations

import io
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from outbox_local.persistence.cut import CutLock
from outbox_local.persistence.snapshots import SNAPSHOT_FILE, Snapshot, StateDirectory, StateDirError
from outbox_local.persistence.snapshotter import Snapshotter, StateNotSavedError


def test_a_cut_waits_for_the_requests_under_way_and_holds_new_ones() -> None:
    # Given a request under way
    lock = CutLock()
    order: list[str] = []
    request_may_end = threading.Event()

    def request(name: str, hold: threading.Event | None = None) -> None:
        with lock.request():
            order.append(f"{name} in")
            if hold is not None:
                hold.wait(5)
            order.append(f"{name} out")

    first = threading.Thread(target=request, args=("first", request_may_end))
    first.start()
    while "first in" not in order:
        time.sleep(0.01)

    # When a cut starts, then another request arrives
    def cut() -> None:
        with lock.cut():
            order.append("cut")

    cutting = threading.Thread(target=cut)
    cutting.start()
    time.sleep(0.1)
    second = threading.Thread(target=request, args=("second",))
    second.start()
    time.sleep(0.1)
    assert order == ["first in"]
    request_may_end.set()
    for thread in (first, cutting, second):
        thread.join(5)

    # Then the cut came after the first request's end, and the second request after the cut
    assert order == ["first in", "first out", "cut", "second in", "second out"]


def test_the_wsgi_layer_serves_under_the_lock_and_lets_sqs_receives_through() -> None:
    # Given the layer over an app that records whether a cut could run while it served
    lock = CutLock()
    seen: list[bool] = []

    def app(_environ: dict[str, Any], start_response: Any) -> list[bytes]:
        cut_could_run = lock._changed.acquire(timeout=1) and lock._requests == 0
        lock._changed.release()
        seen.append(cut_could_run)
        start_response("200 OK", [])
        return [b"a", b"b"]

    wrapped = lock.wrap(app)
    scope = "Credential=testing/20261204/us-east-1/{}/aws4_request"

    def call(service: str, target: str) -> list[bytes]:
        environ = {
            "HTTP_AUTHORIZATION": scope.format(service),
            "HTTP_X_AMZ_TARGET": target,
            "wsgi.input": io.BytesIO(),
        }
        return list(wrapped(environ, lambda *_: None))

    # When a DynamoDB request and an SQS receive are served
    assert call("dynamodb", "DynamoDB_20120810.PutItem") == [b"ab"]
    assert call("sqs", "AmazonSQS.ReceiveMessage") == [b"ab"]

    # Then the first held the lock, the receive did not
    assert seen == [False, True]


def test_a_snapshot_is_replaced_whole_and_read_back(tmp_path: Path) -> None:
    # Given a state directory holding one snapshot
    directory = StateDirectory(tmp_path / "state")
    directory.claim()
    directory.write(Snapshot(moto=b"first", runtime={"stacks": 1}).encode())

    # When a second one is written
    directory.write(Snapshot(moto=b"second", runtime={"stacks": 2}).encode())

    # Then the second is read back, and no temporary file is left beside it
    assert directory.read() == Snapshot(moto=b"second", runtime={"stacks": 2})
    assert sorted(p.name for p in directory.path.iterdir()) == ["lock", SNAPSHOT_FILE]
    directory.discard()
    assert directory.read() is None


def test_a_file_that_is_no_snapshot_is_refused_with_the_way_out(tmp_path: Path) -> None:
    # Given a state directory whose snapshot file is something else, or cut short
    directory = StateDirectory(tmp_path)
    (tmp_path / SNAPSHOT_FILE).write_bytes(b"hello")
    with pytest.raises(StateDirError, match="--fresh"):
        directory.read()
    directory.write(Snapshot(moto=b"m", runtime=None).encode())
    whole = (tmp_path / SNAPSHOT_FILE).read_bytes()
    (tmp_path / SNAPSHOT_FILE).write_bytes(whole[:-5])

    # When it is read, Then the error names it and says how to start anyway
    with pytest.raises(StateDirError, match=r"cannot be read.*--fresh"):
        directory.read()


def test_one_runtime_per_state_directory(tmp_path: Path) -> None:
    # Given a state directory claimed by one runtime
    first = StateDirectory(tmp_path)
    first.claim()

    # When a second claims it, Then it is refused, naming the holder's pid
    with pytest.raises(StateDirError, match=f"in use by another `outbox local up` \\(pid {os.getpid()}\\)"):
        StateDirectory(tmp_path).claim()

    # And once released (or its process gone), it can be claimed again
    first.release()
    second = StateDirectory(tmp_path)
    second.claim()
    second.release()


def test_callers_waiting_together_share_one_save_started_after_they_asked() -> None:
    # Given a snapshotter in the middle of a save (held until the gate opens)
    saves: list[int] = []
    in_save, gate = threading.Event(), threading.Event()

    def save() -> None:
        in_save.set()
        gate.wait(5)
        saves.append(len(saves))

    snapshotter = Snapshotter(save, interval_s=60)
    snapshotter.start()
    try:
        first = threading.Thread(target=snapshotter.wait_saved, args=(5,))
        first.start()
        assert in_save.wait(5)

        # When five callers ask meanwhile, then the save ends
        callers = [threading.Thread(target=snapshotter.wait_saved, args=(5,)) for _ in range(5)]
        for caller in callers:
            caller.start()
        time.sleep(0.1)
        gate.set()
        for caller in [first, *callers]:
            caller.join(5)
        assert not any(caller.is_alive() for caller in callers)
        served = list(saves)
    finally:
        snapshotter.stop()

    # Then the one save after theirs served all five; the stop made a last one
    assert served == [0, 1]
    assert saves == [0, 1, 2]


def test_a_save_started_before_the_call_does_not_count() -> None:
    # Given a save under way when a caller asks
    in_save = threading.Event()
    may_finish = threading.Event()
    saves: list[int] = []

    def save() -> None:
        in_save.set()
        may_finish.wait(5)
        saves.append(len(saves))

    snapshotter = Snapshotter(save, interval_s=0.01)
    snapshotter.start()
    try:
        in_save.wait(5)
        done = threading.Event()

        def caller() -> None:
            snapshotter.wait_saved(5)
            done.set()

        threading.Thread(target=caller).start()
        time.sleep(0.05)

        # When that save ends
        may_finish.set()

        # Then the caller is answered only after the next one
        assert done.wait(5)
        assert len(saves) >= 2
    finally:
        snapshotter.stop()


def test_a_failed_save_reaches_its_callers_and_the_next_one_serves_the_next() -> None:
    # Given a snapshotter whose disk refuses the first save
    attempts: list[int] = []

    def save() -> None:
        attempts.append(len(attempts))
        if len(attempts) == 1:
            raise OSError("No space left on device")

    snapshotter = Snapshotter(save, interval_s=60)
    snapshotter.start()
    try:
        # When callers wait for their work to be saved
        # Then the first is told why it was not, the next one is served by the next save
        with pytest.raises(StateNotSavedError, match="No space left"):
            snapshotter.wait_saved(5)
        snapshotter.wait_saved(5)
    finally:
        snapshotter.stop()
    with pytest.raises(StateNotSavedError, match="not saving"):
        snapshotter.wait_saved(1)


def test_a_directory_whose_runtime_is_gone_is_claimed_once_its_writer_finishes(tmp_path: Path) -> None:
    # Given a runtime (a child process) that claimed the directory, forked a snapshot writer that still holds
    # the lock, and was killed (it exited; the writer goes on for a moment)
    runtime = os.fork()
    if runtime == 0:
        claimed = StateDirectory(tmp_path)
        claimed.claim()
        if os.fork() == 0:  # the writer: holds the inherited lock a little longer
            time.sleep(0.5)
            os._exit(0)
        os._exit(0)
    os.waitpid(runtime, 0)

    # When another runtime claims the directory
    started = time.monotonic()
    directory = StateDirectory(tmp_path)
    directory.claim()

    # Then it waited for the writer instead of refusing (the runtime named in the lock file is gone)
    assert time.monotonic() - started >= 0.2
    directory.release()


def test_a_snapshot_another_moto_saved_is_refused(tmp_path: Path) -> None:
    # Given a snapshot saved by another version of moto
    directory = StateDirectory(tmp_path)
    directory.write(Snapshot(moto=b"m", runtime=None, moto_version="0.0.1").encode())

    # When it is read, Then it is refused, naming both versions and the way out
    with pytest.raises(StateDirError, match=r"saved by moto 0\.0\.1, this is moto .*--fresh"):
        directory.read()
