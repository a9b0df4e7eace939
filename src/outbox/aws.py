"""boto3 clients, created once per process and reused across invocations.

Only adapters import this module: domain code never touches boto3. Importing it is cheap;
a client is built on first use (keeps cold starts short for code paths that never need it).
boto3 honours AWS_ENDPOINT_URL, which is how the local runtime points functions at moto.
"""

from __future__ import annotations

import functools
from typing import Any, Final

import boto3
from botocore.config import Config

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


@functools.cache
def session() -> boto3.session.Session:
    """The process's one boto3 session, which every client here is built from: a session loads botocore's
    endpoint data and each service's model once, so a second session would load them again."""
    return boto3.session.Session()


@functools.cache
def client(service_name: str) -> Any:
    """A client with botocore's standard retries (3 after the first attempt) and bounded waits: for your
    own code."""
    return session().client(service_name, config=_CLIENT_CONFIG)


@functools.cache
def invocation_client(service_name: str) -> Any:
    """A client for calls that must fit a publishing invocation's deadline: one attempt, at most
    `INVOCATION_CALL_S` seconds."""
    return session().client(service_name, config=_INVOCATION_CONFIG)
