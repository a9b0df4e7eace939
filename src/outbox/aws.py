"""boto3 clients, created once per process and reused across invocations.

Only adapters import this module: domain code never touches boto3. Importing it is cheap;
a client is built on first use (keeps cold starts short for code paths that never need it).
boto3 honours AWS_ENDPOINT_URL, which is how the local runtime points functions at moto.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator, Sequence
from typing import Any, Final

import boto3
import botocore.session
from botocore.config import Config
from botocore.exceptions import DataNotFoundError
from botocore.loaders import Loader

from outbox.errors import ConfigurationError, InvalidNumberError
from outbox.numbers import positive_whole_number

# Bounded waits: a hung connection must fail inside the Lambda timeout and be retried, not hang.
_CLIENT_CONFIG = Config(
    connect_timeout=3,
    read_timeout=10,
    retries={"mode": "standard", "max_attempts": 3},
)

# Calls a function makes while it publishes (gate reads, claims, the poison queue, row updates) must each
# end inside the time the publishing engine keeps free for them (outbox_publisher.retry): one attempt, short
# waits. A call that fails is not retried here: the engine hands the record back, or the sweeper reconciles.
INVOCATION_CONNECT_TIMEOUT_S: Final = 1
INVOCATION_READ_TIMEOUT_S: Final = 2
INVOCATION_CALL_S: Final = INVOCATION_CONNECT_TIMEOUT_S + INVOCATION_READ_TIMEOUT_S
"""The longest one such call can take."""
_INVOCATION_CONFIG = Config(
    connect_timeout=INVOCATION_CONNECT_TIMEOUT_S,
    read_timeout=INVOCATION_READ_TIMEOUT_S,
    retries={"mode": "standard", "total_max_attempts": 1},
)


TIMEOUT_SCALE_VARIABLE: Final = "OUTBOX_LOCAL_TIMEOUT_SCALE"
"""Set by the local runtime only (outbox_local.runtime_options.RuntimeOptions.timeout_scale): its AWS endpoint
is a moto server sharing a laptop's CPUs, which under load answers slower than AWS. The clients' connect and
read timeouts are multiplied by it (a whole number, 1 to 10); the time budgets the engines reserve per call
(INVOCATION_CALL_S) are not. Unset (as on AWS), every timeout is as written here."""
_MAX_TIMEOUT_SCALE: Final = 10


def _scaled(config: Config) -> Config:
    text = os.environ.get(TIMEOUT_SCALE_VARIABLE)
    if not text:
        return config
    try:
        scale = positive_whole_number(text, maximum=_MAX_TIMEOUT_SCALE)
    except InvalidNumberError as error:
        raise ConfigurationError(f"{TIMEOUT_SCALE_VARIABLE} {error}") from None
    return config.merge(
        Config(connect_timeout=config.connect_timeout * scale, read_timeout=config.read_timeout * scale)
    )


class _KnownServices(Sequence[str]):
    """`Loader.list_available_services`'s answer, listed only if read whole. Loading a model, botocore asks it
    only whether the one service is among them, which one directory answers. Listing all 400+ services'
    directories instead costs a traced publisher's cold start 45 M of its 1,190 M instructions, +4%, and more
    of its wall time (directory listings are kernel work): with the Powertools tracer, the difference
    between a cold start within 10% of its former figure and one past it (docs/BENCHMARKS.md)."""

    def __init__(self, loader: Loader, type_name: str) -> None:
        self._loader = loader
        self._type_name = type_name

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str) or not name or name.startswith(".") or os.path.basename(name) != name:
            return False  # never one service's directory
        try:
            self._loader.list_api_versions(name, self._type_name)
        except DataNotFoundError:
            return False
        return True

    @functools.cached_property
    def _all(self) -> list[str]:
        return Loader.list_available_services(self._loader, self._type_name)  # type: ignore[no-any-return]

    def __getitem__(self, index: Any) -> Any:
        return self._all[index]

    def __len__(self) -> int:
        return len(self._all)

    def __iter__(self) -> Iterator[str]:
        return iter(self._all)


class _Loader(Loader):  # type: ignore[misc]  # botocore is untyped
    def list_available_services(self, type_name: str) -> Sequence[str]:
        return _KnownServices(self, type_name)


@functools.cache
def session() -> boto3.session.Session:
    """The process's one boto3 session, which every client here is built from: a session loads botocore's
    endpoint data and each service's model once, so a second session would load them again."""
    core = botocore.session.get_session()
    data_path = core.get_config_variable("data_path")  # AWS_DATA_PATH's directories, searched first
    paths = (
        [os.path.expanduser(os.path.expandvars(p)) for p in data_path.split(os.pathsep)] if data_path else []
    )
    core.register_component("data_loader", _Loader(extra_search_paths=paths))
    return boto3.session.Session(botocore_session=core)


@functools.cache
def client(service_name: str) -> Any:
    """A client with botocore's standard retries (3 after the first attempt) and bounded waits: for your
    own code."""
    return session().client(service_name, config=_scaled(_CLIENT_CONFIG))


@functools.cache
def invocation_client(service_name: str, region_name: str | None = None) -> Any:
    """A client for calls that must fit a publishing invocation's deadline: one attempt, at most
    `INVOCATION_CALL_S` seconds. `region_name`: another region's endpoint (None: the function's region)."""
    return session().client(service_name, region_name=region_name, config=_scaled(_INVOCATION_CONFIG))
