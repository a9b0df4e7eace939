"""boto3 clients, created once per process and reused across invocations.

Only adapters import this module: domain code never touches boto3. Importing it is cheap;
a client is built on first use (keeps cold starts short for code paths that never need it).
boto3 honours AWS_ENDPOINT_URL, which is how the local runtime points functions at moto.
"""

from __future__ import annotations

import functools
import os
from typing import Any, Final

import boto3
import botocore.session
from botocore.config import Config
from botocore.exceptions import DataNotFoundError
from botocore.loaders import Loader, instance_cache

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


class _ModelLoader(Loader):  # type: ignore[misc]  # botocore is untyped
    """botocore's data loader, except that a client's model is found without listing every service first.

    Before it loads a model, botocore's loader lists every service it ships (400+ directories, each listed
    again for its API versions, for each of the two models a client loads) only to check that the one asked
    for is among them: most of a cold start's file-system work. Here the check looks in that one service's
    directory, by the same test (some API version holds the model); the model, its extras and its search
    paths are botocore's, and a service it does not find goes through botocore's own path (and its error).
    """

    @instance_cache  # type: ignore[untyped-decorator]  # botocore is untyped
    def load_service_model(self, service_name: str, type_name: str, api_version: str | None = None) -> Any:
        # The steps of botocore's own method after its check: a botocore without them gets that method.
        replicable = hasattr(self, "_find_extras") and hasattr(self, "_extras_processor")
        if not replicable or not self._finds(service_name, type_name):
            return super().load_service_model(service_name, type_name, api_version)
        if api_version is None:
            api_version = self.determine_latest_version(service_name, type_name)
        model = self.load_data(os.path.join(service_name, api_version, type_name))
        self._extras_processor.process(model, self._find_extras(service_name, type_name, api_version))
        return model

    def _finds(self, service_name: str, type_name: str) -> bool:
        if not service_name or service_name.startswith(".") or os.path.basename(service_name) != service_name:
            return False  # never one service's directory
        try:
            self.list_api_versions(service_name, type_name)
        except DataNotFoundError:
            return False
        return True


def _model_loader(data_path: str | None) -> _ModelLoader:
    """What `botocore.loaders.create_loader` builds (AWS_DATA_PATH's directories searched first)."""
    if data_path is None:
        return _ModelLoader()
    paths = [os.path.expanduser(os.path.expandvars(path)) for path in data_path.split(os.pathsep)]
    return _ModelLoader(extra_search_paths=paths)


@functools.cache
def session() -> boto3.session.Session:
    """The process's one boto3 session, which every client here is built from: a session loads botocore's
    endpoint data and each service's model once, so a second session would load them all again (most of a
    client's cost at a cold start). Clients are built once per process (below), each with its own config."""
    core = botocore.session.get_session()
    core.register_component("data_loader", _model_loader(core.get_config_variable("data_path")))
    return boto3.session.Session(botocore_session=core)


@functools.cache
def client(service_name: str) -> Any:
    """A client with botocore's standard retries (3 attempts) and bounded waits: for your own code."""
    return session().client(service_name, config=_CLIENT_CONFIG)


@functools.cache
def invocation_client(service_name: str) -> Any:
    """A client for calls that must fit a publishing invocation's deadline: one attempt, at most
    `INVOCATION_CALL_S` seconds."""
    return session().client(service_name, config=_INVOCATION_CONFIG)
