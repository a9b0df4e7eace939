"""boto3 adapters behind the engine's ports: SNS, EventBridge, and the SQS poison queue; the only publisher
module that publishes through boto3.

Each checks every entry of every response and translates AWS errors, by code, never by message, into
`EntryResult`s and typed errors, following the services' documentation (docs/publisher.md, "Failure
classes"): SNS PublishBatch's `SenderFault` and EventBridge PutEvents' `ErrorCode` ("Retryable errors
include: InternalFailure, ThrottlingException"). Only errors about the event itself are poison; permission
and resource errors block, since a fixed IAM policy must let the same events through; and a code this module
does not know blocks too, which is visible and recoverable.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from outbox.aws import session
from outbox.aws_errors import THROTTLING_CODES, error_code, http_status
from outbox_publisher.errors import DestinationCallError, FailureKind, PoisonQueueUnavailableError
from outbox_publisher.messages import (
    EVENTBRIDGE_MAX_BATCH_BYTES,
    EVENTBRIDGE_MAX_ENTRY_BYTES,
    SNS_MAX_MESSAGE_BYTES,
    SQS_MAX_MESSAGE_BYTES,
    Message,
    entry_id,
    eventbridge_entry,
    eventbridge_size,
    is_fifo,
    message_group_id,
    sns_entry,
    sns_size,
)
from outbox_publisher.poison import PoisonMessage
from outbox_publisher.ports import EntryResult
from outbox_publisher.retry import PUBLISH_CONNECT_TIMEOUT_S, PUBLISH_READ_TIMEOUT_S
from outbox_publisher.routing import Destination

_TRANSIENT_CODES = THROTTLING_CODES | {
    "Throttled",
    "KMSThrottling",
    "KMSThrottlingException",
    "InternalError",
    "InternalFailure",
    "InternalException",
    "InternalServerError",
    "ServiceUnavailable",
    "ServiceUnavailableException",
    "RequestTimeout",
    "RequestTimeoutException",
}
_BLOCKING_CODES = frozenset(
    {
        "AuthorizationError",
        "AccessDenied",
        "AccessDeniedException",
        "InvalidSecurity",
        "NotFound",
        "ResourceNotFoundException",
        "PlatformApplicationDisabled",
        "EndpointDisabled",
        "KMSAccessDenied",
        "KMSDisabled",
        "KMSInvalidState",
        "KMSNotFound",
        "KMSOptInRequired",
        "InvalidAccountIdException",
        "NotAuthorizedForSourceException",
        "NotAuthorizedForDetailTypeException",
        "UnrecognizedClientException",
        "InvalidClientTokenId",
        "ExpiredToken",
        "ExpiredTokenException",
    }
)
_CONTENT_CODES = frozenset(
    {
        # Something in the request itself: the engine sends entries alone to find the culprit.
        "InvalidParameter",
        "InvalidParameterValue",
        "ValidationException",
        "ValidationError",
        "BatchRequestTooLong",
        "TooManyEntriesInBatchRequest",
        "BatchEntryIdsNotDistinct",
        "InvalidBatchEntryId",
        "EmptyBatchRequest",
        "InvalidArgument",
        "MalformedDetail",
        "RedactionFailure",
    }
)

# SQS takes only these characters (XML 1.0's) in a body or attribute value, and refuses (or, by older
# documentation, replaces with U+FFFD) any other: either way a poison row holding one, say U+FFFF,
# would never reach the queue whole, and a refusal would block its shard. Written as the (small) set of
# refused characters, the complement of [\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]: the
# same set, but the negated form over all of Unicode takes ~10-20 ms to compile, on every cold start.
_NOT_SQS_TEXT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_MAX_ATTRIBUTE_CHARS = 256

_log = logging.getLogger(__name__)


def sqs_safe_json(text: str) -> str:
    """JSON text with every character SQS refuses written as a JSON escape: the same JSON value.

    Outside strings JSON text is ASCII, so such a character can only sit in a string, where its
    \\uXXXX escape means the very same character.
    """
    return _NOT_SQS_TEXT.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def _attribute_value(value: str | None) -> str | None:
    # Attributes are a convenience for filtering (the body has it all): one SQS would refuse is left out.
    if not value or len(value) > _MAX_ATTRIBUTE_CHARS or _NOT_SQS_TEXT.search(value):
        return None
    return value


# SNS and EventBridge calls are not retried by botocore: the engine retries them itself, with jitter,
# only for the entries that failed, and never beyond the invocation's remaining time.
_NO_RETRIES = Config(
    connect_timeout=PUBLISH_CONNECT_TIMEOUT_S,
    read_timeout=PUBLISH_READ_TIMEOUT_S,
    retries={"mode": "standard", "total_max_attempts": 1},
)


@functools.cache
def publishing_client(service_name: str) -> Any:
    """A client for SNS or EventBridge, created once per process, without botocore's own retries."""
    return session().client(service_name, config=_NO_RETRIES)


