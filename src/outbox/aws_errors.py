"""Reading AWS errors by their code and HTTP status, never by message text (messages change, codes do not).

Shared by every adapter of the project: each one decides what a code means for its own caller.
"""

from __future__ import annotations

from botocore.exceptions import ClientError

# Throttling, as the services this project calls spell it (DynamoDB, SNS, EventBridge, SQS).
THROTTLING_CODES = frozenset(
    {
        "ThrottlingException",
        "ThrottlingError",
        "Throttling",
        "ProvisionedThroughputExceededException",
        "ProvisionedThroughputExceeded",
        "RequestLimitExceeded",
        "ThrottledException",
        "TooManyRequestsException",
    }
)


def error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", "Unknown"))


def http_status(error: ClientError) -> int:
    return int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
