"""The cut: an instant at which moto's state and the runtime's own are read together, with no request half
done. Every request to the AWS endpoint holds the cut lock shared while moto serves it, its answer
included; a cut takes it exclusively, so it waits for the requests under way and new ones wait for it.

Why that is consistent: a stream mapping's checkpoint only ever moves after its invocation returned, that
is after every call the invocation made was answered. Read during a cut, a checkpoint is never ahead of the
effects it stands for; at worst behind them (their records are invoked again after a restore: duplicates,
never losses).

SQS `ReceiveMessage` does not take the lock: a long poll would hold a cut, and with it every request, for up
to 20 s. The cut holds each queue's own lock instead (`outbox_local.persistence.moto_state`).

The lock counts the requests that may have changed moto (`changes`): a cut with none since the last one and
the runtime's own state as it was has nothing new to save. Reads do not count (an idle runtime's alarm loop
reads CloudWatch and SQS each second), nor do receives that answered no message.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from outbox_local.faults import WsgiApp, operation_of

_UNLOCKED = frozenset({("sqs", "ReceiveMessage")})
_READ_PREFIXES = ("Describe", "Get", "List", "Head")
_READS = frozenset({"Query", "Scan", "BatchGetItem"})
_READS_THAT_CHANGE = frozenset({"GetShardIterator", "GetRecords"})
"""moto keeps each stream iterator it hands out (and the next one GetRecords answers) in its backend."""
_RECEIVED = b"ReceiptHandle"
"""In a receive's answer (JSON and XML protocols alike) only when it answered a message."""


def changes_state(environ: dict[str, Any], operation: str) -> bool:
    """Whether a request may change moto's state: all but reads. A REST request (S3, Lambda's API: no
    operation in its body or headers) reads when it is a GET or a HEAD."""
    if not operation:
        return environ.get("REQUEST_METHOD", "POST") not in ("GET", "HEAD")
    if operation in _READS_THAT_CHANGE:
        return True
    return not (operation in _READS or operation.startswith(_READ_PREFIXES))


class CutLock:
    """Shared by requests, exclusive for a cut; a cut waiting goes before requests arriving after it, so a
    steady stream of requests never starves it."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._requests = 0
        self._cuts_waiting = 0
        self._cutting = False
        self.changes = 0
        """Requests served so far that may have changed moto's state (`changes_state`)."""

    @contextlib.contextmanager
    def request(self) -> Iterator[None]:
        with self._changed:
            self._changed.wait_for(lambda: not self._cutting and not self._cuts_waiting)
            self._requests += 1
        try:
            yield
        finally:
            with self._changed:
                self._requests -= 1
                if not self._requests:
                    self._changed.notify_all()

    @contextlib.contextmanager
    def cut(self) -> Iterator[None]:
        with self._changed:
            self._cuts_waiting += 1
            try:
                self._changed.wait_for(lambda: not self._cutting and not self._requests)
            finally:
                self._cuts_waiting -= 1
            self._cutting = True
        try:
            yield
        finally:
            with self._changed:
                self._cutting = False
                self._changed.notify_all()

    def wrap(self, app: WsgiApp) -> WsgiApp:
        """The endpoint's application, each request served under the lock, its whole answer included."""

        def middleware(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            operation = operation_of(environ)
            if operation in _UNLOCKED:
                answer = _whole(app(environ, start_response))
                if _RECEIVED in answer[0]:
                    with self._changed:
                        self.changes += 1  # counted once it changed its queue: the next cut saves that
                return answer
            with self.request():
                answer = _whole(app(environ, start_response))
                if changes_state(environ, operation[1]):
                    with self._changed:
                        self.changes += 1
                return answer

        return middleware


def _whole(body: Iterable[bytes]) -> list[bytes]:
    """An answer read whole (and its iterable closed, as a WSGI server would)."""
    try:
        return [b"".join(body)]
    finally:
        close = getattr(body, "close", None)
        if close is not None:
            close()
