"""The S3 adapter of the payload store (outbox.payload_store): the only module that stores or reads bodies
through boto3. AWS errors are read by code (outbox.aws_errors) and become the store's typed errors."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, NamedTuple

from botocore.exceptions import BotoCoreError, ClientError

from outbox.aws import invocation_client
from outbox.aws_errors import error_code, http_status
from outbox.config import optional
from outbox.errors import ConfigurationError
from outbox.payload_refs import DEFAULT_OFFLOAD_THRESHOLD_BYTES, MAX_OFFLOAD_THRESHOLD_BYTES, PayloadRef
from outbox.payload_store import PayloadMissingError, PayloadUnavailableError

# What S3 answers for an object that is not there: GetObject's NoSuchKey; HeadObject has no body, so 404.
_MISSING_CODES = frozenset({"NoSuchKey", "NoSuchBucket", "404", "NotFound", "InvalidRange"})
"""InvalidRange: the object is empty (a bounded GET asks for a range), so it holds no envelope."""
_NOT_FOUND = 404


class S3PayloadStore:
    """Envelopes in one bucket, under `prefix` (writes); reads follow each ref's own bucket.

    `client` is an S3 client whose timeouts fit its caller: the writer's (outbox.aws.client) within a
    request, the publisher's (outbox.aws.invocation_client) within its deadline. Objects are written with
    the bucket's default encryption (SSE-S3, or SSE-KMS under the customer-managed key): no key is named
    here, so the writer's role needs only kms:GenerateDataKey through the bucket's key."""

    def __init__(self, client: Any = None, bucket: str = "", *, prefix: str = "") -> None:
        """`client`: None for outbox.aws's invocation client, built on first use (most invocations read no
        stored envelope, and a client costs a cold start 5-15 ms). `bucket`: where `put` writes (a reader
        needs none)."""
        self._given_client = client
        self.bucket = bucket
        self.prefix = prefix

    @functools.cached_property
    def _client(self) -> Any:
        return self._given_client if self._given_client is not None else invocation_client("s3")

    def put(self, key: str, body: str) -> PayloadRef:
        if not self.bucket:
            raise ConfigurationError("this payload store has no bucket to write to")
        key = self.prefix + key
        try:
            self._client.put_object(
                Bucket=self.bucket, Key=key, Body=body.encode(), ContentType="application/json"
            )
        except (ClientError, BotoCoreError) as error:
            raise _unavailable(error, "S3 PutObject") from error
        return PayloadRef(self.bucket, key)

    def read(self, ref: PayloadRef, *, max_bytes: int) -> str:
        try:
            # One bounded GET: the range stops a body larger than any envelope from filling the memory.
            response = self._client.get_object(Bucket=ref.bucket, Key=ref.key, Range=f"bytes=0-{max_bytes}")
            data = response["Body"].read()
        except (ClientError, BotoCoreError) as error:
            raise _read_error(error, "S3 GetObject") from error
        if len(data) > max_bytes:
            raise PayloadMissingError(
                f"the stored envelope is larger than {max_bytes} bytes", code="PayloadTooLarge"
            )
        try:
            return bytes(data).decode()
        except UnicodeDecodeError:
            raise PayloadMissingError(
                "the stored envelope is not UTF-8 text", code="PayloadNotText"
            ) from None

    def size(self, ref: PayloadRef) -> int:
        try:
            response = self._client.head_object(Bucket=ref.bucket, Key=ref.key)
        except (ClientError, BotoCoreError) as error:
            raise _read_error(error, "S3 HeadObject") from error
        return int(response.get("ContentLength", 0))


def _read_error(error: Exception, operation: str) -> Exception:
    if isinstance(error, ClientError):
        code = error_code(error)
        if code in _MISSING_CODES or (http_status(error) == _NOT_FOUND and code != "AccessDenied"):
            return PayloadMissingError(f"{operation}: the stored envelope does not exist ({code})", code=code)
    return _unavailable(error, operation)


def _unavailable(error: Exception, operation: str) -> PayloadUnavailableError:
    if isinstance(error, ClientError):
        code = error_code(error)
        return PayloadUnavailableError(f"{operation} failed ({code})", code=code)
    name = type(error).__name__
    return PayloadUnavailableError(f"{operation} did not answer ({name})", code=name)


ENV_PAYLOAD_BUCKET = "OUTBOX_PAYLOAD_BUCKET"
"""A writer's bucket for stored envelopes (the constructs' `writer_environment` sets it)."""
ENV_PAYLOAD_PREFIX = "OUTBOX_PAYLOAD_PREFIX"
ENV_OFFLOAD_ABOVE_BYTES = "OUTBOX_OFFLOAD_ABOVE_BYTES"


class PayloadStoreConfig(NamedTuple):
    """A writer's payload store, from its environment (None: no bucket set, rows hold every payload)."""

    bucket: str
    prefix: str
    offload_above_bytes: int

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> PayloadStoreConfig | None:
        bucket = optional(env, ENV_PAYLOAD_BUCKET)
        if bucket is None:
            return None
        threshold = _setting_bytes(env)
        return cls(bucket, optional(env, ENV_PAYLOAD_PREFIX) or "", threshold)

    def store(self, client: Any) -> S3PayloadStore:
        return S3PayloadStore(client, self.bucket, prefix=self.prefix)


def _setting_bytes(env: Mapping[str, str]) -> int:
    text = optional(env, ENV_OFFLOAD_ABOVE_BYTES)
    if text is None:
        return DEFAULT_OFFLOAD_THRESHOLD_BYTES
    if not (text.isascii() and text.isdigit()) or int(text) > MAX_OFFLOAD_THRESHOLD_BYTES:
        raise ConfigurationError(
            f"{ENV_OFFLOAD_ABOVE_BYTES} must be a whole number of bytes up to {MAX_OFFLOAD_THRESHOLD_BYTES} "
            "(an envelope below it stays in its row, which DynamoDB holds to 400 KB)"
        )
    return int(text)
