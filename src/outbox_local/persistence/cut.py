"""The cut: an instant at which moto's state and the runtime's own are read together, with no request half
done. Every request to the AWS endpoint holds the cut lock shared while moto serves it, its answer
included; a cut takes it exclusively, so it waits for the requests under way and new ones wait for it.

Why that is consistent: a stream mapping's checkpoint only ever moves after its invocation returned, that
is after every call the invocation made was answered. Read during a cut, a checkpoint is never ahead of the
effects it stands for; at worst behind them (their records are invoked again after a restore: duplicates,
never losses).

SQS `ReceiveMessage` does not take the lock: a long poll would hold a cut, and with it every request, for up
to 20 s. The cut holds each queue's own lock instead (`outbox_local.persistence.moto_state`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from outbox_local.faults import WsgiApp, operation_of

_UNLOCKED = frozenset({("sqs", "ReceiveMessage")})


class CutLock:
    """Shared by requests, exclusive for a cut; a cut waiting goes before requests arriving after it, so a
    steady stream of requests never starves it."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._requests = 0
        self._cuts_waiting = 0
        self._cutting = False
        self.served = 0
        """Requests served so far (SQS receives included): a cut with none since the last one has nothing
        new to save."""

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
                self.served += 1
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
            signed_for_sqs = "/sqs/aws4_request" in environ.get("HTTP_AUTHORIZATION", "")
            if signed_for_sqs and operation_of(environ) in _UNLOCKED:
                try:
                    return app(environ, start_response)
                finally:
                    with self._changed:
                        self.served += 1  # counted once it changed its queue: the next cut saves that
            with self.request():
                body = app(environ, start_response)
                try:
                    return [b"".join(body)]
                finally:
                    close = getattr(body, "close", None)
                    if close is not None:
                        close()

        return middleware
