"""X-Ray subsegments from a Lambda function, sent to Lambda's X-Ray endpoint without the X-Ray SDK.

With active tracing, Lambda records each invocation's segment itself and passes its trace header to the
function (`_X_AMZN_TRACE_ID`: `Root=...;Parent=...;Sampled=1`). What a function adds are subsegments: its
handler, its own methods, one per AWS call. This module records those and sends each, when it closes, as
one UDP datagram to the address Lambda gives (`AWS_XRAY_DAEMON_ADDRESS`), in X-Ray's documented segment
document format: a subsegment sent on its own, with `type`, `trace_id` and `parent_id`. That is what
Powertools' tracer makes the X-Ray SDK do (its streaming threshold set to 0).

Why not the SDK: it entered maintenance mode on 2026-02-25 and reaches end of support on 2027-02-25
(AWS's X-Ray SDK and daemon support timeline), and importing it (with wrapt and asyncio) was about a
tenth of an `import boto3` on every traced cold start. `Recorder` is a Powertools tracing provider
(`in_subsegment`, `put_annotation`, `put_metadata`, `patch`), so the handlers keep Powertools' tracer.

Only sampled invocations are recorded (Lambda decides; `Sampled=1`). Recording never fails the caller: a
datagram that cannot be sent is logged and dropped, as the SDK does.
"""

from __future__ import annotations

import json
import logging
import math
import os
import socket
import time
import traceback
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from typing import Any, NamedTuple

from outbox import xray_botocore
from outbox.errors import ConfigurationError

TRACE_HEADER_ENV = "_X_AMZN_TRACE_ID"
"""Set by Lambda's runtime for each invocation."""
DAEMON_ADDRESS_ENV = "AWS_XRAY_DAEMON_ADDRESS"
DEFAULT_DAEMON_ADDRESS = "127.0.0.1:2000"
PROTOCOL_HEADER = b'{"format": "json", "version": 1}\n'
MAX_DATAGRAM_BYTES = 65_535 - 20 - 8
"""The most one UDP datagram over IPv4 carries (65,535 bytes less the IP and UDP headers; Lambda's daemon
address is IPv4), under X-Ray's 64 KB limit on a document: a larger one is refused by `sendto` (EMSGSIZE)."""
LOCAL = "local"
"""The namespace of a subsegment of the function's own work (the SDK's); an AWS call's is `aws`."""
STACK_FRAMES = 10
"""Frames kept of an exception's stack (the SDK's default `max_trace_back`)."""
_INVALID_NAME_CHARACTERS = str.maketrans("", "", "?;*()!$~^<>")

logger = logging.getLogger(__name__)


class TraceContext(NamedTuple):
    """A sampled invocation's trace header: its trace, the segment it runs in, and what else it carries."""

    root: str
    parent: str
    extra: str
    """Fields other than Root, Parent and Sampled (e.g. Lineage), passed on to the services called."""

    @classmethod
    def sampled(cls, header: str | None) -> TraceContext | None:
        """The context of a sampled trace header; None when there is none, or it is not sampled."""
        fields = dict(part.strip().partition("=")[::2] for part in (header or "").split(";") if "=" in part)
        root, parent = fields.pop("Root", ""), fields.pop("Parent", "")
        if not root or not parent or fields.pop("Sampled", "") != "1":
            return None
        return cls(root, parent, "".join(f";{name}={value}" for name, value in fields.items()))

    def header_for(self, subsegment_id: str) -> str:
        return f"Root={self.root};Parent={subsegment_id};Sampled=1{self.extra}"


def daemon_address(value: str | None) -> tuple[str, int]:
    """Where to send: `host:port`, or `udp:host:port tcp:host:port` (either order), as Lambda sets it."""
    text = (value or DEFAULT_DAEMON_ADDRESS).strip()
    parts = text.split()
    udp = [part.removeprefix("udp:") for part in parts if part.startswith("udp:")]
    candidate = udp[0] if len(parts) == 2 and len(udp) == 1 else text if len(parts) == 1 else ""
    host, _, port = candidate.rpartition(":")
    if not host or not port.isascii() or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigurationError(f"{DAEMON_ADDRESS_ENV} must be host:port or 'udp:host:port tcp:host:port'")
    return host, int(port)


