"""Outbox rows from other writers (any language, any care for the row contract), through the real stream to
the publisher's Lambda handler: rows put with every attribute type, fields missing or extra, keys the contract
does not allow, and rows rewritten or deleted after they were written.

Each record is published, skipped or held, or its row is poison with its reason; never an untyped exception,
never a handed-back record. Nothing partial: the publisher only ever marks the rows it was given (status and
the marking and lease attributes, nothing else), a row it marked PUBLISHED had its event accepted by a
destination, a row it marked FAILED has its message on the poison queue. No payload value or key name shows
in the logs, the metrics, a `last_error` or a poison message's reason.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError
from hypothesis import assume, given
from hypothesis import strategies as st

from outbox.model import LEASE_OWNER, LEASE_UNTIL, PENDING_INDEX_PARTITION_KEY, TTL_ATTRIBUTE
from tests.hardening.checks import OUTBOX_KEY, TableState, marker, restore
from tests.hardening.profiles import examples
from tests.hardening.publishing import Delivery, judge_delivery
from tests.hardening.strategies import (
    hostile_text,
    json_keys,
    json_objects,
    json_text,
    raw_json_texts,
    stored_attribute_values,
    unmarked_text,
)
from tests.hardening.tally import Source
from tests.support.events import event
from tests.support.streams import lambda_event, read_stream

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")

CATEGORY = "outbox-rows"
_numbers = iter(range(1, 10**9))


class Writer:
    """Another writer on the outbox table, and the stream records its writes make."""

    def __init__(self, delivery: Delivery) -> None:
        self.delivery = delivery
        self.world = delivery.world
        self._seen: str | None = None
        self.records()  # what earlier tests left on the stream is not this test's
        self.baseline = TableState.read(self.world.dynamodb, self.world.tables.outbox, OUTBOX_KEY)
        """The table as every input finds it: each is put back to it afterwards."""

    def records(self) -> list[dict[str, Any]]:
        raw = read_stream(self.world.streams, self.world.tables.outbox_stream_arn, after=self._seen)
        if raw:
            self._seen = raw[-1]["dynamodb"]["SequenceNumber"]
        return raw

    def event(self) -> dict[str, Any]:
        """The Lambda event for what was written since the last call."""
        return lambda_event(self.records(), self.world.tables.outbox_stream_arn)

    def put(self, item: dict[str, Any]) -> None:
        try:
            self.world.put_raw(item)
        except ClientError:
            # DynamoDB refuses it: nothing for the publisher to get, and no input to judge.
            self.reset()
            assume(False)

    def reset(self) -> None:
        """The table back as every input finds it, and what that wrote to the stream read past."""
        restore(self.world.dynamodb, self.baseline)
        self.records()


@pytest.fixture(scope="module")
def writer(delivery: Delivery) -> Writer:
    return Writer(delivery)


def deliver(writer: Writer, *, source: Source, first: Callable[[], None] | None = None) -> None:
    """Runs the handler on what the writer wrote (after `first`, if given: an earlier invocation), judges it,
    and puts the table back as the test found it."""
    try:
        if first is not None:
            first()
        result = writer.delivery.run(writer.event())
        judge_delivery(CATEGORY, result, source=source)
    finally:
        writer.reset()


def row(**changes: Any) -> dict[str, Any]:
    """A valid PENDING row of an aggregate no other input uses, its payload holding markers."""
    item = event(f"row-{next(_numbers)}", 1, payload={marker(1): [marker(2)]}).to_item()
    return item | changes


# --- Listed ---------------------------------------------------------------------------------------------

LISTED_ROWS: list[tuple[str, dict[str, Any]]] = [
    ("seq-1.5", row(seq={"N": "1.5"})),
    ("seq-1e2", row(seq={"N": "1E+2"})),
    ("seq-38-digits", row(seq={"N": "9" * 38})),
    ("seq-2-no-predecessor", row(seq={"N": "2"})),
    ("key-mismatch", row(aggregate_key={"S": "Order#somebody-else"})),
    ("key-without-hash", row(aggregate_key={"S": "no-type-here"})),
    ("payload-not-json", row(payload={"S": f'{{"{marker(3)}": '})),
    ("payload-1e400", row(payload={"S": f'{{"{marker(4)}": 1e400}}'})),
    ("payload-5000-digits", row(payload={"S": f'{{"{marker(5)}": {"9" * 5000}}}'})),
    ("payload-lone-surrogate", row(payload={"S": f'{{"\\ud800{marker(6)}": "\\udfff"}}'})),
    ("payload-duplicate-keys", row(payload={"S": f'{{"{marker(7)}": 1, "{marker(7)}": 2}}'})),
    ("payload-a-map", row(payload={"M": {marker(8): {"S": marker(9)}}})),
    ("payload-binary", row(payload={"B": b'{"a": 1}'})),
    ("payload-too-large", row(payload={"S": f'{{"{marker(10)}": "{"x" * 300_000}"}}'})),
    ("payload-deep", row(payload={"S": '{"a":' + "[" * 2000 + "]" * 2000 + "}"})),
    ("event-id-missing", {k: v for k, v in row().items() if k != "event_id"}),
    ("event-id-a-number", row(event_id={"N": "1"})),
    ("event-type-bad", row(event_type={"S": "Order Placed!"})),
    ("status-missing", {k: v for k, v in row().items() if k != "status"}),
    ("status-unknown", row(status={"S": "SHIPPED"})),
    ("status-published", row(status={"S": "PUBLISHED"})),
    ("status-failed", row(status={"S": "FAILED"})),
    ("status-bool", row(status={"BOOL": True})),
    ("occurred-at-non-ascii-digits", row(occurred_at={"S": "\u0662\u0660\u0662\u0666-11-29T12:00:00.000Z"})),
    ("occurred-at-ancient", row(occurred_at={"S": "1999-01-01T00:00:00.000Z"})),
    ("occurred-at-future", row(occurred_at={"S": "2999-01-01T00:00:00.000Z"})),
    ("schema-version-zero", row(schema_version={"N": "0"})),
    ("correlation-id-empty", row(correlation_id={"S": ""})),
    ("expires-at-on-pending", row(expires_at={"N": "1"})),
    ("no-pending-shard", {k: v for k, v in row().items() if k != "pending_shard"}),
    ("unknown-attributes", row(**{marker(11): {"S": marker(12)}, "extra": {"SS": [marker(13)]}})),
    ("aggregate-type-unrouted", row(aggregate_key={"S": "Payment#p"}, aggregate_type={"S": "Payment"})),
]


@pytest.mark.parametrize("item", [item for _, item in LISTED_ROWS], ids=[i for i, _ in LISTED_ROWS])
def test_listed_rows_are_published_skipped_held_or_poison_and_nothing_partial(
    writer: Writer, item: dict[str, Any]
) -> None:
    # Given another writer's listed row / When its stream record reaches the publisher / Then a verdict
    writer.put(item)
    deliver(writer, source=Source.LISTED)


def test_a_pending_row_rewritten_with_another_event_is_handled(writer: Writer) -> None:
    # Given a PENDING row that another writer then overwrites with another event
    original = row()
    writer.put(original)
    writer.put(row(aggregate_key=original["aggregate_key"], payload={"S": f'{{"{marker(14)}": 1}}'}))
    # When both records reach the publisher / Then each has its verdict, nothing partial, nothing leaked
    deliver(writer, source=Source.LISTED)


def test_a_published_row_rewritten_is_handled(writer: Writer) -> None:
    # Given a row published, then overwritten by another writer as a PENDING row again
    original = row()
    writer.put(original)

    def publish_then_rewrite() -> None:
        writer.delivery.run(writer.event())
        writer.put(row(aggregate_key=original["aggregate_key"], aggregate_id=original["aggregate_id"]))

    # When the MODIFY reaches the publisher / Then a verdict, nothing partial, nothing leaked
    deliver(writer, source=Source.LISTED, first=publish_then_rewrite)


def test_a_pending_row_deleted_is_handled(writer: Writer) -> None:
    # Given a PENDING row another writer deletes before it was published
    doomed = row()
    writer.put(doomed)
    writer.world.dynamodb.delete_item(
        TableName=writer.world.tables.outbox,
        Key={"aggregate_key": doomed["aggregate_key"], "seq": doomed["seq"]},
    )
    # When both records reach the publisher / Then a verdict, nothing partial, nothing leaked
    deliver(writer, source=Source.LISTED)


# --- Generated ------------------------------------------------------------------------------------------

# Fields the contract names, and those the publishing paths keep, given values of any type DynamoDB stores.
# Markers go only into the payload and into attributes nobody knows: ids and known fields are logged on
# purpose.
CONTRACT_FIELDS = (
    "event_id",
    "event_type",
    "schema_version",
    "aggregate_type",
    "aggregate_id",
    "payload",
    "occurred_at",
    "correlation_id",
    "status",
    "attempts",
    "last_error",
    "published_at",
    TTL_ATTRIBUTE,
    "generation",
    LEASE_OWNER,
    LEASE_UNTIL,
)
# The keys of the table and of its indexes must have their schema's types, or DynamoDB refuses the put.
seq_values = st.one_of(
    st.integers(min_value=1, max_value=5).map(str),
    st.sampled_from(("1.5", "1E+2", "1.0", "9" * 38, "1E+125")),
).map(lambda text: {"N": text})
aggregate_keys = st.one_of(
    st.just(None),
    unmarked_text.filter(lambda text: 0 < len(text.encode()) <= 1024).map(lambda text: {"S": text}),
)
payloads = st.one_of(
    json_objects.map(lambda value: {"S": json_text(value)}),
    raw_json_texts(json_objects).filter(bool).map(lambda text: {"S": text}),
    stored_attribute_values(hostile_text),
)


@st.composite
def rows(draw: Callable[..., Any]) -> dict[str, Any]:
    item = row(payload=draw(payloads), seq=draw(seq_values))
    if (key := draw(aggregate_keys)) is not None:
        item["aggregate_key"] = key
    for name in draw(st.lists(st.sampled_from(CONTRACT_FIELDS), max_size=4, unique=True)):
        if draw(st.booleans()):
            item.pop(name, None)
        else:
            item[name] = draw(stored_attribute_values(unmarked_text))
    if draw(st.booleans()):
        item.pop(PENDING_INDEX_PARTITION_KEY, None)
    extra_names = json_keys.filter(lambda name: 0 < len(name.encode()) <= 255 and name not in item)
    item.update(draw(st.dictionaries(extra_names, stored_attribute_values(hostile_text), max_size=2)))
    return item


@examples(1.5)
@given(item=rows(), then=st.sampled_from(("nothing", "nothing", "rewrite", "delete")))
def test_generated_rows_are_published_skipped_held_or_poison_and_nothing_partial(
    writer: Writer, item: dict[str, Any], then: str
) -> None:
    # Given another writer's generated row, perhaps then rewritten with another or deleted
    writer.put(item)
    if then == "rewrite":
        writer.put(row(aggregate_key=item["aggregate_key"], seq=item["seq"]))
    elif then == "delete":
        writer.world.dynamodb.delete_item(
            TableName=writer.world.tables.outbox,
            Key={"aggregate_key": item["aggregate_key"], "seq": item["seq"]},
        )
    # When what it wrote reaches the publisher / Then a verdict, nothing partial, nothing leaked
    deliver(writer, source=Source.GENERATED)