def classify_call_error(code: str, status: int) -> FailureKind:
    if code in _TRANSIENT_CODES or status >= 500:
        return FailureKind.TRANSIENT
    if code in _CONTENT_CODES:
        return FailureKind.PERMANENT
    return FailureKind.BLOCKED


def classify_sns_entry(code: str, sender_fault: bool) -> FailureKind:
    if code in _TRANSIENT_CODES:
        return FailureKind.TRANSIENT
    if code in _BLOCKING_CODES:
        return FailureKind.BLOCKED
    return FailureKind.PERMANENT if sender_fault else FailureKind.TRANSIENT


def classify_eventbridge_entry(code: str) -> FailureKind:
    if code in _TRANSIENT_CODES:
        return FailureKind.TRANSIENT
    if code in _CONTENT_CODES:
        return FailureKind.PERMANENT
    return FailureKind.BLOCKED


def _call_error(error: Exception, operation: str) -> DestinationCallError:
    if isinstance(error, ClientError):
        code = error_code(error)
        kind = classify_call_error(code, http_status(error))
        return DestinationCallError(f"{operation} failed ({code})", code=code, kind=kind)
    # No answer at all (connection refused, timeout): worth another try.
    name = type(error).__name__
    return DestinationCallError(f"{operation} did not answer ({name})", code=name, kind=FailureKind.TRANSIENT)


class SnsDestination:
    destination = Destination.SNS

    def __init__(
        self, client: Any, topic_arn: str, *, max_message_bytes: int = SNS_MAX_MESSAGE_BYTES
    ) -> None:
        """`max_message_bytes`: the topic's MaximumMessageSize, which bounds each message and a PublishBatch's
        total alike."""
        self._client = client
        self._topic_arn = topic_arn
        self.max_entry_bytes = max_message_bytes
        self.max_batch_bytes = max_message_bytes
        # A FIFO topic's ARN ends in .fifo; it needs group and deduplication ids on every entry.
        self._fifo = is_fifo(topic_arn)

    def size_of(self, message: Message) -> int:
        return sns_size(message)

    def publish(self, messages: Sequence[Message]) -> list[EntryResult]:
        entries = [sns_entry(message, position, fifo=self._fifo) for position, message in enumerate(messages)]
        try:
            response = self._client.publish_batch(
                TopicArn=self._topic_arn, PublishBatchRequestEntries=entries
            )
        except (ClientError, BotoCoreError) as error:
            raise _call_error(error, "SNS PublishBatch") from error
        successful = {str(item.get("Id")) for item in response.get("Successful", [])}
        failed: Mapping[str, Mapping[str, Any]] = {
            str(item.get("Id")): item for item in response.get("Failed", [])
        }
        results = []
        for position in range(len(messages)):
            identifier = entry_id(position)
            if identifier in failed:
                item = failed[identifier]
                code = str(item.get("Code", "Unknown"))
                results.append(
                    EntryResult.failure(code, classify_sns_entry(code, bool(item.get("SenderFault"))))
                )
            elif identifier in successful:
                results.append(EntryResult.success())
            else:
                # Neither accepted nor refused: assume not published, and try again.
                results.append(EntryResult.failure("MissingResult", FailureKind.TRANSIENT))
        return results


