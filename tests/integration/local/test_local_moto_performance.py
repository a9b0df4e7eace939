"""moto's hot paths made cheap (outbox_local.moto_performance) answer as moto does: queue counts, receives,
sends, deletes, receipt handles, an EventBridge rule's delivery to SQS."""

from __future__ import annotations

import json
import string
from typing import Any

import moto.core.utils
import moto.sqs.models
import moto.sqs.utils
import pytest

from outbox_local import moto_performance
from outbox_local.moto_performance import RECEIPT_HANDLE_LENGTH, lighter_moto
from tests.support.aws import endpoint_client


def test_the_lighter_hot_paths_answer_what_moto_answers(endpoint: str) -> None:
    # Given a queue with visible, delayed and in-flight messages, and a bus rule delivering to a queue
    sqs, events = endpoint_client(endpoint, "sqs"), endpoint_client(endpoint, "events")
    url = sqs.create_queue(QueueName="held")["QueueUrl"]
    for index in range(12):
        sqs.send_message(QueueUrl=url, MessageBody=str(index), DelaySeconds=300 if index % 4 == 0 else 0)
    sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=5, VisibilityTimeout=300)
    target = sqs.create_queue(QueueName="target")["QueueUrl"]
    target_arn = sqs.get_queue_attributes(QueueUrl=target, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    events.put_rule(Name="all", EventPattern=json.dumps({"source": ["tests"]}))
    events.put_targets(Rule="all", Targets=[{"Id": "q", "Arn": target_arn}])

    def observe() -> tuple[Any, ...]:
        counts = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        events.put_events(Entries=[{"Source": "tests", "DetailType": "T", "Detail": json.dumps({"n": 1})}])
        [delivered] = sqs.receive_message(QueueUrl=target)["Messages"]
        sqs.delete_message(QueueUrl=target, ReceiptHandle=delivered["ReceiptHandle"])
        event = json.loads(delivered["Body"])
        return counts, {key: value for key, value in event.items() if key not in {"id", "time"}}

    # When the same things are asked of moto as it is and with the hot paths made cheap
    before = observe()
    with lighter_moto():
        during = observe()
        received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    counts_after = observe()[0]

    # Then the answers are the same: of 12 messages, 3 delayed, 5 in flight, 4 visible, and those 4 received
    assert before == during
    counts = before[0]
    assert [counts[f"ApproximateNumberOfMessages{kind}"] for kind in ("", "Delayed", "NotVisible")] == [
        "4",
        "3",
        "5",
    ]
    assert len(received) == 4
    assert all(int(message["Body"]) % 4 for message in received)  # none of the delayed ones
    # and moto as it is then counts them in flight
    assert [counts_after[f"ApproximateNumberOfMessages{kind}"] for kind in ("", "Delayed", "NotVisible")] == [
        "0",
        "3",
        "9",
    ]


def test_receipt_handles_are_drawn_in_one_call_as_moto_draws_them_and_moto_s_is_back_after(
    endpoint: str,
) -> None:
    # Given moto's own receipt handles: the length and letters the layer copies
    original = moto.sqs.utils.generate_receipt_handle
    by_moto = {original() for _ in range(50)}
    assert {len(handle) for handle in by_moto} == {RECEIPT_HANDLE_LENGTH}
    assert set().union(*by_moto) <= set(string.ascii_lowercase)

    # When a message is received while the hot paths are cheap
    sqs = endpoint_client(endpoint, "sqs")
    url = sqs.create_queue(QueueName="handles")["QueueUrl"]
    with lighter_moto():
        assert vars(moto.sqs.models)["generate_receipt_handle"] is not original
        handles = []
        for body in ("a", "b", "c"):
            sqs.send_message(QueueUrl=url, MessageBody=body)
            received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1)["Messages"][0]
            handles.append(received["ReceiptHandle"])
            sqs.delete_message(QueueUrl=url, ReceiptHandle=received["ReceiptHandle"])

    # Then its handle is as moto's are, each its own, the message deleted by it; and moto's is back after
    assert all(
        len(handle) == RECEIPT_HANDLE_LENGTH and set(handle) <= set(string.ascii_lowercase)
        for handle in handles
    )
    assert len(set(handles)) == 3
    assert "Messages" not in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0)
    assert vars(moto.sqs.models)["generate_receipt_handle"] is original


class _Keyed:
    def __init__(self, kind: str, value: str) -> None:
        self.hash_key = type("Key", (), {"type": kind, "cast_value": value})()
        self.range_key = None


