"""The AWS clients the operations use, built once from one session: real AWS or the local runtime.

Every call is bounded (connect and read timeouts) and retried by botocore's standard mode: an operator's
command must answer or fail with a reason, never hang.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config

_CONFIG = Config(connect_timeout=5, read_timeout=20, retries={"mode": "standard", "max_attempts": 5})


@dataclass(frozen=True)
class OpsClients:
    session: boto3.session.Session
    endpoint_url: str | None = None

    @classmethod
    def connect(
        cls, *, region: str | None = None, profile: str | None = None, endpoint_url: str | None = None
    ) -> OpsClients:
        """The default credential chain (or `profile`); `endpoint_url` (or AWS_ENDPOINT_URL, which boto3
        reads itself) points every client at the local runtime."""
        return cls(boto3.session.Session(region_name=region, profile_name=profile), endpoint_url)

    @functools.cached_property
    def dynamodb(self) -> Any:
        return self.client("dynamodb")

    @functools.cached_property
    def streams(self) -> Any:
        return self.client("dynamodbstreams")

    @functools.cached_property
    def sqs(self) -> Any:
        return self.client("sqs")

    @functools.cached_property
    def lambda_(self) -> Any:
        return self.client("lambda")

    @functools.cached_property
    def cloudwatch(self) -> Any:
        return self.client("cloudwatch")

    @functools.cached_property
    def cloudformation(self) -> Any:
        return self.client("cloudformation")

    @functools.cached_property
    def sts(self) -> Any:
        return self.client("sts")

    def client(self, service: str) -> Any:
        arguments: dict[str, Any] = {"config": _CONFIG}
        if self.endpoint_url:
            arguments["endpoint_url"] = self.endpoint_url
        return self.session.client(service, **arguments)

    def caller(self) -> str:
        """Who runs the operation, as AWS knows them (recorded on every row it changes)."""
        arn: str = self.sts.get_caller_identity()["Arn"]
        return arn
