"""moto's state, as bytes and back: the one module that touches moto's internals for persistence.

Why internals: moto has no persistence API. Its request recorder replays requests, which would re-run
everything time- and stream-dependent (new sequence numbers, new receipt handles, messages sent again), so
the runtime saves the objects themselves: every backend moto has created (`BackendDict._instances`, the
services in use: their accounts and regions), pickled in one go so that objects shared between backends
stay shared. A restore puts each saved backend in place of the empty one moto would create, in moto's own
`BackendDict` (the object its request handlers look backends up in).

Pickle handles all of moto's objects but four kinds, which this module's pickler (and no other) reduces:
- `threading` locks, conditions and events (an SQS queue's `_messages_lock`, moto's own caches' locks):
  saved as new, unlocked ones. A cut is taken while no request runs (`outbox_local.persistence.cut`), so
  no lock is held and nobody waits on a condition.
- private keys of the `cryptography` package (a KMS key's `private_key`): saved as PKCS#8 DER, loaded back.
- a `defaultdict` whose factory is a lambda (SSM's `_resource_tags`, `lambda: defaultdict(dict)`), which
  pickle cannot name: saved with a factory that makes a copy of what the lambda made when saved (a fresh,
  empty value, as the lambda makes each time); and a subclass whose `__init__` takes other arguments
  (SSM's `ParameterDict`), which pickle would call with the factory alone: rebuilt without it.
- an S3 object (`FakeKey`): pickled as moto's own `__getstate__` does (its attributes and its body; moto's
  `__setstate__` rebuilds it), but with its body read by position (`os.pread`). moto keeps a body over
  ~5 MB (MOTO_S3_DEFAULT_KEY_BUFFER_SIZE) in a temporary file; a snapshot writer forked from the runtime
  shares that file's read position with it, so the seek-and-read of `__getstate__` in the writer and a
  GetObject's in the runtime would move each other's position and read parts of the wrong bytes.

SQS receives are the one kind of request a cut does not wait for (a long poll would hold every cut, and so
every request, up to 20 s): `capture` holds every queue's own lock instead, the lock each receive holds
while it changes its queue (`outbox_local.moto_isolation`) and lets go while it long-polls.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import io
import os
import pickle
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from typing import Any, cast

from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    load_der_private_key,
)
from moto.core.base_backend import BackendDict, BaseBackend
from moto.moto_api._internal.models import moto_api_backend
from moto.s3.models import FakeKey
from moto.sqs.models import SQSBackend

from outbox_local.errors import LocalRuntimeError

_LOCK = type(threading.Lock())
_RLOCK = type(threading.RLock())
_PRIVATE_KEYS: tuple[type, ...] = PrivateKeyTypes.__args__  # type: ignore[attr-defined]


class MotoStateError(LocalRuntimeError):
    """Saved moto state cannot be restored (another moto, or a backend this moto does not have)."""


def _private_key(der: bytes) -> PrivateKeyTypes:
    return load_der_private_key(der, password=None)


class _MotoPickler(pickle.Pickler):
    """A pickler for moto's objects; the reducers are this pickler's own, not pickle's global registry."""

    def reducer_override(self, obj: Any) -> Any:
        fresh = _FRESH.get(type(obj))
        if fresh is not None:
            return fresh, ()
        if isinstance(obj, threading.Condition):
            return threading.Condition, ()
        if isinstance(obj, defaultdict) and (type(obj) is not defaultdict or _unnamed(obj.default_factory)):
            return _reduced_defaultdict(obj)
        if isinstance(obj, FakeKey):
            return _reduced_key(obj)
        if isinstance(obj, _PRIVATE_KEYS):
            key: Any = obj
            der = key.private_bytes(Encoding.DER, PrivateFormat.PKCS8, NoEncryption())
            return _private_key, (der,)
        return NotImplemented


_FRESH: dict[type, Any] = {_LOCK: threading.Lock, _RLOCK: threading.RLock, threading.Event: threading.Event}
"""Saved as a new one: a cut runs while no request holds a lock or waits on an event."""


def _reduced_key(key: FakeKey) -> tuple[Any, ...]:
    """What moto 5.2.5's `FakeKey.__getstate__` answers (its attributes, its body as `value`, no buffer, no
    lock), unpickled by moto's own `__setstate__`; the body read without moving the file's position."""
    state = key.__dict__.copy()
    state["value"] = _body(key)
    del state["_value_buffer"]
    del state["lock"]
    return _new_key, (type(key),), state


def _new_key(kind: type[FakeKey]) -> FakeKey:
    return object.__new__(kind)  # the attributes and the body follow: moto's __setstate__


_READ_CHUNK = 16 * 1024 * 1024