def _sends_and_deletes(sqs: Any, name: str) -> list[Any]:
    """What moto answers to sends and deletes on a standard queue and on FIFO queues with and without
    content-based deduplication, a duplicate within the window among them, and every kind of delete."""
    answers: list[Any] = []
    standard = sqs.create_queue(QueueName=f"{name}-standard")["QueueUrl"]
    content = sqs.create_queue(
        QueueName=f"{name}-content.fifo",
        Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"},
    )["QueueUrl"]
    explicit = sqs.create_queue(QueueName=f"{name}-explicit.fifo", Attributes={"FifoQueue": "true"})[
        "QueueUrl"
    ]
    for body in ("a", "b", "a"):
        sqs.send_message(QueueUrl=standard, MessageBody=body)
        sqs.send_message(QueueUrl=content, MessageBody=body, MessageGroupId="g")
        sqs.send_message(QueueUrl=explicit, MessageBody=body, MessageGroupId="g", MessageDeduplicationId=body)
    for refused in (
        {"QueueUrl": explicit, "MessageBody": "c", "MessageGroupId": "g"},  # no deduplication id
        {"QueueUrl": content, "MessageBody": "c"},  # no group
    ):
        with pytest.raises(sqs.exceptions.ClientError) as error:
            sqs.send_message(**refused)
        answers.append(error.value.response["Error"]["Code"])
    sqs.send_message_batch(
        QueueUrl=content,
        Entries=[{"Id": str(n), "MessageBody": body, "MessageGroupId": "h"} for n, body in enumerate("xyx")],
    )
    for url in (standard, content, explicit):
        answers.append(
            sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"][
                "ApproximateNumberOfMessages"
            ]
        )
        first = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0)["Messages"]
        again = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=300)["Messages"]
        answers.append(sorted(message["Body"] for message in again))
        old_handle, current = first[0]["ReceiptHandle"], again[-1]["ReceiptHandle"]
        sqs.delete_message(QueueUrl=url, ReceiptHandle=old_handle)  # a handle the message had before
        sqs.delete_message(QueueUrl=url, ReceiptHandle=old_handle)  # deleted already: success again
        sqs.delete_message(QueueUrl=url, ReceiptHandle=current)
        with pytest.raises(sqs.exceptions.ReceiptHandleIsInvalid):
            sqs.delete_message(QueueUrl=url, ReceiptHandle="not-a-handle")
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        answers.append(
            {key: value for key, value in attributes.items() if "Timestamp" not in key and "Arn" not in key}
        )
    return answers


def test_sends_and_deletes_answer_what_moto_answers(endpoint: str) -> None:
    # Given moto as it is, and then with the hot paths made cheap
    sqs = endpoint_client(endpoint, "sqs")
    before = _sends_and_deletes(sqs, "before")
    with lighter_moto():
        during = _sends_and_deletes(sqs, "during")

    # Then every answer is the same: duplicates dropped, refusals, counts, receives, deletes
    assert during == before
    assert before[0:2] == ["InvalidParameterValue", "MissingParameter"]
    # 3 on the standard queue; content-based: the second "a" and "x" dropped; explicit ids: the second "a"
    assert before[2::3] == ["3", "4", "2"]
    assert before[3] == ["a", "a", "b"]
    assert [counts["ApproximateNumberOfMessagesNotVisible"] for counts in before[4::3]] == ["1", "1", "0"]


def test_moto_s_send_reads_only_content_based_deduplication_of_a_queue_s_attributes(endpoint: str) -> None:
    """The canary of the cheap send: if moto's send path starts reading another attribute of the queue, the
    one-attribute answer given while it sends would be wrong, and this fails."""
    read: list[str] = []

    def note(what: str) -> None:
        if getattr(
            moto_performance._sending, "active", False
        ):  # reads while moto sends; not GetQueueAttributes
            read.append(what)

    class Recording(dict[str, Any]):
        def get(self, key: str, default: Any = None) -> Any:
            note(key)
            return super().get(key, default)

        def __getitem__(self, key: str) -> Any:
            note(key)
            return super().__getitem__(key)

        def __contains__(self, key: object) -> bool:
            note(str(key))
            return super().__contains__(key)

        def __iter__(self) -> Any:
            note("<every attribute>")
            return super().__iter__()

        def keys(self) -> Any:
            note("<every attribute>")
            return super().keys()

        def items(self) -> Any:
            note("<every attribute>")
            return super().items()

        def values(self) -> Any:
            note("<every attribute>")
            return super().values()

    sqs = endpoint_client(endpoint, "sqs")
    with lighter_moto():
        recorded = moto.sqs.models.Queue.attributes
        cheap = recorded.fget  # type: ignore[attr-defined]
        moto.sqs.models.Queue.attributes = property(lambda queue: Recording(cheap(queue)))  # type: ignore[method-assign,assignment]
        try:
            _sends_and_deletes(sqs, "canary")
        finally:
            moto.sqs.models.Queue.attributes = recorded  # type: ignore[method-assign]
    assert "ContentBasedDeduplication" in read
    assert set(read) == {"ContentBasedDeduplication"}
