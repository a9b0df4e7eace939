"""Adapters against in-memory stand-ins for boto3 clients: every response entry checked, errors typed."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from outbox_publisher.adapters import (
    EventBridgeDestination,
    SnsDestination,
    SqsPoisonQueue,
    classify_call_error,
    classify_eventbridge_entry,
    classify_sns_entry,
)
from outbox_publisher.errors import DestinationCallError, FailureKind, PoisonQueueUnavailableError
from outbox_publisher.messages import GROUP_ID, SQS_MAX_MESSAGE_BYTES, Message
from outbox_publisher.poison import PoisonMessage, PoisonReason
from outbox_publisher.ports import EntryResult
from tests.support.clock import START
from tests.support.events import event

TOPIC = "arn:aws:sns:us-east-1:123456789012:events"


class Answering:
    """A stand-in client that records the request and answers with a canned response or error."""

    def __init__(self, answer: dict[str, Any] | Exception) -> None:
        self.answer = answer
        self.requests: list[dict[str, Any]] = []

    def _reply(self, **request: Any) -> dict[str, Any]:
        self.requests.append(request)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer

    publish_batch = put_events = send_message = _reply


def error(code: str, status: int = 400) -> ClientError:
    return ClientError({"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, "Op")


def messages(count: int) -> list[Message]:
    return [Message.of(event(f"o-{n}", 1)) for n in range(count)]


def test_sns_results_are_matched_by_entry_id_and_missing_ones_are_transient() -> None:
    # Given SNS answering: m0 ok, m1 failed by the service, m2 failed by the sender, m3 not at all
    client = Answering(
        {
            "Successful": [{"Id": "m0", "MessageId": "x"}],
            "Failed": [
                {"Id": "m2", "Code": "InvalidParameter", "SenderFault": True},
                {"Id": "m1", "Code": "InternalError", "SenderFault": False},
            ],
        }
    )

    # When four messages are published
    results = SnsDestination(client, TOPIC + ".fifo").publish(messages(4))

    # Then each entry gets its own verdict
    assert results == [
        EntryResult.success(),
        EntryResult.failure("InternalError", FailureKind.TRANSIENT),
        EntryResult.failure("InvalidParameter", FailureKind.PERMANENT),
        EntryResult.failure("MissingResult", FailureKind.TRANSIENT),
    ]
    # and the FIFO entries carried group and dedup ids
    assert all("MessageGroupId" in entry for entry in client.requests[0]["PublishBatchRequestEntries"])


def test_eventbridge_results_are_matched_by_position() -> None:
    # Given PutEvents answering: ok, throttled, malformed
    client = Answering(
        {
            "FailedEntryCount": 2,
            "Entries": [
                {"EventId": "e"},
                {"ErrorCode": "ThrottlingException"},
                {"ErrorCode": "MalformedDetail"},
            ],
        }
    )

    # When three messages are published
    results = EventBridgeDestination(client, "bus", "shop.orders").publish(messages(3))

    # Then
    assert results == [
        EntryResult.success(),
        EntryResult.failure("ThrottlingException", FailureKind.TRANSIENT),
        EntryResult.failure("MalformedDetail", FailureKind.PERMANENT),
    ]
    assert client.requests[0]["Entries"][0]["EventBusName"] == "bus"


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ({"FailedEntryCount": 0, "Entries": [{"EventId": "e"}]}, "IncompleteResponse"),
        ({"FailedEntryCount": 1, "Entries": [{"EventId": "e"}, {"EventId": "f"}]}, "InconsistentResponse"),
        ({"FailedEntryCount": 0, "Entries": [{"EventId": "e"}, {}]}, "MissingResult"),
    ],
)
def test_eventbridge_answers_that_do_not_add_up_are_not_trusted(
    answer: dict[str, Any], expected: str
) -> None:
    # Given an answer that does not account for both entries consistently
    # When two messages are published
    results = EventBridgeDestination(Answering(answer), "bus", "s").publish(messages(2))

    # Then at least one entry is a transient failure with that code, and none is wrongly trusted
    assert EntryResult.failure(expected, FailureKind.TRANSIENT) in results


@pytest.mark.parametrize(
    ("raised", "code", "kind"),
    [
        (error("ThrottlingException"), "ThrottlingException", FailureKind.TRANSIENT),
        (error("InternalException", 500), "InternalException", FailureKind.TRANSIENT),
        (error("AccessDeniedException"), "AccessDeniedException", FailureKind.BLOCKED),
        (error("ResourceNotFoundException"), "ResourceNotFoundException", FailureKind.BLOCKED),
        (error("ValidationException"), "ValidationException", FailureKind.PERMANENT),
        (
            EndpointConnectionError(endpoint_url="https://events"),
            "EndpointConnectionError",
            FailureKind.TRANSIENT,
        ),
    ],
)
def test_call_errors_become_typed_destination_errors(raised: Exception, code: str, kind: FailureKind) -> None:
    # Given a client whose call fails
    destination = EventBridgeDestination(Answering(raised), "bus", "s")

    # When a batch is published
    # Then a DestinationCallError says how to treat it, chained to the cause
    with pytest.raises(DestinationCallError) as caught:
        destination.publish(messages(1))
    assert (caught.value.code, caught.value.kind) == (code, kind)
    assert caught.value.__cause__ is raised


def test_sns_call_errors_are_typed_too() -> None:
    # Given SNS refusing the topic
    # When a batch is published
    # Then it blocks (permissions/resources are never the event's fault)
    with pytest.raises(DestinationCallError) as caught:
        SnsDestination(Answering(error("AuthorizationError", 403)), TOPIC).publish(messages(1))
    assert caught.value.kind is FailureKind.BLOCKED


def test_classification_tables() -> None:
    # Given documented codes
    # Then each lands in its class
    assert classify_sns_entry("KMSThrottling", True) is FailureKind.TRANSIENT
    assert classify_sns_entry("KMSAccessDenied", True) is FailureKind.BLOCKED
    assert classify_sns_entry("SomethingNew", False) is FailureKind.TRANSIENT
    assert classify_eventbridge_entry("InternalFailure") is FailureKind.TRANSIENT
    assert classify_eventbridge_entry("NotAuthorizedForDetailTypeException") is FailureKind.BLOCKED
    assert classify_eventbridge_entry("InvalidArgument") is FailureKind.PERMANENT
    assert classify_eventbridge_entry("SomethingNew") is FailureKind.BLOCKED
    assert classify_call_error("SomethingNew", 503) is FailureKind.TRANSIENT
    assert classify_call_error("BatchRequestTooLong", 400) is FailureKind.PERMANENT


def poison_message() -> PoisonMessage:
    row = event("o-1", 1).to_item()
    return PoisonMessage(PoisonReason.NO_ROUTE, "NoRoute", "no route", 0, row, START, "id-1", "Order#o-1", 1)


def test_a_row_too_big_for_one_sqs_message_is_sent_as_its_keys_rather_than_refused_forever() -> None:
    # Given an unreadable row whose control characters grow six-fold when escaped for SQS (over 1 MiB)
    row = event("o-1", 1).to_item() | {"payload": {"S": "\x01" * 200_000}}
    message = PoisonMessage(
        PoisonReason.INVALID_ROW, "InvalidPayload", "not JSON", 0, row, START, None, "Order#o-1", 1
    )
    client = Answering({"MessageId": "m"})

    # When it is sent to the poison queue
    SqsPoisonQueue(client, "https://sqs/poison").send(message)

    # Then SQS gets a message it can take: the reason, the row's keys, and why the row is not there
    [request] = client.requests
    assert len(request["MessageBody"].encode()) <= SQS_MAX_MESSAGE_BYTES
    body = json.loads(request["MessageBody"])
    assert body["row"] == {"aggregate_key": row["aggregate_key"], "seq": row["seq"]}
    assert "does not fit" in body["row_omitted"]
    assert body["reason"] == "invalid_row"


def test_a_row_that_fits_is_sent_whole_without_an_omission_note() -> None:
    # Given a poison row well within SQS's limit
    message = poison_message()
    client = Answering({"MessageId": "m"})

    # When it is sent
    SqsPoisonQueue(client, "https://sqs/poison").send(message)

    # Then the row is whole and nothing says otherwise
    body = json.loads(client.requests[0]["MessageBody"])
    assert "row_omitted" not in body
    assert body["row"] == message.row


def test_the_poison_queue_gets_the_whole_row_and_its_reason() -> None:
    # Given a FIFO poison queue
    client = Answering({"MessageId": "m"})

    # When a poison message is sent
    message = poison_message()
    SqsPoisonQueue(client, "https://sqs/poison.fifo").send(message)

    # Then the body holds the row, the attributes the reason, and FIFO ids are set
    [request] = client.requests
    body = json.loads(request["MessageBody"])
    assert body["row"] == message.row
    assert body["reason"] == "no_route"
    assert request["MessageAttributes"]["reason"]["StringValue"] == "no_route"
    assert request["MessageGroupId"] == "Order#o-1"
    assert len(request["MessageDeduplicationId"]) == 64


@pytest.mark.parametrize(
    "raised",
    [error("AWS.SimpleQueueService.NonExistentQueue"), EndpointConnectionError(endpoint_url="https://sqs")],
)
def test_poison_queue_failures_are_typed(raised: Exception) -> None:
    # Given a queue that cannot be reached
    # When a poison message is sent
    # Then PoisonQueueUnavailableError is raised from the cause
    with pytest.raises(PoisonQueueUnavailableError) as caught:
        SqsPoisonQueue(Answering(raised), "https://sqs/poison").send(poison_message())
    assert caught.value.__cause__ is raised


SQS_TEXT = re.compile("[\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]*")


def test_a_poison_row_with_characters_sqs_refuses_still_reaches_the_queue_whole() -> None:
    # Given an unreadable row (its payload is no JSON) holding U+FFFF and U+FFFE, characters SQS refuses
    # in a body or an attribute, whose event_id is such garbage too, on a FIFO queue, with a long key
    row = event("o-1", 1).to_item() | {
        "payload": {"S": "{bad \uffff json \ufffe"},
        "event_id": {"S": "id-\uffff"},
    }
    message = PoisonMessage(
        PoisonReason.INVALID_ROW, "InvalidPayload", "payload is not valid JSON", 0, row, START,
        "id-\uffff", "Order#" + "x" * 200, 1,
    )  # fmt: skip
    client = Answering({"MessageId": "m"})

    # When it is sent to the poison queue
    SqsPoisonQueue(client, "https://sqs/poison.fifo").send(message)

    # Then everything sent is text SQS takes, and the body still decodes to the row exactly as stored
    [request] = client.requests
    assert SQS_TEXT.fullmatch(request["MessageBody"])
    assert json.loads(request["MessageBody"])["row"] == row
    assert all(SQS_TEXT.fullmatch(a["StringValue"]) for a in request["MessageAttributes"].values())
    assert "event_id" not in request["MessageAttributes"]
    assert request["MessageAttributes"]["error_code"]["StringValue"] == "InvalidPayload"
    assert GROUP_ID.fullmatch(request["MessageGroupId"])


def test_a_rewritten_slots_poison_message_drops_the_row_in_the_table_before_the_row_it_replaced() -> None:
    # Given a rewritten slot whose row now and replaced row, 600 KB each, cannot both fit in one message
    row = event("o-1", 1).to_item() | {"payload": {"S": json.dumps({"note": "n" * 600_000})}}
    replaced = event("o-1", 1).to_item() | {"payload": {"S": json.dumps({"note": "o" * 600_000})}}
    message = PoisonMessage(
        PoisonReason.WRITER_CONTRACT, "SlotRewritten", "rewritten", 0, row, START, None, "Order#o-1", 1
    )
    client = Answering({"MessageId": "m"})

    # When it is sent to the poison queue
    SqsPoisonQueue(client, "https://sqs/poison").send(message._replace(replaced_row=replaced))

    # Then the replaced row, whose only copy this is, is kept whole; the row, still in the table, is cut to
    # its keys
    body = json.loads(client.requests[0]["MessageBody"])
    assert len(client.requests[0]["MessageBody"].encode()) <= SQS_MAX_MESSAGE_BYTES
    assert body["replaced_row"] == replaced
    assert body["row"] == {"aggregate_key": row["aggregate_key"], "seq": row["seq"]}
    assert "replaced_row_omitted" not in body
