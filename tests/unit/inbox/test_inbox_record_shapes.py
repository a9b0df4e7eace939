"""SQS records of shapes Lambda never sends, at the consumer: dead-lettered with their reason (the path of
every message that can never be applied), never an untyped error handed back."""

from __future__ import annotations

import json
from typing import Any

import pytest

from outbox.limits import Item
from outbox.transaction import Transaction
from outbox_inbox.adapters import DeadLetter
from outbox_inbox.consumer import InboxConsumer
from outbox_inbox.inbox import Inbox, InboxSettings, Outcome
from tests.support.inbox import cancelled, sqs_record


class Untouched:
    """The inbox table: a record that is dead-lettered before it is judged never reaches it."""

    def execute(self, transaction: Transaction, *, request_token: str | None = None) -> None:
        raise AssertionError("the inbox was written")

    def get(self, table_name: str, key: Item) -> Item | None:
        raise AssertionError("the inbox was read")


class Letters:
    def __init__(self) -> None:
        self.sent: list[DeadLetter] = []

    def send(self, letter: DeadLetter) -> None:
        self.sent.append(letter)


@pytest.mark.parametrize("attributes", [1, "text", ["MessageGroupId"]])
def test_an_sqs_record_whose_attributes_are_not_a_map_is_dead_lettered_not_an_attribute_error(
    attributes: Any,
) -> None:
    # Given a consumer, and a record with a good envelope whose attributes are no map
    letters = Letters()
    consumer = InboxConsumer(
        Inbox(InboxSettings("inbox", "summary"), Untouched(), Untouched()), dead_letters=letters
    )
    record = sqs_record(json.dumps(cancelled("o-1", 1).envelope())) | {"attributes": attributes}
    # When it is consumed
    outcome = consumer.consume_sqs_record(record)
    # Then it is dead-lettered whole, with the reason, and the inbox untouched
    assert outcome is Outcome.DEAD_LETTERED
    assert [(letter.body, letter.reason, letter.group_id) for letter in letters.sent] == [
        (record["body"], "malformed record: its attributes are not a map", None)
    ]