class EventBridgeDestination:
    destination = Destination.EVENTBRIDGE

    def __init__(
        self,
        client: Any,
        event_bus_name: str,
        source: str,
        *,
        max_entry_bytes: int = EVENTBRIDGE_MAX_ENTRY_BYTES,
    ) -> None:
        """`max_entry_bytes`: PutEvents' entry limit as configured (outbox_publisher.config); a request's
        total is held to the same figure."""
        self.max_entry_bytes = max_entry_bytes
        self.max_batch_bytes = max(max_entry_bytes, EVENTBRIDGE_MAX_BATCH_BYTES)
        self._client = client
        self._bus = event_bus_name
        self._source = source

    def size_of(self, message: Message) -> int:
        return eventbridge_size(message, source=self._source)

    def publish(self, messages: Sequence[Message]) -> list[EntryResult]:
        entries = [
            eventbridge_entry(message, source=self._source, event_bus_name=self._bus) for message in messages
        ]
        try:
            response = self._client.put_events(Entries=entries)
        except (ClientError, BotoCoreError) as error:
            raise _call_error(error, "EventBridge PutEvents") from error
        answers = response.get("Entries", [])
        if len(answers) != len(messages):
            # Results are matched to entries by position only; a short answer matches nothing.
            return [EntryResult.failure("IncompleteResponse", FailureKind.TRANSIENT)] * len(messages)
        results = []
        for answer in answers:
            code = answer.get("ErrorCode")
            if code:
                results.append(EntryResult.failure(str(code), classify_eventbridge_entry(str(code))))
            elif answer.get("EventId"):
                results.append(EntryResult.success())
            else:
                results.append(EntryResult.failure("MissingResult", FailureKind.TRANSIENT))
        failed_count = int(response.get("FailedEntryCount", 0))
        if failed_count != sum(1 for result in results if not result.ok):
            # FailedEntryCount and the entries disagree: trust neither for what was published.
            return [
                result
                if not result.ok
                else EntryResult.failure("InconsistentResponse", FailureKind.TRANSIENT)
                for result in results
            ]
        return results


def _sqs_message_size(body: str, attributes: Mapping[str, Mapping[str, str]]) -> int:
    """SQS counts the body and, per attribute, its name, data type and value, all as UTF-8 bytes."""
    return len(body.encode()) + sum(
        len(name.encode()) + len(value["DataType"].encode()) + len(value["StringValue"].encode())
        for name, value in attributes.items()
    )


class SqsPoisonQueue:
    def __init__(self, client: Any, queue_url: str) -> None:
        self._client = client
        self._queue_url = queue_url
        self._fifo = is_fifo(queue_url)

    @staticmethod
    def _encode(message: PoisonMessage) -> tuple[str, dict[str, dict[str, str]]]:
        attributes = (
            ("reason", message.reason.value),
            ("error_code", message.error_code),
            # From an unreadable row, event_id may be anything at all.
            ("event_id", message.event_id),
        )
        return sqs_safe_json(message.to_json()), {
            name: {"DataType": "String", "StringValue": safe}
            for name, value in attributes
            if (safe := _attribute_value(value)) is not None
        }

    def send(self, message: PoisonMessage) -> None:
        body, attributes = self._encode(message)
        too_large = f"does not fit in one {SQS_MAX_MESSAGE_BYTES}-byte SQS message"
        if _sqs_message_size(body, attributes) > SQS_MAX_MESSAGE_BYTES:
            # SQS would refuse it every time, and a refused poison message is retried: the shard would
            # block. The row itself stays in the table (FAILED, no TTL), so its keys are enough to find it.
            message = message.without_row(f"the row {too_large}")
            body, attributes = self._encode(message)
        if _sqs_message_size(body, attributes) > SQS_MAX_MESSAGE_BYTES:
            # A rewritten slot's earlier row: the stream record was its last copy.
            _log.error(
                "the row a writer replaced is too large for the poison message and is lost",
                extra={"event_id": message.event_id, "aggregate_key": message.aggregate_key},
            )
            body, attributes = self._encode(message.without_replaced_row(f"the replaced row {too_large}"))
        arguments: dict[str, Any] = {
            "QueueUrl": self._queue_url,
            "MessageBody": body,
            "MessageAttributes": attributes,
        }
        if self._fifo:
            arguments["MessageGroupId"] = message_group_id(message.aggregate_key or "unknown")
            arguments["MessageDeduplicationId"] = hashlib.sha256(body.encode()).hexdigest()
        try:
            self._client.send_message(**arguments)
        except ClientError as error:
            code = error_code(error)
            raise PoisonQueueUnavailableError(f"SQS SendMessage failed ({code})", code=code) from error
        except BotoCoreError as error:
            name = type(error).__name__
            raise PoisonQueueUnavailableError(
                f"SQS SendMessage did not answer ({name})", code=name
            ) from error