class Subsegment:
    """An open subsegment. It also serves as Powertools' segment (`put_annotation`, `add_exception`...)."""

    __slots__ = (
        "annotations",
        "aws",
        "context",
        "end_time",
        "error",
        "exceptions",
        "fault",
        "http_status",
        "id",
        "metadata",
        "name",
        "namespace",
        "parent_id",
        "start_time",
        "throttle",
    )

    def __init__(self, name: str, context: TraceContext, parent_id: str, namespace: str) -> None:
        self.id = os.urandom(8).hex()
        self.name = name.translate(_INVALID_NAME_CHARACTERS)
        self.context, self.parent_id, self.namespace = context, parent_id, namespace
        self.start_time, self.end_time = time.time(), 0.0
        self.annotations: dict[str, Any] = {}
        self.metadata: dict[str, dict[str, Any]] = {}
        self.aws: dict[str, Any] = {}
        self.http_status: int | None = None
        self.exceptions: list[dict[str, Any]] = []
        self.error = self.fault = self.throttle = False

    def put_annotation(self, key: str, value: Any) -> None:
        """Kept when X-Ray can index it: a string, a finite number or a boolean under a key of letters,
        digits, `_` (NaN and infinities have no JSON form: a document holding one is refused whole)."""
        if isinstance(value, float) and not math.isfinite(value):
            return
        if isinstance(value, str | int | float | bool) and key.replace("_", "").isalnum() and key.isascii():
            self.annotations[key] = value

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None:
        if not namespace.startswith("AWS."):  # reserved for AWS
            self.metadata.setdefault(namespace, {})[key] = value

    def add_exception(
        self, exception: BaseException, stack: Any = None, remote: bool = False, message: str = ""
    ) -> None:
        """An exception in the recorded work: a fault, unless a status code already said what it was.

        Recorded by its type and stack, not its text: that may quote the request (botocore's
        ParamValidationError quotes the value refused, an item's attribute or a message body). `message`
        is for a text known to carry none (an AWS error code)."""
        if self.http_status is None:
            self.fault = True
        frames = stack if stack is not None else traceback.extract_tb(exception.__traceback__)
        self.exceptions.append(
            {
                "id": os.urandom(8).hex(),
                "type": type(exception).__name__,
                "remote": remote,
                "stack": [
                    {"path": os.path.basename(frame[0]), "line": frame[1], "label": frame[2]}
                    for frame in list(frames)[-STACK_FRAMES:]
                ],
            }
            | ({"message": message} if message else {})
        )

    def set_status(self, status: int | None) -> None:
        """An HTTP answer's status, and what it says: 429 a throttle (an error), 4XX an error, 5XX a fault."""
        if status is None:
            return
        self.http_status = status
        self.throttle = status == 429
        self.error = 400 <= status < 500
        self.fault = status >= 500

    def close(self, end_time: float | None = None) -> None:
        self.end_time = end_time or time.time()

    def add_subsegment(self, subsegment: Any) -> None:
        """Powertools' segment interface: children link themselves to their parent when they open."""

    def remove_subsegment(self, subsegment: Any) -> None:
        """Powertools' segment interface: see `add_subsegment`."""

    def document(self) -> dict[str, Any]:
        """The segment document X-Ray takes for a subsegment sent on its own."""
        fields: dict[str, Any] = {
            "id": self.id,
            "name": self.name,
            "start_time": self.start_time,
            "end_time": self.end_time,
            "type": "subsegment",
            "trace_id": self.context.root,
            "parent_id": self.parent_id,
            "in_progress": False,
        }
        optional = {
            "namespace": self.namespace,
            "aws": self.aws,
            "http": {"response": {"status": self.http_status}} if self.http_status is not None else None,
            "annotations": self.annotations,
            "metadata": self.metadata,
            "error": self.error,
            "throttle": self.throttle,
            "fault": self.fault,
            "cause": self._cause(),
        }
        return fields | {name: value for name, value in optional.items() if value}

    def _cause(self) -> dict[str, Any] | None:
        return {"working_directory": os.getcwd(), "exceptions": self.exceptions} if self.exceptions else None


class _Unrecorded:
    """What an unsampled (or untraced) invocation's code annotates: nothing is kept."""

    def put_annotation(self, key: str, value: Any) -> None: ...
    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None: ...
    def add_exception(
        self, exception: BaseException, stack: Any = None, remote: bool = False, message: str = ""
    ) -> None: ...
    def close(self, end_time: float | None = None) -> None: ...
    def add_subsegment(self, subsegment: Any) -> None: ...
    def remove_subsegment(self, subsegment: Any) -> None: ...


UNRECORDED = _Unrecorded()


