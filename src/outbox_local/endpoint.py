"""How a tool reaches the local runtime's AWS endpoint: the credentials it accepts and the environment to
export. Imports nothing heavy: `outbox local env` prints it without starting (or installing) moto."""

from __future__ import annotations

import shlex
from typing import Final

LOCAL_CREDENTIALS: Final = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


def environment(endpoint_url: str, region: str) -> dict[str, str]:
    """What any AWS SDK or the AWS CLI v2 needs to talk to the local endpoint."""
    return {
        "AWS_ENDPOINT_URL": endpoint_url,
        "AWS_REGION": region,
        "AWS_DEFAULT_REGION": region,
        "AWS_ACCESS_KEY_ID": LOCAL_CREDENTIALS["aws_access_key_id"],
        "AWS_SECRET_ACCESS_KEY": LOCAL_CREDENTIALS["aws_secret_access_key"],
        # botocore >= 1.44.4 would send DynamoDB Streams calls to a per-account endpoint moto does not serve.
        "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
    }


def exports(endpoint_url: str, region: str) -> str:
    """The shell lines that point a terminal at the local endpoint, and what AWS CLI v1 needs besides."""
    # Quoted for the shell that evals them: an endpoint may hold `&` or `?` (a path with a query).
    lines = [
        f"export {name}={shlex.quote(value)}" for name, value in environment(endpoint_url, region).items()
    ]
    lines.append(
        f"# AWS CLI v1 ignores AWS_ENDPOINT_URL for some services (SQS among them): pass --endpoint-url "
        f"{endpoint_url} to every aws command. CLI v2.13+ and the SDKs honour the variable."
    )
    return "\n".join(lines) + "\n"
