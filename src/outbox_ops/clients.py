"""The AWS clients the operations use, built once from one session: real AWS or the local runtime.

Every call is bounded (connect and read timeouts) and retried by botocore's standard mode: an operator's
command must answer or fail with a reason, never hang.

The local runtime from a fresh shell: given an `endpoint_url` on a loopback address (`outbox local up`'s),
the endpoint is asked what it runs (`GET /_outbox/runtime`); nothing listening there is a
LocalRuntimeNotAnsweringError, the local cause, rather than botocore's connection error. With no region or
credentials configured, the session takes the region the runtime says it runs in and the test credentials
it accepts, so the command `local up` prints works as printed. A region or credentials you configured
(arguments, variables, profile, config files) are used as they are, and nothing changes for an endpoint
that is not a loopback address (AWS, a proxy).
"""

from __future__ import annotations

import functools
import ipaddress
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Final

import boto3
from botocore.config import Config

from outbox_ops.errors import OperationError

_CONFIG = Config(connect_timeout=5, read_timeout=20, retries={"mode": "standard", "max_attempts": 5})
LOCAL_CREDENTIALS: Final = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
"""What the local runtime accepts (moto checks no signature): outbox_local.endpoint.LOCAL_CREDENTIALS."""
LOCAL_DEFAULT_REGION: Final = "us-east-1"
"""A loopback endpoint that does not say its region (not the local runtime: a bare moto server) gets moto's
default region."""
_PROBE_TIMEOUT_S = 5


ENDPOINT_VARIABLE = "AWS_ENDPOINT_URL"
"""What boto3 reads as every client's endpoint when none is given."""


class LocalRuntimeNotAnsweringError(OperationError):
    """The loopback endpoint given has nothing listening: the local runtime is not running there."""


@dataclass(frozen=True)
class OpsClients:
    session: boto3.session.Session
    endpoint_url: str | None = None

    @classmethod
    def connect(
        cls, *, region: str | None = None, profile: str | None = None, endpoint_url: str | None = None
    ) -> OpsClients:
        """The default credential chain (or `profile`); `endpoint_url` (or AWS_ENDPOINT_URL, which boto3
        reads itself) points every client at the local runtime: a loopback one, either way, gets the local
        runtime's region and test credentials where none are configured."""
        session = boto3.session.Session(region_name=region, profile_name=profile)
        endpoint_url = endpoint_url or os.environ.get(ENDPOINT_VARIABLE) or None
        if endpoint_url and is_loopback(endpoint_url):
            session = _with_local_defaults(session, endpoint_url, profile)
        return cls(session, endpoint_url)

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


def is_loopback(endpoint_url: str) -> bool:
    """Whether the endpoint is this machine (`localhost`, 127.0.0.0/8, ::1): the local runtime's, never
    AWS's."""
    host = urllib.parse.urlsplit(endpoint_url).hostname
    if host is None:
        return False
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _with_local_defaults(
    session: boto3.session.Session, endpoint_url: str, profile: str | None
) -> boto3.session.Session:
    """The session, with the local runtime's region and test credentials for what is not configured. The
    endpoint is asked first in any case: nothing listening there is the local cause, said before any call."""
    local_region = runtime_region(endpoint_url)
    needs_region = session.region_name is None
    needs_credentials = session.get_credentials() is None
    if not needs_region and not needs_credentials:
        return session
    region = local_region if needs_region else session.region_name
    credentials = LOCAL_CREDENTIALS if needs_credentials else {}
    return boto3.session.Session(region_name=region, profile_name=profile, **credentials)


def runtime_region(endpoint_url: str) -> str:
    """The region the local runtime at `endpoint_url` runs in, as it says; moto's default for a loopback
    endpoint that does not say. Nothing listening there is an error that says so."""
    url = f"{endpoint_url.rstrip('/')}/_outbox/runtime"
    try:
        with urllib.request.urlopen(url, timeout=_PROBE_TIMEOUT_S) as response:  # noqa: S310 - loopback only
            answer: Any = json.loads(response.read())
    except urllib.error.HTTPError:
        return LOCAL_DEFAULT_REGION  # something answers, not the local runtime: a bare moto server
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise LocalRuntimeNotAnsweringError(
            f"no local runtime answers at {endpoint_url} ({reason}): start it with `outbox local up`, "
            "or pass the --endpoint-url it printed"
        ) from None
    except ValueError:
        return LOCAL_DEFAULT_REGION
    region = answer.get("region") if isinstance(answer, dict) else None
    return region if isinstance(region, str) and region else LOCAL_DEFAULT_REGION
