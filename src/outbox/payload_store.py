"""The payload store: where envelopes too large for a row are kept (outbox.payload_refs). A port, so the
writer, the publisher and the inbox never touch boto3 (outbox.s3_payloads is the S3 adapter), with the typed
errors each caller branches on."""

from __future__ import annotations

from typing import Protocol

from outbox.errors import InvalidPayloadError, OutboxError
from outbox.payload_refs import PayloadRef


class PayloadStoreError(OutboxError):
    """The payload store did not do what was asked. Messages name codes, never keys' contents or bodies."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code


class PayloadUnavailableError(PayloadStoreError):
    """The store did not answer, throttled, failed or refused access: try again later, never poison."""


class PayloadMissingError(PayloadStoreError):
    """The object a ref names does not exist (or is no envelope): it never will, so the event is poison."""


class PayloadTooLargeError(InvalidPayloadError):
    """An envelope over the documented maximum (outbox.payload_refs.MAX_STORED_ENVELOPE_BYTES)."""


class PayloadStore(Protocol):
    def put(self, key: str, body: str) -> PayloadRef:
        """Stores `body` (UTF-8) under `key` (after the store's own prefix), and returns where; raises
        PayloadUnavailableError when it could not."""
        ...

    def read(self, ref: PayloadRef, *, max_bytes: int) -> str:
        """The body at `ref`; PayloadMissingError when there is none (or it is larger than `max_bytes`),
        PayloadUnavailableError when it could not be read now."""
        ...

    def size(self, ref: PayloadRef) -> int:
        """The size of the object at `ref` in bytes, with the same errors as `read`."""
        ...