def _body(key: FakeKey) -> bytes:
    buffer = key._value_buffer  # a tempfile.SpooledTemporaryFile: in memory, then in a file once rolled over
    if buffer.closed:
        return b""  # as __getstate__: a deleted key's body is gone
    if not buffer._rolled:  # type: ignore[attr-defined]
        memory = cast(io.BytesIO, buffer._file)
        return memory.getvalue()  # this process's own memory: no position shared
    descriptor = buffer.fileno()
    chunks, offset = [], 0
    while chunk := os.pread(descriptor, _READ_CHUNK, offset):
        chunks.append(chunk)
        offset += len(chunk)
    body = b"".join(chunks)
    if len(body) != key.contentsize:  # part of it still in the file object's write buffer, not in the file
        raise MotoStateError(
            f"S3 object {key.bucket_name}/{key.name}: {len(body)} bytes in its file, {key.contentsize} "
            "written"
        )
    return body


def _reduced_defaultdict(saved: defaultdict[Any, Any]) -> tuple[Any, ...]:
    factory = saved.default_factory
    if _unnamed(factory):
        factory = functools.partial(copy.deepcopy, factory())  # type: ignore[misc]
    # A subclass's own __init__ (SSM's ParameterDict takes an account and a region) is not called again: the
    # object is rebuilt as it was, its attributes and items put back.
    attributes = getattr(saved, "__dict__", {})
    return _rebuilt_defaultdict, (type(saved), factory, attributes), None, None, iter(saved.items())


def _rebuilt_defaultdict(kind: type[defaultdict[Any, Any]], factory: Any, attributes: dict[str, Any]) -> Any:
    rebuilt = defaultdict.__new__(kind)
    defaultdict.__init__(rebuilt, factory)
    if attributes:  # a plain defaultdict has no attributes of its own (nor a __dict__ to hold them)
        vars(rebuilt).update(attributes)
    return rebuilt


def _unnamed(factory: object) -> bool:
    """A function pickle cannot refer to by its name (a lambda, or one defined inside another)."""
    qualified = getattr(factory, "__qualname__", "")
    return callable(factory) and ("<lambda>" in qualified or "<locals>" in qualified)


def _in_use() -> Iterator[tuple[BackendDict[Any], str, str, BaseBackend]]:
    in_use: list[BackendDict[Any]] = vars(BackendDict)["_instances"]  # moto's list of the services in use
    for backends in list(in_use):
        for account_id, regions in list(backends.items()):
            for region, backend in list(regions.items()):
                yield backends, account_id, region, backend


def capture() -> bytes:
    """Every backend moto holds now, as bytes. Call it while no request but SQS receives runs (the cut)."""
    with queues_held():
        return dump()


def dump() -> bytes:
    """Every backend moto holds, as bytes, with no lock taken: in a cut, under `queues_held` (or in a process
    forked under it, where no other thread runs)."""
    saved = [
        (backends.backend, backends.service_name, account_id, region, backend)
        for backends, account_id, region, backend in _in_use()
    ]
    buffer = io.BytesIO()
    _MotoPickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(saved)
    return buffer.getvalue()


_QUEUE_LOCK_RETRY_S = 0.001


@contextlib.contextmanager
def queues_held() -> Iterator[None]:
    """Every SQS queue's lock, all at once: no receive changes a queue meanwhile. A receive holding its
    queue's lock may take a dead-letter queue's (moving a message there), so the locks are tried, never
    waited for: on one refused, all are let go and taken again a moment later (no order to deadlock on)."""
    locks = [
        queue._messages_lock
        for *_, backend in _in_use()
        if isinstance(backend, SQSBackend)
        for queue in list(backend.queues.values())
    ]
    while True:
        taken = []
        for lock in locks:
            if not lock.acquire(blocking=False):
                break
            taken.append(lock)
        else:
            break
        for lock in reversed(taken):
            lock.release()
        time.sleep(_QUEUE_LOCK_RETRY_S)
    try:
        yield
    finally:
        for lock in reversed(taken):
            lock.release()


def reset() -> None:
    """Empty moto, as its `/moto-api/reset` endpoint does (this very call), in this process: a runtime resets
    and restores moto before its endpoint serves anyone, so no client is served from an empty moto."""
    moto_api_backend.reset()


def restore(data: bytes) -> int:
    """Put the saved backends in place in this process's moto, before any request is served. Answers how
    many backends were restored. Backends moto holds that the saved state does not are left as they are (a
    runtime restores into a moto it has just reset)."""
    try:
        saved = pickle.loads(data)  # noqa: S301 - the runtime's own state file, in its own state directory
    except (pickle.UnpicklingError, AttributeError, ImportError, EOFError, TypeError) as error:
        raise MotoStateError(f"the saved moto state cannot be read by this moto: {error}") from error
    for backend_class, service_name, account_id, region, backend in saved:
        backends = _backend_dict(backend_class, service_name)
        backends[account_id][region] = backend
    return len(saved)


def _backend_dict(backend_class: type, service_name: str) -> BackendDict[Any]:
    """The `BackendDict` moto's handlers read `backend_class`'s backends from: the module-level one beside
    the class (e.g. `moto.sqs.models.sqs_backends`)."""
    module = sys.modules[backend_class.__module__]
    for value in vars(module).values():
        if isinstance(value, BackendDict) and getattr(value, "backend", None) is backend_class:
            return value
    raise MotoStateError(f"moto has no backends of {service_name} ({backend_class.__qualname__}) to restore")
