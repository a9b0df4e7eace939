"""A meeting point on loopback for handlers that run in worker processes (another process than the test's).

Each invocation connects, says which process it runs in, and waits until the test releases it. A test proves
that invocations overlap by having several of them connected at once, and holds one under way as long as it
needs: nothing sleeps, nothing is timed. `meet` is the handler's side (`MEET`: its source, for a handler
module a test writes).
"""

from __future__ import annotations

import contextlib
import inspect
import os
import socket
from types import TracebackType

SAFETY_TIMEOUT_S = 60.0
"""Only so that a broken runtime fails the test instead of hanging it: no test waits for it to pass."""


def meet(port: int) -> None:
    """In the handler: say which process this is, then wait until the test releases it."""
    with socket.create_connection(("127.0.0.1", port)) as connection:
        connection.sendall(f"{os.getpid()}\n".encode())
        connection.recv(2)


MEET = "import os\nimport socket\n\n\n" + inspect.getsource(meet)


class Rendezvous:
    def __init__(self) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(SAFETY_TIMEOUT_S)
        self.port: int = self._server.getsockname()[1]
        self._waiting: list[socket.socket] = []

    def __enter__(self) -> Rendezvous:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def arrivals(self, count: int) -> list[int]:
        """Wait for `count` more invocations to arrive; the process ids they run in. They stay held."""
        pids = []
        for _ in range(count):
            connection, _ = self._server.accept()
            connection.settimeout(SAFETY_TIMEOUT_S)
            pids.append(int(connection.makefile("rb").readline()))
            self._waiting.append(connection)
        return pids

    def release(self, count: int | None = None) -> None:
        """Let the first `count` held invocations (all, by default) go on."""
        released = self._waiting[:count] if count is not None else list(self._waiting)
        for connection in released:
            with contextlib.suppress(OSError):  # its process was killed meanwhile: nothing to release
                connection.sendall(b"go")
            connection.close()
            self._waiting.remove(connection)

    def departures(self) -> None:
        """Wait until the process of every held invocation is gone: its connection closes, unreleased."""
        for connection in self._waiting:
            if connection.recv(1):
                raise AssertionError("a held invocation sent more than its process id")
        self._waiting.clear()

    def close(self) -> None:
        self.release()
        self._server.close()