class UdpEmitter:
    """Sends each document as one datagram, from one socket per process (opened at the first send)."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.address = address
        self._socket: socket.socket | None = None

    def __call__(self, datagram: bytes) -> None:
        try:
            if self._socket is None:
                self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self._socket.sendto(datagram, self.address)
        except OSError as error:
            logger.warning("X-Ray subsegment not sent: %s", type(error).__name__)


class Recorder:
    """Records subsegments of the current invocation and sends each as it closes.

    The open subsegments are kept per context (contextvars): per thread, and per asyncio task, so tasks
    running at once each record under their own. A subsegment's parent is the one open around it, or the
    invocation's segment. A Powertools tracing provider (duck-typed: `outbox.tracing` hands it over).
    """

    def __init__(
        self,
        emit: Callable[[bytes], None] | None = None,
        environ: Mapping[str, str] = os.environ,
    ) -> None:
        self._environ = environ
        self._emit = emit or UdpEmitter(daemon_address(environ.get(DAEMON_ADDRESS_ENV)))
        # A tuple, never changed in place: a task started inside a subsegment sees it (its context is a
        # copy), and what the task opens stays its own.
        self._open: ContextVar[tuple[Subsegment, ...]] = ContextVar(f"xray_open_{id(self):x}", default=())
        self._unpatch: list[Callable[[], None]] = []

    def current(self) -> Subsegment | None:
        stack = self._open.get()
        return stack[-1] if stack else None

    def begin(self, name: str, namespace: str = LOCAL) -> Subsegment | None:
        """A new subsegment under the open one; None when this invocation is not sampled."""
        stack = self._open.get()
        context = TraceContext.sampled(self._environ.get(TRACE_HEADER_ENV))
        if stack and stack[0].context != context:
            # Left open by an earlier invocation of this warm process (a suspended traced generator, kept): no
            # parent for this one, which has its own segment (even in the same trace) and sampling decision.
            stack = ()
            self._open.set(stack)
        if stack:
            parent = stack[-1]
            subsegment = Subsegment(name, parent.context, parent.id, namespace)
        elif context is None:
            return None
        else:
            subsegment = Subsegment(name, context, context.parent, namespace)
        self._open.set((*stack, subsegment))
        return subsegment

    def end(self, subsegment: Subsegment) -> None:
        stack = self._open.get()
        if subsegment in stack:
            self._open.set(stack[: stack.index(subsegment)])
        if not subsegment.end_time:
            subsegment.close()
        datagram = _datagram(subsegment.document())
        if datagram is not None:
            self._emit(datagram)

    # Powertools' tracing provider (aws_lambda_powertools.tracing.base.BaseProvider).

    @contextmanager
    def in_subsegment(self, name: str | None = None, **kwargs: Any) -> Iterator[Subsegment | _Unrecorded]:
        subsegment = self.begin(name or "## unnamed", kwargs.get("namespace", LOCAL))
        if subsegment is None:
            yield UNRECORDED
            return
        try:
            yield subsegment
        except GeneratorExit:  # a traced generator its caller stopped early: done, not failed
            raise
        except BaseException as error:
            subsegment.add_exception(error)
            raise
        finally:
            self.end(subsegment)

    @asynccontextmanager
    async def in_subsegment_async(
        self, name: str | None = None, **kwargs: Any
    ) -> AsyncIterator[Subsegment | _Unrecorded]:
        with self.in_subsegment(name, **kwargs) as subsegment:
            yield subsegment

    def put_annotation(self, key: str, value: Any) -> None:
        subsegment = self.current()
        if subsegment is not None:
            subsegment.put_annotation(key, value)

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None:
        subsegment = self.current()
        if subsegment is not None:
            subsegment.put_metadata(key, value, namespace)

    def patch(self, modules: Sequence[str]) -> None:
        """Record calls through these libraries: botocore is the one this recorder knows."""
        unknown = sorted(set(modules) - {"botocore"})
        if unknown:
            raise ConfigurationError(f"cannot trace {unknown}: this recorder traces botocore only")
        if not self._unpatch:
            self._unpatch.append(xray_botocore.instrument(self))

    def patch_all(self) -> None:
        self.patch(["botocore"])

    def unpatch(self) -> None:
        """Stop recording AWS calls (tests)."""
        while self._unpatch:
            self._unpatch.pop()()


def _datagram(document: dict[str, Any]) -> bytes | None:
    """The document as one datagram; without its metadata when that is too large for one or is not JSON
    (a cycle, a key JSON has no form for, NaN), else not at all (logged)."""
    for attempt in (document, {name: value for name, value in document.items() if name != "metadata"}):
        try:
            body = json.dumps(attempt, default=_as_text, separators=(",", ":"), allow_nan=False).encode()
        except Exception:  # noqa: S112 - metadata is the caller's arbitrary objects; recording never fails it
            continue
        if len(PROTOCOL_HEADER) + len(body) <= MAX_DATAGRAM_BYTES:
            return PROTOCOL_HEADER + body
    logger.warning("X-Ray subsegment %s not sent: larger than one datagram or not JSON", document["name"])
    return None


def _as_text(value: Any) -> str:
    """Metadata JSON has no form for, as text (the X-Ray SDK's `str`); an exception by its type, for its text
    may quote the request (Powertools records a traced function's exception as metadata)."""
    return type(value).__name__ if isinstance(value, BaseException) else str(value)
