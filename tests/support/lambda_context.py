"""The one fake Lambda context of the test suite: the attributes Powertools reads, and the remaining time."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class FakeLambdaContext:
    remaining_ms: int = 60_000
    function_name: str = "outbox-function"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:outbox-function"
    aws_request_id: str = "lambda-request-1"
    log_group_name: str = "/aws/lambda/outbox-function"
    log_stream_name: str = "stream"
    function_version: str = "$LATEST"

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms
