"""boto3 clients, created once per process and reused across invocations.

Only adapters import this module: domain code never touches boto3. Importing it is cheap;
a client is built on first use (keeps cold starts short for code paths that never need it).
boto3 honours AWS_ENDPOINT_URL, which is how the local runtime points functions at moto.
"""

from __future__ import annotations

import functools
from typing import Any

import boto3
from botocore.config import Config

# Bounded waits: a hung connection must fail inside the Lambda timeout and be retried, not hang.
_CLIENT_CONFIG = Config(
    connect_timeout=3,
    read_timeout=10,
    retries={"mode": "standard", "max_attempts": 3},
)


@functools.cache
def client(service_name: str) -> Any:
    return boto3.session.Session().client(service_name, config=_CLIENT_CONFIG)
